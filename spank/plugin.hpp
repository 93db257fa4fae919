#pragma once
// State shared by the hooks of one process (srun, slurmstepd, sbatch or
// salloc) and the context-specific parts of the plugin.

extern "C" {
#include <slurm/spank.h>
}

#include <optional>

#include "autoresume/plugin_config.hpp"

namespace ar::spank {

inline constexpr const char* kTag = "auto_resume";
// What a hook returns on failure: Slurm tests for a negative value, and
// ESPANK_ERROR (3000) is not one.
inline constexpr int kFailure = -1;

struct PluginState {
  PluginConfig config;
  // The last --auto-resume value Slurm handed to the option callback: from
  // the job's environment (an sbatch/salloc option) first, then from srun's
  // own command line, so the command line wins.
  std::optional<bool> auto_resume;
  // srun only: whether it started inside an allocation (sbatch, salloc).
  // A srun that makes its own allocation cannot be relaunched: the
  // allocation ends with it.
  bool inside_allocation = false;

  bool enabled() const { return auto_resume.value_or(false); }
};

PluginState& state();

// srun (local context).
int local_user_init(spank_t sp);

}  // namespace ar::spank
