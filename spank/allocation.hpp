#pragma once
// The live allocation of a job, asked from slurmctld through srun's own
// libslurm (the environment's SLURM_JOB_NODELIST goes stale once a job is
// resized).

#include <cstdint>
#include <string>
#include <vector>

namespace ar::spank {

struct Allocation {
  std::string nodelist;            // Slurm's compressed form, e.g. node[1-4]
  std::vector<std::string> hosts;  // expanded, in Slurm's order
  std::string first_address;       // NodeAddr of hosts.front()
};

// Throws std::runtime_error saying what failed.
Allocation load_allocation(std::uint32_t job_id);

}  // namespace ar::spank
