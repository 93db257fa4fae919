// srun side (local context): tell the step's tasks whether they run with
// auto-resume, and check, once per srun, that such a step can be protected.

#include <cstdint>
#include <cstdlib>
#include <string>

#include "autoresume/probe.hpp"
#include "plugin.hpp"

namespace ar::spank {

// The variable a step's tasks see: "1" when the step runs with auto-resume.
// srun passes its own environment, as it stands after this hook, to the
// tasks; the environment of a batch script is not touched.
constexpr const char* kTaskFlagVariable = "AUTO_RESUME";

int local_user_init(spank_t sp) {
  const auto& st = state();
  if (!st.enabled()) {
    unsetenv(kTaskFlagVariable);  // an outer flagged step's value must not leak in
    return ESPANK_SUCCESS;
  }
  setenv(kTaskFlagVariable, "1", 1);

  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;
  if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS) {
    slurm_error("%s: cannot read this step's job and step id", kTag);
    return kFailure;
  }
  const auto where = st.config.controller.str();
  const auto failure = probe_tcp(st.config.controller, st.config.connect_timeout);
  if (!failure) {
    slurm_verbose("%s: step %u.%u: controller at %s is reachable", kTag, job_id, step_id,
                  where.c_str());
    return ESPANK_SUCCESS;
  }
  if (st.config.required) {
    slurm_error(
        "%s: step %u.%u asked for --auto-resume=1 but the controller at %s cannot be reached "
        "(%s); not running it unprotected because plugstack.conf says required=1",
        kTag, job_id, step_id, where.c_str(), failure->c_str());
    return kFailure;
  }
  slurm_spank_log(
      "%s: warning: auto-resume protection is OFF for step %u.%u: the controller at %s cannot "
      "be reached (%s); the step runs, but a node failure will end it as usual",
      kTag, job_id, step_id, where.c_str(), failure->c_str());
  return ESPANK_SUCCESS;
}

}  // namespace ar::spank
