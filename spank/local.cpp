// srun side (local context): register a flagged step with the controller,
// once per srun, and only then tell the step's tasks that they run with
// auto-resume. When the controller cannot protect the step, say so once; with
// required=1 the step does not run: the nodes refuse its tasks, which lack
// the variables (remote.cpp), under a `required` plugstack line as under an
// `optional` one. This hook does not fail for it: srun would stop between
// the step's creation and its launch, and slurmctld would hold the step
// (and its CPUs) until the allocation ends, since no node ever reports it.

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "allocation.hpp"
#include "autoresume/client.hpp"
#include "autoresume/keyvalue.hpp"
#include "autoresume/munge_cred.hpp"
#include "autoresume/option.hpp"
#include "autoresume/protocol.hpp"
#include "autoresume/task_env.hpp"
#include "plugin.hpp"

namespace ar::spank {

std::vector<std::string> own_argv() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> argv;
  std::size_t start = 0;
  while (start < all.size()) {
    const auto end = all.find('\0', start);
    argv.push_back(all.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return argv;
}

namespace {

// The live allocation, for the tasks' NODE_LIST, MASTER_ADDR and MASTER_PORT
// (resolved once here instead of by every task), or nothing, with a
// warning, when slurmctld cannot say.
std::optional<Allocation> live_allocation(std::uint32_t job_id) {
  try {
    return load_allocation(job_id);
  } catch (const std::exception& e) {
    slurm_spank_log("%s: warning: NODE_LIST and MASTER_ADDR are not set for job %u: %s", kTag,
                    job_id, e.what());
    return std::nullopt;
  }
}

// What the tasks of a registered step see. srun passes its own environment,
// as it stands after this hook, to the tasks; the environment of a batch
// script is not touched. MASTER_PORT stays as the user set it.
void export_task_env(const proto::RegisterRequest& step,
                     const std::optional<Allocation>& allocation) {
  if (allocation) {
    setenv("NODE_LIST", comma_list(allocation->hosts).c_str(), 1);
    setenv("MASTER_ADDR", allocation->first_address.c_str(), 1);
    setenv("MASTER_PORT", std::to_string(default_master_port(step.job_id, step.attempt)).c_str(),
           /*overwrite=*/0);
  }
  setenv(kAttemptVariable, std::to_string(step.attempt).c_str(), 1);
  setenv(kRunIdVariable, step.run_id.c_str(), 1);
  setenv(kTaskFlagVariable, "1", 1);
  setenv(kRegisteredVariable, step.run_id.c_str(), 1);
}

std::string current_dir() {
  std::vector<char> buffer(4096);
  return getcwd(buffer.data(), buffer.size()) != nullptr ? std::string(buffer.data()) : "";
}

std::string new_run_id(std::uint32_t job_id, std::uint32_t step_id) {
  std::random_device random;
  char suffix[9];
  std::snprintf(suffix, sizeof suffix, "%08x", random());
  return std::to_string(job_id) + "." + std::to_string(step_id) + "-" + suffix;
}

// One try to register the step: nothing on success (a `duplicate` reply
// too: an earlier try got through), or why it is unprotected. `again`: no
// reply came (the controller may have registered it all the same), or the
// controller could not ask slurmctld (`unavailable`): a later try may work.
std::optional<std::string> try_register(const PluginConfig& config,
                                        const proto::RegisterRequest& step, bool& again,
                                        bool& reused) {
  again = false;
  reused = false;
  const auto where = "the controller at " + config.controller.str();
  try {
    // Only that the reply is well-formed matters. The session stays for
    // the watcher and the exit hook (no reply: the next try opens a new one).
    controller_session(config).send(step);
    return std::nullopt;
  } catch (const Refused& e) {
    again = e.code() == proto::code::kUnavailable;
    reused = e.code() == proto::code::kStepReused;
    return where + " refused it (" + e.what() + ")";
  } catch (const ClientError& e) {
    again = true;
    return where + " cannot be reached (" + e.what() + ")";
  } catch (const proto::ProtocolError& e) {
    return where + " sent a malformed reply (" + e.what() + ")";
  } catch (const MungeError& e) {
    return std::string("no munge credential (") + e.what() + ")";
  }
}

// Registers the step: nothing on success, or why it is unprotected. A new
// run is tried once more when no reply came or the controller could not
// ask slurmctld (a repeat is answered `duplicate`; a fresh credential each
// try). A relaunch, which the
// controller itself asked for, keeps trying for up to unreachable_timeout
// (the controller restarting, or slurmctld away for a moment: it answers
// `unavailable` until it can check the job), 1 s apart and then up to 8 s.
std::optional<std::string> register_step(const PluginConfig& config,
                                         const proto::RegisterRequest& step, bool& reused) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + config.unreachable_timeout;
  bool again = false;
  auto why = try_register(config, step, again, reused);
  std::chrono::milliseconds pause{1000};
  for (int tries = 1; why && again; ++tries) {
    if (step.attempt == 0 ? tries >= 2 : Clock::now() + pause >= deadline) break;
    if (step.attempt > 0 && tries == 1)
      slurm_spank_log(
          "%s: cannot register the relaunch of step %u.%u yet: %s; trying again for "
          "up to %lld s (unreachable_timeout)",
          kTag, step.job_id, step.step_id, why->c_str(),
          static_cast<long long>(
              std::chrono::duration_cast<std::chrono::seconds>(config.unreachable_timeout)
                  .count()));
    else
      slurm_verbose("%s: registering step %u.%u again: %s", kTag, step.job_id, step.step_id,
                    why->c_str());
    if (step.attempt > 0) {
      std::this_thread::sleep_for(pause);
      pause = std::min<std::chrono::milliseconds>(pause * 2, std::chrono::seconds(8));
    }
    why = try_register(config, step, again, reused);
  }
  return why;
}

}  // namespace

namespace {

// A job submitted with --auto-resume-spares=K: srun reads the job's node
// count from SLURM_JOB_NUM_NODES as its -N (its own -N, -w or -F win), so
// that variable says K fewer. Only inside an allocation; a bad value was
// refused by sbatch or salloc already, and is said here once more.
void size_for_spares() {
  const char* spares = std::getenv(kSparesVariable);
  if (spares == nullptr) spares = std::getenv(kSparesJobVariable);
  const char* job_nodes = std::getenv("SLURM_JOB_NUM_NODES");
  if (spares == nullptr || job_nodes == nullptr || std::getenv("SLURM_JOB_ID") == nullptr) return;
  try {
    const auto held = parse_node_count(kSparesOptionName, spares);
    const auto nodes = parse_node_count("nodes", job_nodes);
    if (const auto size = nodes_without_spares(nodes, held)) {
      setenv("SLURM_JOB_NUM_NODES", std::to_string(*size).c_str(), 1);
    } else if (held > 0) {
      slurm_spank_log(
          "%s: warning: the job's %u nodes leave none for --%s=%u: the step runs on all of them",
          kTag, nodes, kSparesOptionName, held);
    }
  } catch (const ConfigError& e) {
    slurm_spank_log("%s: warning: %s: the step runs on all of the job's nodes", kTag, e.what());
  }
}

}  // namespace

void local_init() {
  auto& st = state();
  size_for_spares();
  sigprocmask(SIG_SETMASK, nullptr, &st.initial_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction action {};
    if (sigaction(sig, nullptr, &action) == 0 && action.sa_handler == SIG_IGN)
      st.ignored_signals.insert(sig);
  }
  // Set by the srun that relaunched this one; the tasks must not see it.
  if (const char* marker = std::getenv(kRelaunchVariable)) {
    st.relaunch = RelaunchMarker::decode(marker);
    if (!st.relaunch)
      slurm_spank_log("%s: warning: ignoring a malformed %s='%s'", kTag, kRelaunchVariable, marker);
    unsetenv(kRelaunchVariable);
  }
  if (const char* again = std::getenv(kAgainVariable)) {
    const std::string_view text(again);
    unsigned count = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), count);
    st.started_again =
        ec == std::errc() && end == text.data() + text.size() ? count : kMaxStartsAgain;
    unsetenv(kAgainVariable);
  }
}

namespace {

// The step's request, with a new run or the relaunched one's; `own_master_port`
// says whether the plugin picks MASTER_PORT.
proto::RegisterRequest describe_step(std::uint32_t job_id, std::uint32_t step_id,
                                     const std::optional<RelaunchMarker>& marker,
                                     bool& own_master_port) {
  proto::RegisterRequest step;
  step.job_id = job_id;
  step.step_id = step_id;
  // A relaunch carries the run on; a marker from another job (an exported
  // environment) starts a new run.
  // The marker is in the environment, the user's to set: only a run id of
  // this job, in the alphabet the controller takes, is carried on.
  const bool continues = marker && marker->run_id.starts_with(std::to_string(job_id) + ".") &&
                         proto::valid_run_id(marker->run_id);
  step.run_id = continues ? marker->run_id : new_run_id(job_id, step_id);
  step.attempt = continues ? marker->attempt : 0;
  step.argv = own_argv();
  step.cwd = current_dir();
  own_master_port = continues ? marker->own_master_port : std::getenv("MASTER_PORT") == nullptr;
  return step;
}

// The nodes the step runs on (srun's step layout), kept for a relaunch, or
// 0 when Slurm cannot say.
std::uint32_t step_nodes(spank_t sp) {
  std::uint32_t nodes = 0;
  return spank_get_item(sp, S_JOB_NNODES, &nodes) == ESPANK_SUCCESS ? nodes : 0;
}

void protect(const PluginConfig& config, const proto::RegisterRequest& step, bool own_master_port,
             std::uint32_t nodes) {
  slurm_verbose("%s: step %u.%u is protected (run %s, attempt %u)", kTag, step.job_id, step.step_id,
                step.run_id.c_str(), step.attempt);
  auto& protected_step = state().protected_step.emplace();
  protected_step.job_id = step.job_id;
  protected_step.step_id = step.step_id;
  protected_step.run_id = step.run_id;
  protected_step.attempt = step.attempt;
  protected_step.argv = step.argv;
  protected_step.nodes = nodes;
  protected_step.own_master_port = own_master_port;
  start_watcher(config, protected_step);
}

}  // namespace

int local_user_init(spank_t sp) {
  auto& st = state();
  // An outer flagged step's values must not leak into this one, and a
  // flagged step's tasks get them only once it is registered: the nodes
  // let a task of a required=1 step start only with kRegisteredVariable.
  for (const auto* name :
       {kTaskFlagVariable, kAttemptVariable, kRunIdVariable, kRegisteredVariable})
    unsetenv(name);
  if (!st.enabled()) return ESPANK_SUCCESS;

  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;
  if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS) {
    slurm_error("%s: cannot read this step's job and step id", kTag);
    return kFailure;
  }
  bool own_master_port = false;
  auto step = describe_step(job_id, step_id, st.relaunch, own_master_port);
  step.min_nodes = st.min_nodes;
  step.hang_timeout = st.hang_timeout;
  step.hang_signal = static_cast<std::uint32_t>(st.hang_signal);
  if (st.hang_signal > 0 && !st.hang_timeout.on())
    slurm_spank_log("%s: warning: --%s does nothing without --%s", kTag, ar::kHangSignalOptionName,
                    ar::kHangTimeoutOptionName);
  const auto allocation = live_allocation(job_id);
  if (allocation) {
    step.nodelist = allocation->nodelist;
  } else if (const char* nodelist = std::getenv("SLURM_JOB_NODELIST")) {
    step.nodelist = nodelist;
  }

  bool reused = false;
  const auto unprotected =
      st.inside_allocation
          ? register_step(st.config, step, reused)
          : std::optional<std::string>(
                "this srun made its own allocation, which ends with it, so the step cannot be "
                "relaunched (run it inside sbatch or salloc)");
  if (!unprotected) {
    export_task_env(step, allocation);
    protect(st.config, step, own_master_port, step_nodes(sp));
    return ESPANK_SUCCESS;
  }
  // slurmctld gave this relaunch an earlier attempt's step id, and the
  // controller cancelled it: nothing is launched under it; the attempt
  // starts again, under a new id.
  if (reused && st.relaunch) {
    slurm_spank_log("%s: step %u.%u: %s", kTag, step.job_id, step.step_id, unprotected->c_str());
    start_again(*st.relaunch);
  }
  if (st.config.required) {
    // The nodes refuse the tasks (remote_task_init): the step ends at once,
    // and slurmctld lets it go as any ended step.
    slurm_error(
        "%s: step %u.%u asked for --auto-resume=1 but %s; not running it unprotected because "
        "plugstack.conf says required=1",
        kTag, step.job_id, step.step_id, unprotected->c_str());
    return ESPANK_SUCCESS;
  }
  slurm_spank_log(
      "%s: warning: auto-resume protection is OFF for step %u.%u: %s; the step runs, but a node "
      "failure will end it as usual",
      kTag, step.job_id, step.step_id, unprotected->c_str());
  return ESPANK_SUCCESS;
}

}  // namespace ar::spank
