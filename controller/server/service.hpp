#pragma once
// What the controller does for each authenticated request, independent of the
// transport. Every state change is in the store before the reply is built.

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "autoresume/protocol.hpp"
#include "nodes/node_keeper.hpp"
#include "slurm_adapter.hpp"
#include "store/store.hpp"

namespace ar {

class Service {
 public:
  using JobLookup = std::function<std::optional<slurm::JobInfo>(std::uint32_t)>;
  // SlurmUser's uid; may throw while slurmctld cannot be reached.
  using UidLookup = std::function<uid_t()>;
  using JobCancel = std::function<void(std::uint32_t)>;

  // `wake` tells the resume engine that a step changed; `cancel_job` ends a
  // repair's helper jobs when srun cancels it.
  // `keeper` takes the node agents' heartbeats and admins' replacements;
  // without it those ops answer `unavailable`.
  Service(Store& store, JobLookup load_job, UidLookup slurm_user, JobCancel cancel_job,
          std::function<void()> wake, NodeKeeper* keeper = nullptr);

  // The reply line (newline included) for `request` from `caller`.
  std::string handle(const proto::Request& request, uid_t caller);

 private:
  // root, and SlurmUser once slurmctld has told who that is.
  bool privileged(uid_t caller);
  proto::json do_register(const proto::json& body, uid_t caller);
  proto::json do_status(const proto::json& body, uid_t caller);
  proto::json do_events(const proto::json& body, uid_t caller);
  proto::json do_verdict(const proto::json& body, uid_t caller);
  proto::json do_cancel(const proto::json& body, uid_t caller);
  proto::json do_heartbeat(const proto::json& body, uid_t caller);
  proto::json do_replace(const proto::json& body, uid_t caller);
  proto::json do_nodes(uid_t caller);
  // Throws forbidden unless the caller is privileged; unavailable without a keeper.
  NodeKeeper& node_op(const char* op, uid_t caller);
  // The step named by the body's run_id and attempt, if the caller may act on it.
  StoredStep owned_step(const proto::json& body, uid_t caller);

  Store& store_;
  JobLookup load_job_;
  UidLookup lookup_slurm_user_;
  JobCancel cancel_job_;
  std::function<void()> wake_;
  NodeKeeper* keeper_;
  std::mutex mutex_;  // guards slurm_user_: requests are served by several threads
  std::optional<uid_t> slurm_user_;
};

}  // namespace ar
