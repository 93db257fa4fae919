// srun side (local context): tell the step's tasks whether they run with
// auto-resume, and register a flagged step with the controller, once per
// srun. When the controller cannot protect the step, say so once (or fail
// the step before its tasks start, if plugstack.conf says required=1).

#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "allocation.hpp"
#include "autoresume/client.hpp"
#include "autoresume/munge_cred.hpp"
#include "autoresume/protocol.hpp"
#include "autoresume/task_env.hpp"
#include "plugin.hpp"

namespace ar::spank {

namespace {

// What a step's tasks see. srun passes its own environment, as it stands
// after this hook, to the tasks; the environment of a batch script is not
// touched.
constexpr const char* kTaskFlagVariable = "AUTO_RESUME";
constexpr const char* kAttemptVariable = "AUTO_RESUME_ATTEMPT";
constexpr const char* kRunIdVariable = "AUTO_RESUME_RUN_ID";

// NODE_LIST (the allocation's hosts, comma-separated), MASTER_ADDR (the first
// node's NodeAddr: node names need not resolve) and, unless the user set one,
// MASTER_PORT: resolved once here instead of by every task. Returns the
// allocation's node list, or the environment's when slurmctld cannot say.
std::string export_allocation(std::uint32_t job_id, std::uint32_t attempt) {
  try {
    const auto allocation = load_allocation(job_id);
    setenv("NODE_LIST", comma_list(allocation.hosts).c_str(), 1);
    setenv("MASTER_ADDR", allocation.first_address.c_str(), 1);
    setenv("MASTER_PORT", std::to_string(default_master_port(job_id, attempt)).c_str(),
           /*overwrite=*/0);
    return allocation.nodelist;
  } catch (const std::exception& e) {
    slurm_spank_log("%s: warning: NODE_LIST and MASTER_ADDR are not set for job %u: %s", kTag,
                    job_id, e.what());
    const char* nodelist = std::getenv("SLURM_JOB_NODELIST");
    return nodelist != nullptr ? nodelist : "";
  }
}

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

// Registers the step; returns nothing on success, or why it is unprotected.
std::optional<std::string> register_step(const PluginConfig& config,
                                         const proto::RegisterRequest& step) {
  const auto where = "the controller at " + config.controller.str();
  try {
    Client(client_options(config)).send(step);  // only that the reply is well-formed matters
    return std::nullopt;
  } catch (const Refused& e) {
    return where + " refused it (" + e.what() + ")";
  } catch (const ClientError& e) {
    return where + " cannot be reached (" + e.what() + ")";
  } catch (const proto::ProtocolError& e) {
    return where + " sent a malformed reply (" + e.what() + ")";
  } catch (const MungeError& e) {
    return std::string("no munge credential (") + e.what() + ")";
  }
}

}  // namespace

void local_init() {
  auto& st = state();
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
}

int local_user_init(spank_t sp) {
  auto& st = state();
  if (!st.enabled()) {
    // An outer flagged step's values must not leak into this one.
    for (const auto* name : {kTaskFlagVariable, kAttemptVariable, kRunIdVariable}) unsetenv(name);
    return ESPANK_SUCCESS;
  }

  proto::RegisterRequest step;
  if (spank_get_item(sp, S_JOB_ID, &step.job_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &step.step_id) != ESPANK_SUCCESS) {
    slurm_error("%s: cannot read this step's job and step id", kTag);
    return kFailure;
  }
  // A relaunch carries the run on; a marker from another job (an exported
  // environment) starts a new run.
  const auto& marker = st.relaunch;
  const bool continues = marker && marker->run_id.starts_with(std::to_string(step.job_id) + ".");
  step.run_id = continues ? marker->run_id : new_run_id(step.job_id, step.step_id);
  step.attempt = continues ? marker->attempt : 0;
  step.argv = own_argv();
  step.cwd = current_dir();
  const bool own_master_port =
      continues ? marker->own_master_port : std::getenv("MASTER_PORT") == nullptr;
  step.nodelist = export_allocation(step.job_id, step.attempt);

  setenv(kTaskFlagVariable, "1", 1);
  setenv(kAttemptVariable, std::to_string(step.attempt).c_str(), 1);
  setenv(kRunIdVariable, step.run_id.c_str(), 1);

  const auto unprotected =
      st.inside_allocation
          ? register_step(st.config, step)
          : std::optional<std::string>(
                "this srun made its own allocation, which ends with it, so the step cannot be "
                "relaunched (run it inside sbatch or salloc)");
  if (!unprotected) {
    slurm_verbose("%s: step %u.%u is protected (run %s, attempt %u)", kTag, step.job_id,
                  step.step_id, step.run_id.c_str(), step.attempt);
    auto& protected_step = state().protected_step.emplace();
    protected_step.job_id = step.job_id;
    protected_step.step_id = step.step_id;
    protected_step.run_id = step.run_id;
    protected_step.attempt = step.attempt;
    protected_step.argv = step.argv;
    protected_step.own_master_port = own_master_port;
    start_watcher(st.config, protected_step);
    return ESPANK_SUCCESS;
  }
  if (st.config.required) {
    slurm_error(
        "%s: step %u.%u asked for --auto-resume=1 but %s; not running it unprotected because "
        "plugstack.conf says required=1",
        kTag, step.job_id, step.step_id, unprotected->c_str());
    return kFailure;
  }
  slurm_spank_log(
      "%s: warning: auto-resume protection is OFF for step %u.%u: %s; the step runs, but a node "
      "failure will end it as usual",
      kTag, step.job_id, step.step_id, unprotected->c_str());
  return ESPANK_SUCCESS;
}

}  // namespace ar::spank
