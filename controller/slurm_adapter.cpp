#include "slurm_adapter.hpp"

extern "C" {
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
}

#include <stdexcept>

namespace ar::slurm {

namespace {
[[noreturn]] void fail(const char* what) {
  throw std::runtime_error(std::string(what) + ": " + slurm_strerror(slurm_get_errno()));
}
}  // namespace

// Exported by libslurm though not declared in its headers.
extern "C" char* slurm_job_state_string(uint32_t state);

void init() { slurm_init(nullptr); }

std::optional<JobInfo> load_job(std::uint32_t job_id) {
  job_info_msg_t* msg = nullptr;
  if (slurm_load_job(&msg, job_id, SHOW_ALL) != SLURM_SUCCESS) {
    if (slurm_get_errno() == ESLURM_INVALID_JOB_ID) return std::nullopt;
    fail("slurm_load_job");
  }
  std::optional<JobInfo> info;
  if (msg != nullptr && msg->record_count > 0)
    info = JobInfo{msg->job_array[0].user_id, slurm_job_state_string(msg->job_array[0].job_state)};
  slurm_free_job_info_msg(msg);
  return info;
}

uid_t slurm_user_uid() {
  slurm_conf_t* conf = nullptr;
  if (slurm_load_ctl_conf(0, &conf) != SLURM_SUCCESS) fail("slurm_load_ctl_conf");
  const uid_t uid = conf->slurm_user_id;
  slurm_free_ctl_conf(conf);
  return uid;
}

}  // namespace ar::slurm
