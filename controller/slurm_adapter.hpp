#pragma once
// The one place that talks to libslurm.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace ar::slurm {

struct JobInfo {
  uid_t uid = 0;
  std::string state;  // e.g. RUNNING, PENDING, COMPLETED
};

// Reads slurm.conf ($SLURM_CONF or the default); call once at start-up.
void init();

// The job as slurmctld knows it, or nothing if it does not (anymore).
// Throws std::runtime_error when slurmctld cannot be asked.
std::optional<JobInfo> load_job(std::uint32_t job_id);

// The uid of SlurmUser from slurmctld's configuration.
uid_t slurm_user_uid();

}  // namespace ar::slurm
