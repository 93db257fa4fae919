// slurmstepd side (remote context): a task of a step that asked for
// auto-resume starts only when it may (task_refusal). This is the hook that
// makes required=1 hold under an `optional` plugstack line: Slurm ignores
// srun's failing hooks then, and the step's tasks would run unprotected.
// Once the node's last task of a protected step exited, the step daemon
// tells the controller how its tasks ended (tasks_exited), before it tells
// srun: a step every node of which ended its tasks with 0 gets its verdict
// without end_window.

#include <unistd.h>

extern "C" {
#include <slurm/slurm.h>
}

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "autoresume/client.hpp"
#include "autoresume/task_env.hpp"
#include "autoresume/text.hpp"
#include "hostlist.hpp"
#include "plugin.hpp"

namespace ar::spank {

int remote_task_init(spank_t sp) {
  const auto& st = state();
  const bool asked = st.enabled();
  if (!asked) return ESPANK_SUCCESS;
  // The batch script, the extern and the interactive step are no srun's
  // step: --auto-resume from sbatch or salloc reaches them too.
  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;
  if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS)
    step_id = 0;  // unknown: checked like a step of srun's
  if (step_id > SLURM_MAX_NORMAL_STEP_ID) return ESPANK_SUCCESS;

  char run_id[256] = "";
  const bool registered =
      spank_getenv(sp, kRegisteredVariable, run_id, sizeof run_id) == ESPANK_SUCCESS;
  const auto why =
      task_refusal(asked, st.config.required, st.config_error, registered ? run_id : nullptr);
  if (!why) {
    if (registered) set_progress_variable(sp);
    return ESPANK_SUCCESS;
  }

  std::uint32_t task_id = 0;
  spank_get_item(sp, S_TASK_GLOBAL_ID, &task_id);
  // This process becomes the task: its stderr is the task's, which srun shows.
  std::fprintf(stderr, "%s: task %u of step %u.%u does not start: %s\n", kTag, task_id, job_id,
               step_id, printable(*why).c_str());
  std::fflush(stderr);
  _exit(kExitUnprotected);
}

namespace {

// The longest the report may hold up the step's end (it comes before
// slurmstepd tells srun that the node's tasks exited).
constexpr std::chrono::milliseconds kReportTimeout{1000};

// The node's tasks of this step that exited so far (slurmstepd runs one
// process per step, and calls task_exit once per task).
struct TaskExits {
  std::mutex mutex;
  std::uint32_t exited = 0;
  std::uint32_t failed = 0;  // with a wait() status other than 0
  bool reported = false;
};

TaskExits& task_exits() {
  static TaskExits exits;
  return exits;
}

// A variable of the step's environment, if set.
std::optional<std::string> step_env(spank_t sp, const char* name) {
  char value[256] = "";
  if (spank_getenv(sp, name, value, sizeof value) != ESPANK_SUCCESS) return std::nullopt;
  return std::string(value);
}

// This node's name as slurm.conf spells it (the host name need not be it;
// several slurmds may share a host). slurmstepd sets SLURMD_NODENAME only
// in each task's copy of the environment, so it is entry `node_id` (this
// node's index in the step) of the step's node list, which srun puts in
// the step's environment (SLURM_STEP_NODELIST, in the order of the node
// ids); nothing if that cannot be read. (A SLURMD_NODENAME in the step's
// environment is the one of the host srun ran on.) The controller checks
// the name against slurmctld's list: the environment is the user's.
}  // namespace

std::optional<std::string> step_node_name(spank_t sp, std::uint32_t node_id) {
  std::vector<char> list(64 * 1024);
  if (spank_getenv(sp, "SLURM_STEP_NODELIST", list.data(), static_cast<int>(list.size())) !=
      ESPANK_SUCCESS)
    return std::nullopt;
  try {
    const auto hosts = slurm::expand_hostlist(list.data());
    if (node_id < hosts.size()) return hosts[node_id];
  } catch (const std::exception&) {
    // not a list slurmctld wrote: no name
  }
  return std::nullopt;
}

namespace {

void send_report(const proto::TasksExitedRequest& report) {
  auto options = client_options(state().config);
  options.timeout = std::min(options.timeout, kReportTimeout);
  try {
    const auto reply = Client(options).send(report);
    slurm_debug("%s: step %u.%u on %s: %s", kTag, report.job_id, report.step_id,
                report.node.c_str(), reply.message.c_str());
  } catch (const std::exception& e) {
    // The controller then waits end_window after the step, as without it.
    slurm_verbose("%s: step %u.%u on %s: cannot report its tasks' exit to the controller: %s", kTag,
                  report.job_id, report.step_id, report.node.c_str(), e.what());
  }
}

}  // namespace

int remote_task_exit(spank_t sp) {
  const auto& st = state();
  if (!st.enabled() || !st.config_error.empty()) return ESPANK_SUCCESS;
  proto::TasksExitedRequest report;
  std::uint32_t local_tasks = 0;
  if (spank_get_item(sp, S_JOB_ID, &report.job_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &report.step_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &local_tasks) != ESPANK_SUCCESS)
    return ESPANK_SUCCESS;
  // The batch script, extern and interactive steps are never protected.
  if (report.step_id > SLURM_MAX_NORMAL_STEP_ID) return ESPANK_SUCCESS;
  // srun sets it only once the controller registered the step.
  const auto run_id = step_env(sp, kRegisteredVariable);
  if (!run_id || run_id->empty()) return ESPANK_SUCCESS;
  int status = 0;
  const bool known = spank_get_item(sp, S_TASK_EXIT_STATUS, &status) == ESPANK_SUCCESS;
  auto& exits = task_exits();
  {
    std::lock_guard lock(exits.mutex);
    ++exits.exited;
    if (!known || status != 0) ++exits.failed;
    if (exits.reported || exits.exited < local_tasks) return ESPANK_SUCCESS;
    exits.reported = true;
    report.tasks = exits.exited;
    report.failed = exits.failed;
  }
  const auto node = spank_get_item(sp, S_JOB_NODEID, &report.node_id) == ESPANK_SUCCESS
                        ? step_node_name(sp, report.node_id)
                        : std::nullopt;
  if (!node) {
    slurm_verbose(
        "%s: step %u.%u: this node's name is not in SLURM_STEP_NODELIST: its tasks' "
        "exit is not reported",
        kTag, report.job_id, report.step_id);
    return ESPANK_SUCCESS;
  }
  report.node = *node;
  report.run_id = *run_id;
  if (const auto attempt = step_env(sp, kAttemptVariable)) {
    char* end = nullptr;
    const auto value = std::strtoul(attempt->c_str(), &end, 10);
    if (!attempt->empty() && *end == '\0' && value <= 0xffffffffUL)
      report.attempt = static_cast<std::uint32_t>(value);
  }
  send_report(report);
  return ESPANK_SUCCESS;
}

}  // namespace ar::spank
