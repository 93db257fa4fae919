#pragma once
// The user-facing `--auto-resume=<0|1>` option, independent of Slurm.

#include <string_view>

namespace ar {

inline constexpr const char* kOptionName = "auto-resume";
inline constexpr const char* kOptionArgInfo = "0|1";
inline constexpr const char* kOptionUsage =
    "[auto_resume] 1: relaunch this step in place, with a repaired node list, "
    "when one of its nodes fails; 0: do not. Given to sbatch/salloc it is the "
    "default for every srun of the job.";

// Parses the option's argument. nullptr or anything but "0"/"1" throws
// ConfigError naming the value.
bool parse_auto_resume(const char* value);

}  // namespace ar
