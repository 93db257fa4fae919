// The SPANK entry points: each catches every exception, parses what Slurm
// hands it once, and routes to the half of the plugin for its context.

#include "plugin.hpp"

#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "autoresume/keyvalue.hpp"
#include "autoresume/option.hpp"
#include "autoresume/progress.hpp"

// SPANK_PLUGIN() gives these internal linkage in C++; Slurm looks them up by
// name, so they are declared extern "C" and exported here.
extern "C" {
#define AR_EXPORT __attribute__((visibility("default")))
AR_EXPORT extern const char plugin_name[];
AR_EXPORT extern const char plugin_type[];
AR_EXPORT extern const unsigned int plugin_version;
AR_EXPORT extern const unsigned int spank_plugin_version;

const char plugin_name[] = "auto_resume";
const char plugin_type[] = "spank";
const unsigned int plugin_version = SLURM_VERSION_NUMBER;
const unsigned int spank_plugin_version = 0;
}

namespace ar::spank {

PluginState& state() {
  static PluginState instance;
  return instance;
}

Client& controller_session(const PluginConfig& config, std::chrono::milliseconds timeout) {
  auto& session = state().session;
  if (!session) session.emplace(client_options(config));
  session->set_timeout(timeout.count() > 0 ? timeout : config.connect_timeout);
  return *session;
}

namespace {

// Runs a hook body; an exception becomes an error message and a failure.
template <typename Body>
int guarded(const char* hook, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    slurm_error("%s: %s", kTag, e.what());
  } catch (...) {
    slurm_error("%s: unexpected error in %s", kTag, hook);
  }
  return kFailure;
}

// Called by Slurm for `--auto-resume=VALUE`, possibly more than once (from
// the job's environment, then from the command line): the last value wins.
// Slurm honours a failing option callback even for an `optional` plugstack
// line: srun, sbatch and salloc stop there. On the node (remote) the value
// is only recorded: remote_task_init acts on it.
int option_callback(int /*val*/, const char* optarg, int remote) noexcept {
  return guarded("the option callback", [&]() -> int {
    auto& st = state();
    st.auto_resume = parse_auto_resume(optarg);
    if (*st.auto_resume && !st.config_error.empty() && remote == 0) {
      slurm_error("%s: --%s=1 cannot be honoured: bad plugstack.conf line: %s", kTag,
                  ar::kOptionName, st.config_error.c_str());
      return kFailure;
    }
    return ESPANK_SUCCESS;
  });
}

spank_option auto_resume_option{const_cast<char*>(kOptionName),
                                const_cast<char*>(kOptionArgInfo),
                                const_cast<char*>(kOptionUsage),
                                1,
                                0,
                                option_callback};

// `--auto-resume-spares=K`: read by srun from its environment in
// local_init (before srun reads its options); checked here.
int spares_callback(int /*val*/, const char* optarg, int /*remote*/) noexcept {
  return guarded("the option callback", [&]() -> int {
    ar::parse_node_count(ar::kSparesOptionName, optarg);
    // srun's own: too late to size the step (its -N does that).
    const char* job = std::getenv(ar::kSparesVariable);
    if (job == nullptr) job = std::getenv(ar::kSparesJobVariable);
    if (spank_context() == S_CTX_LOCAL && (job == nullptr || std::string(job) != optarg))
      slurm_spank_log(
          "%s: warning: srun --%s=%s does nothing: give it to sbatch or salloc, or "
          "size the step with srun -N",
          kTag, ar::kSparesOptionName, optarg);
    return ESPANK_SUCCESS;
  });
}

int min_nodes_callback(int /*val*/, const char* optarg, int /*remote*/) noexcept {
  return guarded("the option callback", [&]() -> int {
    state().min_nodes = ar::parse_node_count(ar::kMinNodesOptionName, optarg);
    return ESPANK_SUCCESS;
  });
}

int hang_timeout_callback(int /*val*/, const char* optarg, int /*remote*/) noexcept {
  return guarded("the option callback", [&]() -> int {
    state().hang_timeout = ar::parse_hang_timeout(optarg);
    return ESPANK_SUCCESS;
  });
}

int hang_signal_callback(int /*val*/, const char* optarg, int /*remote*/) noexcept {
  return guarded("the option callback", [&]() -> int {
    state().hang_signal = ar::parse_hang_signal(optarg);
    return ESPANK_SUCCESS;
  });
}

spank_option spares_option{const_cast<char*>(ar::kSparesOptionName),
                           const_cast<char*>(ar::kSparesArgInfo),
                           const_cast<char*>(ar::kSparesUsage),
                           1,
                           0,
                           spares_callback};
spank_option min_nodes_option{const_cast<char*>(ar::kMinNodesOptionName),
                              const_cast<char*>(ar::kMinNodesArgInfo),
                              const_cast<char*>(ar::kMinNodesUsage),
                              1,
                              0,
                              min_nodes_callback};
spank_option hang_timeout_option{const_cast<char*>(ar::kHangTimeoutOptionName),
                                 const_cast<char*>(ar::kHangTimeoutArgInfo),
                                 const_cast<char*>(ar::kHangTimeoutUsage),
                                 1,
                                 0,
                                 hang_timeout_callback};
spank_option hang_signal_option{const_cast<char*>(ar::kHangSignalOptionName),
                                const_cast<char*>(ar::kHangSignalArgInfo),
                                const_cast<char*>(ar::kHangSignalUsage),
                                1,
                                0,
                                hang_signal_callback};

}  // namespace
}  // namespace ar::spank

using namespace ar::spank;

extern "C" {

AR_EXPORT int slurm_spank_init(spank_t sp, int ac, char** av) {
  return guarded("slurm_spank_init", [&]() -> int {
    const auto ctx = spank_context();
    if (ctx != S_CTX_LOCAL && ctx != S_CTX_REMOTE && ctx != S_CTX_ALLOCATOR) return ESPANK_SUCCESS;
    std::vector<std::string> args(av, av + ac);
    // A bad line still registers the option, so that --auto-resume=1 fails
    // (option_callback) instead of being unknown to a command of a job
    // that asked for it through the environment.
    try {
      state().config = ar::parse_plugin_config(args);
    } catch (const ar::ConfigError& e) {
      state().config_error = e.what();
      slurm_error("%s: bad plugstack.conf line: %s; --%s=1 fails until it is fixed", kTag, e.what(),
                  ar::kOptionName);
    }
    // Read before srun allocates anything (it then sets SLURM_JOB_ID itself).
    if (ctx == S_CTX_LOCAL) {
      state().inside_allocation = std::getenv("SLURM_JOB_ID") != nullptr;
      local_init();
    }
    for (auto* option : {&auto_resume_option, &spares_option, &min_nodes_option,
                         &hang_timeout_option, &hang_signal_option})
      if (const auto rc = spank_option_register(sp, option); rc != ESPANK_SUCCESS) {
        slurm_error("%s: cannot register --%s: %s", kTag, option->name, spank_strerror(rc));
        return kFailure;
      }
    return state().config_error.empty() ? ESPANK_SUCCESS : kFailure;
  });
}

AR_EXPORT int slurm_spank_init_post_opt(spank_t sp, int, char**) {
  // In slurmstepd, once the step's options are known: a progress folder
  // left by an earlier step with the same ids goes. Never a failure.
  if (spank_context() == S_CTX_REMOTE)
    guarded("slurm_spank_init_post_opt", [&]() -> int { return remote_init(sp); });
  return ESPANK_SUCCESS;
}

AR_EXPORT int slurm_spank_local_user_init(spank_t sp, int, char**) {
  return guarded("slurm_spank_local_user_init", [&]() -> int { return local_user_init(sp); });
}

AR_EXPORT int slurm_spank_task_init(spank_t sp, int, char**) {
  return guarded("slurm_spank_task_init", [&]() -> int {
    return spank_context() == S_CTX_REMOTE ? remote_task_init(sp) : ESPANK_SUCCESS;
  });
}

AR_EXPORT int slurm_spank_task_init_privileged(spank_t sp, int, char**) {
  // Whatever becomes of the progress folder, the task starts.
  if (spank_context() == S_CTX_REMOTE)
    guarded("slurm_spank_task_init_privileged",
            [&]() -> int { return remote_task_init_privileged(sp); });
  return ESPANK_SUCCESS;
}

AR_EXPORT int slurm_spank_task_exit(spank_t sp, int, char**) {
  // Whatever becomes of the report, the task's end is not a failure.
  if (spank_context() == S_CTX_REMOTE)
    guarded("slurm_spank_task_exit", [&]() -> int { return remote_task_exit(sp); });
  return ESPANK_SUCCESS;
}

AR_EXPORT int slurm_spank_exit(spank_t sp, int, char**) {
  return guarded("slurm_spank_exit", [&]() -> int {
    if (spank_context() == S_CTX_REMOTE) return remote_exit(sp);
    return spank_context() == S_CTX_LOCAL ? local_exit() : ESPANK_SUCCESS;
  });
}

}  // extern "C"
