#pragma once
// The user-facing `--auto-resume=<0|1>` option, independent of Slurm.

#include <cstdint>
#include <optional>
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

// `--auto-resume-spares=K` (sbatch, salloc): the job holds K nodes more
// than its steps run on. Every srun of the job without its own -N, -w or
// -F runs on the job's nodes less K; the K left idle take a failed node's
// place in a relaunch, without waiting for a new node (the only way a job
// holding GRES can go on in place).
inline constexpr const char* kSparesOptionName = "auto-resume-spares";
inline constexpr const char* kSparesArgInfo = "K";
inline constexpr const char* kSparesUsage =
    "[auto_resume] for sbatch/salloc: the job's sruns run on its nodes less K, and those K "
    "spares replace a failed node at once in a relaunch (GRES jobs too)";
// The variables that carry the sbatch/salloc value of the option into the
// job's environment (Slurm's own naming of SPANK options): salloc sets
// both, sbatch's batch script has only the second.
inline constexpr const char* kSparesVariable = "_SLURM_SPANK_OPTION_auto_resume_auto_resume_spares";
inline constexpr const char* kSparesJobVariable =
    "SLURM_SPANK__SLURM_SPANK_OPTION_auto_resume_auto_resume_spares";

// `--auto-resume-min-nodes=M`: after a fault with no spare left in the
// job, the step goes on at once on fewer nodes (no replacement is waited
// for) while at least M are left.
inline constexpr const char* kMinNodesOptionName = "auto-resume-min-nodes";
inline constexpr const char* kMinNodesArgInfo = "M";
inline constexpr const char* kMinNodesUsage =
    "[auto_resume] relaunch the step on the job's healthy nodes, fewer than before, while at "
    "least M are left (for trainings that adapt to their size)";

// The largest count either option takes.
inline constexpr std::uint32_t kMaxNodeCount = 1'000'000;

// Parses a node count given to `--NAME`: 0 to kMaxNodeCount, digits only.
// Anything else throws ConfigError naming the option and the value.
std::uint32_t parse_node_count(const char* name, const char* value);

// The nodes an srun of a job of `job_nodes` runs on with `spares` held
// back; nothing when the job has no more than `spares` nodes (the step
// then takes them all).
std::optional<std::uint32_t> nodes_without_spares(std::uint32_t job_nodes, std::uint32_t spares);

}  // namespace ar
