#pragma once
// State shared by the hooks of one process (srun, slurmstepd, sbatch or
// salloc) and the context-specific parts of the plugin.

extern "C" {
#include <slurm/spank.h>
}

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "autoresume/client.hpp"
#include "autoresume/plugin_config.hpp"
#include "autoresume/resume.hpp"

namespace ar::spank {

inline constexpr const char* kTag = "auto_resume";
// What a hook returns on failure: Slurm tests for a negative value, and
// ESPANK_ERROR (3000) is not one.
inline constexpr int kFailure = -1;

// A step this srun registered with the controller.
struct ProtectedStep {
  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;
  std::string run_id;
  std::uint32_t attempt = 0;
  std::vector<std::string> argv;  // srun's own, for a relaunch
  std::uint32_t nodes = 0;        // the nodes the step runs on (0: Slurm did not say)
  bool own_master_port = false;   // MASTER_PORT was set by the plugin
};

class VerdictWatcher;

struct PluginState {
  PluginConfig config;
  // Why plugstack.conf's arguments were refused; empty when they were not.
  // Plain commands still run under an `optional` line (Slurm ignores the
  // failed init); --auto-resume=1 does not.
  std::string config_error;
  // The last --auto-resume value Slurm handed to the option callback: from
  // the job's environment (an sbatch/salloc option) first, then from srun's
  // own command line, so the command line wins.
  std::optional<bool> auto_resume;
  // --auto-resume-min-nodes (0: not given), the last value as above.
  std::uint32_t min_nodes = 0;
  // --auto-resume-hang-timeout and --auto-resume-hang-signal (0: not
  // given), the last values as above.
  HangTimeout hang_timeout;
  int hang_signal = 0;
  // srun only: whether it started inside an allocation (sbatch, salloc).
  // A srun that makes its own allocation cannot be relaunched: the
  // allocation ends with it.
  bool inside_allocation = false;
  // srun only: set when this srun is the relaunch of an earlier attempt.
  std::optional<RelaunchMarker> relaunch;
  // srun only: how often srun was started again for this attempt (kAgainVariable).
  unsigned started_again = 0;
  // srun only: the signal mask and the ignored signals srun started with,
  // given back to the srun a relaunch executes.
  sigset_t initial_mask{};
  std::set<int> ignored_signals;
  // srun only: the session with the controller, opened by the step's
  // registration and kept for srun's life (the watcher's asks, then the
  // exit hook's): one munge round trip, not one per ask. One thread at a
  // time uses it: the hook that registers, the watcher while the step runs
  // (the exit hook stops it first), the exit hook. Before the watcher, so
  // that it outlives it.
  std::optional<Client> session;
  // srun only: the step registered with the controller, and the thread that
  // asks for its verdict while it runs.
  std::optional<ProtectedStep> protected_step;
  std::shared_ptr<VerdictWatcher> watcher;

  bool enabled() const { return auto_resume.value_or(false); }
};

PluginState& state();

// srun: the session with the controller (state().session), opened with
// `config`'s options at its first call; each call gets `timeout` (0:
// connect_timeout). A session the controller closed is opened again.
Client& controller_session(const PluginConfig& config,
                           std::chrono::milliseconds timeout = std::chrono::milliseconds{0});

// srun (local context). local_init runs before srun reads its options:
// it sizes the step for the job's spares (--auto-resume-spares).
void local_init();
int local_user_init(spank_t sp);
int local_exit();

// slurmstepd (remote context): stops a task before its program starts
// when its step asked for auto-resume and cannot have it (task_refusal).
int remote_task_init(spank_t sp);
// slurmstepd: once the node's last task of a protected step exited, tells
// the controller whether all its tasks exited 0 (tasks_exited); never fails.
int remote_task_exit(spank_t sp);
// This node's name as slurm.conf spells it: entry `node_id` of the step's
// SLURM_STEP_NODELIST (the step's environment: the user's, so checked by
// whoever acts on it); nothing if that cannot be read.
std::optional<std::string> step_node_name(spank_t sp, std::uint32_t node_id);
// slurmstepd, as root before a task starts: the step's progress folder
// (progress.cpp); never fails.
int remote_task_init_privileged(spank_t sp);
// slurmstepd, in each task of a registered step: AUTO_RESUME_PROGRESS.
void set_progress_variable(spank_t sp);
// slurmstepd, at the step's end: its progress folder removed.
int remote_exit(spank_t sp);
// slurmstepd, once the step's options are known (init_post_opt): a
// progress folder of the step found already is an earlier step's (same
// ids), and removed.
int remote_init(spank_t sp);

// srun, before its step launched anything: executes srun again, unchanged
// but for the relaunch marker (the same attempt), when the controller
// refused the step's id (step_reused); returns only if that failed or srun
// was started again kMaxStartsAgain times already (said on its stderr).
void start_again(const RelaunchMarker& marker);
// srun's own command line (/proc/self/cmdline).
std::vector<std::string> own_argv();
inline constexpr unsigned kMaxStartsAgain = 8;
// Counts those starts from one srun to the next (removed before the tasks start).
inline constexpr const char* kAgainVariable = "AUTO_RESUME_STARTED_AGAIN";

// Asks the controller for the step's verdict every second while it runs, so
// that a relaunch decided during the step (srun may wait a long time for a
// dead node's tasks) starts at once.
void start_watcher(const PluginConfig& config, const ProtectedStep& step);

}  // namespace ar::spank
