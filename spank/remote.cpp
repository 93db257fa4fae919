// slurmstepd side (remote context): a task of a step that asked for
// auto-resume starts only when it may (task_refusal). This is the hook that
// makes required=1 hold under an `optional` plugstack line: Slurm ignores
// srun's failing hooks then, and the step's tasks would run unprotected.

#include <unistd.h>

extern "C" {
#include <slurm/slurm.h>
}

#include <cstdint>
#include <cstdio>
#include <string>

#include "autoresume/task_env.hpp"
#include "autoresume/text.hpp"
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
  if (!why) return ESPANK_SUCCESS;

  std::uint32_t task_id = 0;
  spank_get_item(sp, S_TASK_GLOBAL_ID, &task_id);
  // This process becomes the task: its stderr is the task's, which srun shows.
  std::fprintf(stderr, "%s: task %u of step %u.%u does not start: %s\n", kTag, task_id, job_id,
               step_id, printable(*why).c_str());
  std::fflush(stderr);
  _exit(kExitUnprotected);
}

}  // namespace ar::spank
