#pragma once
// What the controller does for each authenticated request, independent of the
// transport. Every state change is in the store before the reply is built.

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "autoresume/protocol.hpp"
#include "slurm_adapter.hpp"
#include "store.hpp"

namespace ar {

class Service {
 public:
  using JobLookup = std::function<std::optional<slurm::JobInfo>(std::uint32_t)>;
  // SlurmUser's uid; may throw while slurmctld cannot be reached.
  using UidLookup = std::function<uid_t()>;

  Service(Store& store, JobLookup load_job, UidLookup slurm_user);

  // The reply line (newline included) for `request` from `caller`.
  std::string handle(const proto::Request& request, uid_t caller);

 private:
  // root, and SlurmUser once slurmctld has told who that is.
  bool privileged(uid_t caller);
  proto::json do_register(const proto::json& body, uid_t caller);
  proto::json do_status(const proto::json& body, uid_t caller);
  proto::json do_events(const proto::json& body, uid_t caller);

  Store& store_;
  JobLookup load_job_;
  UidLookup lookup_slurm_user_;
  std::optional<uid_t> slurm_user_;
};

}  // namespace ar
