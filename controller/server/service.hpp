#pragma once
// What the controller does for each authenticated request, independent of the
// transport. Every state change is in the store before the reply is built.

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "autoresume/protocol.hpp"
#include "clock.hpp"
#include "nodes/node_keeper.hpp"
#include "provision/provisioner.hpp"
#include "resume/step_reports.hpp"
#include "resume/verdicts.hpp"
#include "server/metrics.hpp"
#include "slurm_api.hpp"
#include "store/store.hpp"

namespace ar {

class Service {
 public:
  // Slurm tells who owns a job and who SlurmUser is, and cancels a repair's
  // helper jobs when srun cancels it; `clock` stamps the steps' ends. `wake`
  // tells the resume engine that a step changed. `keeper` takes the node
  // agents' heartbeats and admins' replacements; without it those ops
  // answer `unavailable`. Requests are served by several threads: `slurm`
  // must take load_job, slurm_user_uid and cancel_job from any of them.
  // What srun and the step daemons say of their steps goes to `reports`,
  // which the engine reads. A step is decided through `verdicts`, shared
  // with the engine: a clean end at once, and a step past its deadline
  // (resume/deadline.hpp) answered give_up even when neither the engine
  // nor the store can act. Continuous provisioning's ops go to
  // `provisioner` (none: they answer `unavailable`); requests (by op and
  // outcome) and recoveries are counted into `metrics`, if given.
  Service(Store& store, slurm::SlurmApi& slurm, const Clock& clock, std::function<void()> wake,
          StepReports& reports, Verdicts& verdicts, NodeKeeper* keeper = nullptr,
          const DaemonConfig* config = nullptr, Provisioner* provisioner = nullptr,
          ControllerMetrics* metrics = nullptr);

  // The reply body for `request` from `caller`, connected from the numeric
  // address `peer` (a heartbeat is taken only from its node's address).
  std::string handle(const proto::Request& request, uid_t caller, const std::string& peer = {});
  // root, and SlurmUser once slurmctld has told who that is.
  bool privileged(uid_t caller);
  // Whether `request` is answered without waiting on anything outside
  // (slurmctld, a name lookup): a node agent's heartbeat from a caller
  // known to be root or SlurmUser, whose node's addresses are numeric or
  // in the lookup cache. The server answers those on its io thread.
  bool quick(const proto::Request& request, uid_t caller, const std::string& peer);

 private:
  // Throws `refusal` (forbidden, or not_found where even a refusal would
  // say too much) with `message`; unavailable while slurmctld cannot say
  // who SlurmUser is (so SlurmUser is never told it may not).
  [[noreturn]] void refuse(uid_t caller, const std::string& message,
                           const char* refusal = proto::code::kForbidden);
  // The op's typed request, answered by its handler: the reply as JSON.
  proto::json dispatch(const proto::Request& request, uid_t caller, const std::string& peer);
  proto::HelloReply do_hello(const proto::HelloRequest& request, uid_t caller);
  proto::RegisterReply do_register(proto::RegisterRequest request, uid_t caller);
  // A relaunch given a step id no greater than its attempt before it had:
  // slurmctld lost that step (restarted from an older state) while its
  // tasks may still run. The id is cancelled and the registration refused
  // (step_reused): srun starts the attempt again, under a new id.
  void refuse_reused_id(const proto::RegisterRequest& step);
  // A step's next attempt registered: the time since its fault, if the
  // attempt before it was relaunched.
  void count_recovery(const proto::StepRegistration& step);
  proto::StatusReply do_status(const proto::StatusRequest& request, uid_t caller);
  proto::EventsReply do_events(const proto::EventsRequest& request, uid_t caller);
  proto::VerdictReply do_verdict(const proto::VerdictRequest& request, uid_t caller);
  proto::CancelReply do_cancel(const proto::CancelRequest& request, uid_t caller);
  // A step daemon's report that its node's tasks exited (exit_reports.cpp
  // of the server: do_tasks_exited and what it shares with do_verdict).
  proto::TasksExitedReply do_tasks_exited(const proto::TasksExitedRequest& report, uid_t caller);
  // The step a report is about, if any: registered, ended or under repair
  // (a repair's relaunch goes ahead once the survivors' tasks are gone).
  std::optional<StoredStep> reported_step(const proto::TasksExitedRequest& report);
  // The node ops get the keeper once node_op let the caller in.
  proto::HeartbeatReply do_heartbeat(NodeKeeper& keeper, const proto::HeartbeatRequest& request,
                                     const std::string& peer);
  proto::ReplaceReply do_replace(NodeKeeper& keeper, const proto::ReplaceRequest& request,
                                 uid_t caller);
  proto::NodesReply do_nodes(NodeKeeper& keeper, const proto::NodesRequest& request);
  // The guard rails' requests (gate.hpp), on behalf of `caller`.
  proto::GuardReply do_guard(NodeKeeper& keeper, const std::string& op, const proto::json& body,
                             uid_t caller);
  // Refuses the caller unless privileged; unavailable without a keeper.
  NodeKeeper& node_op(const char* op, uid_t caller);
  // Continuous provisioning's ops (service.cpp's provisioning part):
  // refused unless privileged; unavailable while provisioning is off.
  Provisioner& provision_op(const std::string& op, uid_t caller);
  proto::json do_provision(const std::string& op, const proto::json& body, uid_t caller);
  proto::GroupsReply do_groups(const Provisioner& provisioner);
  proto::GroupPlanReply do_group_plan(Provisioner& provisioner);
  proto::UsageReply do_usage(const proto::UsageRequest& request);
  proto::LifecycleLogReply do_lifecycle_log(const Provisioner& provisioner,
                                            const proto::LifecycleLogRequest& request);
  // The step registered as run_id and attempt, if the caller may act on it.
  StoredStep owned_step(const std::string& run_id, std::uint32_t attempt, uid_t caller);
  // When srun first said the step ended, kept here while the store cannot
  // take it (its disk full), so that the step's deadline still comes.
  Stamp unstored_end(const StoredStep& step, const Stamp& now, const std::string& why);
  // True the first time `what` of the step cannot be stored: said once.
  bool first_store_failure(const StoredStep& step, const char* what);

  Store& store_;
  slurm::SlurmApi& slurm_;
  const Clock& clock_;
  std::function<void()> wake_;
  StepReports& reports_;
  Verdicts& verdicts_;
  NodeKeeper* keeper_;
  const DaemonConfig* config_;
  Provisioner* provisioner_;
  ControllerMetrics* metrics_;
  std::mutex mutex_;  // guards slurm_user_: requests are served by several threads
  std::optional<uid_t> slurm_user_;
  // Guarded by mutex_ as well: the steps' ends the store could not take,
  // and the store failures said already (run#attempt and what).
  std::map<std::string, Stamp> unstored_ends_;
  std::set<std::string> store_failures_;
  std::string lookup_error_;  // why slurmctld could not say who SlurmUser is
};

}  // namespace ar
