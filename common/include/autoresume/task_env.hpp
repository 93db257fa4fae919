#pragma once
// What the tasks of a protected step learn about their allocation.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ar {

// What the tasks of a protected step see; set by srun only once the
// controller registered the step.
inline constexpr const char* kTaskFlagVariable = "AUTO_RESUME";
inline constexpr const char* kAttemptVariable = "AUTO_RESUME_ATTEMPT";
inline constexpr const char* kRunIdVariable = "AUTO_RESUME_RUN_ID";
// Set by srun with the others (to the run id), for the nodes: Slurm passes
// SLURM_* variables to the tasks even under srun --export=NONE, which keeps
// the others from them.
inline constexpr const char* kRegisteredVariable = "SLURM_SPANK_AUTO_RESUME_REGISTERED";

// The exit status of a task that does not start because its step asked for
// auto-resume and cannot have it (EX_UNAVAILABLE).
inline constexpr int kExitUnprotected = 69;

// Why a task must not start, or nothing when it may: checked on the node,
// just before the task's program, for a step that asked for --auto-resume=1
// (`asked`). srun sets kRegisteredVariable (`registered`, null when unset)
// only after the controller registered the step, so a task whose
// plugstack.conf says required=1 starts only with it; and none starts under a plugstack
// line with an error (`config_error`, empty when there is none), whose
// required setting cannot be known. Slurm ignores a failing srun-side hook
// of an `optional` plugstack line, so this is where required=1 holds.
std::optional<std::string> task_refusal(bool asked, bool required, std::string_view config_error,
                                        const char* registered);

inline constexpr std::uint16_t kMasterPortBase = 29500;

// The rendezvous port a protected step gets unless the user set MASTER_PORT:
// 29500 + (job_id % 1000) * 8 + attempt % 8, so that jobs sharing a first node
// rarely collide and a relaunch does not wait for the previous attempt's
// socket to be released. Always within [29500, 37499].
std::uint16_t default_master_port(std::uint32_t job_id, std::uint32_t attempt);

// "a,b,c": NODE_LIST's form.
std::string comma_list(const std::vector<std::string>& items);

}  // namespace ar
