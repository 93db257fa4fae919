#include "server/service.hpp"

#include <fmt/core.h>

#include <chrono>
#include <stdexcept>

#include "autoresume/text.hpp"
#include "autoresume/version.hpp"
#include "hostlist.hpp"
#include "log.hpp"
#include "store/step_moves.hpp"

namespace ar {

using proto::json;
using proto::ProtocolError;
namespace code = proto::code;

Service::Service(Store& store, slurm::SlurmApi& slurm, const Clock& clock,
                 std::function<void()> wake, StepReports& reports, Verdicts& verdicts,
                 NodeKeeper* keeper, const DaemonConfig* config, Provisioner* provisioner,
                 ControllerMetrics* metrics)
    : store_(store),
      slurm_(slurm),
      clock_(clock),
      wake_(std::move(wake)),
      reports_(reports),
      verdicts_(verdicts),
      keeper_(keeper),
      config_(config),
      provisioner_(provisioner),
      metrics_(metrics) {}

bool Service::privileged(uid_t caller) {
  if (caller == 0) return true;
  std::lock_guard lock(mutex_);
  if (!slurm_user_) {
    try {
      slurm_user_ = slurm_.slurm_user_uid();
      lookup_error_.clear();
    } catch (const std::exception& e) {
      lookup_error_ = e.what();
      return false;  // asked again next time
    }
  }
  return caller == *slurm_user_;
}

bool Service::quick(const proto::Request& request, uid_t caller, const std::string& peer) {
  if (request.op != proto::HeartbeatRequest::kOp || keeper_ == nullptr) return false;
  if (caller != 0) {
    std::lock_guard lock(mutex_);
    if (!slurm_user_) return false;  // privileged() asks slurmctld
  }
  const auto node = request.body.find("node");
  if (node == request.body.end() || !node->is_string()) return true;  // refused as it parses
  return keeper_->heartbeat_at_hand(node->get<std::string>(), peer);
}

void Service::refuse(uid_t caller, const std::string& message, const char* refusal) {
  std::string why;
  {
    std::lock_guard lock(mutex_);
    if (!slurm_user_) why = lookup_error_;
  }
  // The caller may be SlurmUser: that is for slurmctld to say, and it cannot.
  if (!why.empty())
    throw ProtocolError(code::kUnavailable,
                        fmt::format("{}, and slurmctld cannot say whether uid {} is SlurmUser: {}",
                                    message, caller, why));
  throw ProtocolError(refusal, message);
}

std::string Service::handle(const proto::Request& request, uid_t caller, const std::string& peer) {
  try {
    auto reply = proto::ok_reply(request.id, dispatch(request, caller, peer));
    if (metrics_ != nullptr) metrics_->request(request.op, "ok");
    return reply;
  } catch (const ProtocolError& e) {
    if (metrics_ != nullptr) metrics_->request(request.op, e.code());
    return proto::error_reply(request.id, e.code(), e.what());
  } catch (...) {
    if (metrics_ != nullptr) metrics_->request(request.op, code::kInternal);
    throw;
  }
}

json Service::dispatch(const proto::Request& request, uid_t caller, const std::string& peer) {
  using namespace proto;
  const auto& op = request.op;
  const auto& body = request.body;
  if (op == HelloRequest::kOp) return do_hello(HelloRequest::from_json(body), caller).to_json();
  if (op == RegisterRequest::kOp)
    return do_register(RegisterRequest::from_json(body), caller).to_json();
  if (op == StatusRequest::kOp) return do_status(StatusRequest::from_json(body), caller).to_json();
  if (op == EventsRequest::kOp) return do_events(EventsRequest::from_json(body), caller).to_json();
  if (op == VerdictRequest::kOp)
    return do_verdict(VerdictRequest::from_json(body), caller).to_json();
  if (op == CancelRequest::kOp) return do_cancel(CancelRequest::from_json(body), caller).to_json();
  // Who may report comes before what was reported.
  if (op == TasksExitedRequest::kOp) {
    if (!privileged(caller))
      refuse(caller, fmt::format("{} is for root and SlurmUser (the step daemons), not uid {}",
                                 TasksExitedRequest::kOp, caller));
    return do_tasks_exited(TasksExitedRequest::from_json(body), caller).to_json();
  }
  // The node ops: who may ask comes before what was asked.
  if (op == HeartbeatRequest::kOp)
    return do_heartbeat(node_op(HeartbeatRequest::kOp, caller), HeartbeatRequest::from_json(body),
                        peer)
        .to_json();
  if (op == ReplaceRequest::kOp)
    return do_replace(node_op(ReplaceRequest::kOp, caller), ReplaceRequest::from_json(body), caller)
        .to_json();
  if (op == NodesRequest::kOp)
    return do_nodes(node_op(NodesRequest::kOp, caller), NodesRequest::from_json(body)).to_json();
  if (op == PauseRequest::kOp || op == UnpauseRequest::kOp || op == ResumeActionsRequest::kOp)
    return do_guard(node_op(op.c_str(), caller), op, body, caller).to_json();
  if (op == GroupsRequest::kOp || op == GroupSetRequest::kOp || op == GroupApplyRequest::kOp ||
      op == GroupRetryRequest::kOp || op == GroupRollRequest::kOp || op == UsageRequest::kOp ||
      op == LifecycleLogRequest::kOp || op == GroupPlanRequest::kOp)
    return do_provision(op, body, caller);
  std::string known;
  for (const auto name : kOps) known += (known.empty() ? "" : ", ") + std::string(name);
  throw ProtocolError(code::kBadRequest, "unknown op '" + op + "' (known: " + known + ")");
}

proto::HelloReply Service::do_hello(const proto::HelloRequest&, uid_t caller) {
  return {kVersion, proto::kVersion, caller};
}

namespace {

// Step ids Slurm keeps for its own steps (batch script, extern, interactive,
// pending): none of them is an srun the plugin protects.
constexpr std::uint32_t kFirstSpecialStep = 0xfffffff0U;

}  // namespace

proto::RegisterReply Service::do_register(proto::RegisterRequest step, uid_t caller) {
  if (step.step_id >= kFirstSpecialStep)
    throw ProtocolError(code::kBadRequest,
                        fmt::format("step {}.{} is not an srun step (the batch script, the extern "
                                    "or an interactive step); only an srun's step is protected",
                                    step.job_id, step.step_id));
  std::optional<slurm::JobInfo> job;
  std::optional<std::string> nodes;
  try {
    job = slurm_.load_job(step.job_id);
    if (job) nodes = slurm_.step_nodes(step.job_id, step.step_id);
  } catch (const std::exception& e) {
    throw ProtocolError(code::kUnavailable, std::string("cannot ask Slurm: ") + e.what());
  }
  if (!job)
    throw ProtocolError(code::kNotFound, fmt::format("job {} is not known to Slurm", step.job_id));
  if (job->uid != caller && !privileged(caller))
    refuse(caller,
           fmt::format("job {} belongs to uid {}, not to uid {}", step.job_id, job->uid, caller));
  if (job->heterogeneous)
    throw ProtocolError(code::kBadRequest,
                        fmt::format("job {} is a heterogeneous job, which auto-resume cannot "
                                    "repair (its components are separate allocations)",
                                    step.job_id));
  if (!nodes)
    throw ProtocolError(code::kNotFound,
                        fmt::format("slurmctld lists no step {}.{} (with nodes) in job {}",
                                    step.job_id, step.step_id, step.job_id));
  if (const auto owner = store_.run_owner(step.run_id); owner && *owner != job->uid)
    throw ProtocolError(code::kForbidden,
                        fmt::format("run '{}' cannot be registered for job {} (of uid {}): "
                                    "choose another run id",
                                    step.run_id, step.job_id, job->uid));
  refuse_reused_id(step);
  // The nodes are slurmctld's: what the client sent is never used.
  step.nodelist = std::move(*nodes);
  StoredStep other;
  std::string why;
  const auto result = store_.register_step(step, job->uid, &other, &why);
  // Past a cap on the store's growth (counted for the job's owner, whoever
  // asks): the step runs unprotected, or not at all under required=1.
  if (result == Store::Insert::capped)
    throw ProtocolError(code::kBusy, why + ": step " + std::to_string(step.job_id) + "." +
                                         std::to_string(step.step_id) + " is not protected");
  // One protected launch per job at a time: two would repair the same
  // allocation at once.
  if (result == Store::Insert::busy)
    throw ProtocolError(
        code::kBadRequest,
        fmt::format("job {} already has a protected step running ({}.{}, run {}); auto-resume "
                    "protects one step per job at a time",
                    step.job_id, other.step.job_id, other.step.step_id, other.step.run_id));
  if (result == Store::Insert::created && step.attempt > 0 && metrics_ != nullptr)
    count_recovery(step);
  return {step.run_id, step.attempt, result == Store::Insert::duplicate};
}

void Service::refuse_reused_id(const proto::RegisterRequest& step) {
  if (step.attempt == 0) return;
  const auto before = store_.find(step.run_id, step.attempt - 1);
  // Step ids only grow within a job: a smaller or equal one comes from a
  // slurmctld that no longer lists the step it gave that id before. Its
  // slurmstepds may still run the attempt before's tasks (nothing reached
  // them: slurmctld could not cancel a step it did not list), and a launch
  // under the same id meets them on their nodes: slurmd either kills both
  // or runs the new one beside them. Cancelling the id now, while srun has
  // launched nothing, reaches them (slurmctld lists the id again); srun
  // then starts the attempt once more and gets a new id.
  if (!before || before->step.job_id != step.job_id || step.step_id > before->step.step_id) return;
  try {
    slurm_.kill_step(step.job_id, step.step_id);
  } catch (const std::exception& e) {
    throw ProtocolError(code::kUnavailable,
                        fmt::format("slurmctld gave step {}.{} an id no newer than attempt {}'s "
                                    "step {}.{}, and cannot cancel it: {}",
                                    step.job_id, step.step_id, before->step.attempt,
                                    before->step.job_id, before->step.step_id, e.what()));
  }
  const auto what = fmt::format(
      "slurmctld gave attempt {} of run {} the step id {}.{}, no newer than attempt {}'s step "
      "{}.{}: it restarted from an older state and lost that step, whose tasks may still run; "
      "step {}.{} was cancelled (ending them) and srun starts attempt {} again under a new id",
      step.attempt, step.run_id, step.job_id, step.step_id, before->step.attempt,
      before->step.job_id, before->step.step_id, step.job_id, step.step_id, step.attempt);
  log::warn("{}", what);
  store_.add_event(*before, {EventKind::step_reused, what});
  throw ProtocolError(code::kStepReused, what);
}

void Service::count_recovery(const proto::StepRegistration& step) {
  const auto before = store_.find(step.run_id, step.attempt - 1);
  if (!before || before->verdict != Verdict::relaunch) return;
  const auto& fault = before->repair.started;
  if (!fault) return;
  metrics_->recovered(std::chrono::duration<double>(clock_.since(*fault)).count());
}

namespace {

// Adds rows to a page while it stays within kMaxListBytes (a row that alone
// is larger still goes, alone: the stored sizes are capped below the
// line limit). Returns false once the page is full.
template <typename Row>
bool fits(std::vector<Row>& page, Row row, std::size_t& bytes) {
  const auto size = row.to_json().dump().size() + 1;
  if (!page.empty() && bytes + size > proto::kMaxListBytes) return false;
  bytes += size;
  page.push_back(std::move(row));
  return true;
}

}  // namespace

proto::StatusReply Service::do_status(const proto::StatusRequest& request, uid_t caller) {
  const auto limit = request.limit.value_or(proto::kDefaultStatusRows);
  // One more than asked: whether there is a next page.
  auto rows = store_.steps(privileged(caller) ? std::nullopt : std::optional(caller),
                           request.job_id, request.before, limit + 1);
  proto::StatusReply reply;
  std::size_t bytes = 0;
  for (auto& stored : rows) {
    if (reply.steps.size() == limit) break;
    // A node list as long as a line is cut for display only.
    stored.step.nodelist = shortened(stored.step.nodelist, 1024);
    if (!fits(reply.steps,
              {std::move(stored.step), stored.uid, stored.state, stored.created_at, stored.verdict,
               std::move(stored.message), stored.phase},
              bytes))
      break;
    reply.next = stored.row;
  }
  if (reply.steps.size() == rows.size()) reply.next.reset();  // that was all
  if (keeper_ != nullptr) reply.controller = keeper_->gate().state();
  return reply;
}

proto::EventsReply Service::do_events(const proto::EventsRequest& request, uid_t caller) {
  const auto limit = request.limit.value_or(proto::kDefaultEventRows);
  auto rows = store_.events(privileged(caller) ? std::nullopt : std::optional(caller),
                            request.since.value_or(0), request.after.value_or(0), limit + 1,
                            {request.group, request.level});
  proto::EventsReply reply;
  std::size_t bytes = 0;
  for (auto& e : rows) {
    if (reply.events.size() == limit) break;
    if (!fits(reply.events,
              {e.id, e.at, e.job_id, std::move(e.run_id), std::move(e.kind), std::move(e.detail),
               std::move(e.node), e.uid, std::move(e.group), std::move(e.level),
               std::move(e.resource)},
              bytes))
      break;
    reply.next = e.id;
  }
  if (reply.events.size() == rows.size()) reply.next.reset();
  return reply;
}

NodeKeeper& Service::node_op(const char* op, uid_t caller) {
  if (!privileged(caller))
    refuse(caller, fmt::format("{} is for root and SlurmUser, not uid {}", op, caller));
  if (keeper_ == nullptr)
    throw ProtocolError(code::kUnavailable, fmt::format("this controller does not take {}", op));
  return *keeper_;
}

proto::HeartbeatReply Service::do_heartbeat(NodeKeeper& keeper,
                                            const proto::HeartbeatRequest& request,
                                            const std::string& peer) {
  try {
    keeper.heartbeat(request.node, request.stopping, peer,
                     std::chrono::milliseconds{request.interval_ms});
  } catch (const std::invalid_argument& e) {
    throw ProtocolError(code::kBadRequest, e.what());
  } catch (const HeartbeatRefused& e) {
    throw ProtocolError(
        e.why() == HeartbeatRefused::Why::not_yet ? code::kUnavailable : code::kForbidden,
        e.what());
  }
  if (request.stopping) return {};
  // The agent is its node's (the heartbeat was taken from its address); the
  // engine uses a node's reports only for the steps slurmctld runs there.
  reports_.progress.report(request.node, request.progress, clock_.now());
  if (request.checked) reports_.checks.answer(request.node, *request.checked);
  proto::HeartbeatReply reply{keeper.peer_work(request.node, request.peers)};
  reply.check = reports_.checks.asked(request.node);
  return reply;
}

proto::ReplaceReply Service::do_replace(NodeKeeper& keeper, const proto::ReplaceRequest& request,
                                        uid_t caller) {
  try {
    return {request.node, keeper.request_replace(request.node, request.mode, caller)};
  } catch (const std::invalid_argument& e) {
    throw ProtocolError(code::kBadRequest, e.what());
  } catch (const ActionsHeld& e) {
    throw ProtocolError(code::kUnavailable, e.what());
  } catch (const std::exception& e) {
    throw ProtocolError(code::kUnavailable, std::string("cannot ask Slurm: ") + e.what());
  }
}

proto::GuardReply Service::do_guard(NodeKeeper& keeper, const std::string& op,
                                    const proto::json& body, uid_t caller) {
  auto& gate = keeper.gate();
  std::string message;
  // unpause and resume_actions have no fields.
  if (op == proto::PauseRequest::kOp)
    message = gate.pause(caller, proto::PauseRequest::from_json(body).reason);
  else if (op == proto::UnpauseRequest::kOp)
    message = gate.unpause(caller);
  else
    message = gate.resume_actions(caller);
  wake_();  // the engine looks again at once
  return {message, gate.state()};
}

proto::NodesReply Service::do_nodes(NodeKeeper& keeper, const proto::NodesRequest& request) {
  const std::set<std::string> named(request.nodes.begin(), request.nodes.end());
  const auto wanted = [&](const std::string& node) {
    return named.empty() || named.contains(node);
  };
  proto::NodesReply reply;
  for (auto& r : store_.node_repairs())
    if (wanted(r.node))
      reply.replacements.push_back({std::move(r.node), r.state, std::move(r.reason), r.mode,
                                    r.attempts, r.started_at, std::move(r.detail)});
  auto ages = keeper.heartbeat_ages();
  std::erase_if(ages, [&](const auto& entry) { return !wanted(entry.first); });
  if (ages.size() > proto::kMaxNodesListed) {
    // The nodes heard longest ago: the silent ones come first.
    std::vector<std::pair<double, std::string>> by_age;
    by_age.reserve(ages.size());
    for (const auto& [node, age] : ages) by_age.emplace_back(age, node);
    std::ranges::nth_element(by_age, by_age.begin() + proto::kMaxNodesListed - 1, std::greater<>{});
    by_age.resize(proto::kMaxNodesListed);
    reply.heartbeats_left_out = static_cast<std::uint32_t>(ages.size() - by_age.size());
    for (auto& [age, node] : by_age) reply.heartbeats.emplace(std::move(node), age);
  } else {
    reply.heartbeats = std::move(ages);
  }
  return reply;
}

}  // namespace ar

namespace ar {

StoredStep Service::owned_step(const std::string& run_id, std::uint32_t attempt, uid_t caller) {
  auto step = store_.find(run_id, attempt);
  const auto unknown = fmt::format("no step is registered as run '{}' attempt {}", run_id, attempt);
  if (!step) throw ProtocolError(code::kNotFound, unknown);
  // Another user's run is answered as an unknown one: neither that it
  // exists nor whose it is.
  if (step->uid != caller && !privileged(caller)) {
    log::info("uid {} asked for run {} attempt {}, another user's: answered as an unknown run",
              caller, run_id, attempt);
    refuse(caller, unknown, code::kNotFound);
  }
  return *step;
}

namespace {

// The nodes the resume engine relaunches the step on, as it stored them.
proto::VerdictReply::Relaunch relaunch_plan(const StoredStep& step) {
  const auto plan = step.repair.relaunch.value_or(RelaunchPlan{});
  return {plan.nodelist, plan.num_nodes, plan.step_nodes};
}

}  // namespace

proto::VerdictReply Service::do_verdict(const proto::VerdictRequest& request, uid_t caller) {
  auto step = owned_step(request.run_id, request.attempt, caller);
  reports_.asks.asked(step.key(), clock_.now());
  bool marked = false;
  if (request.ended && step.state == StepState::registered) {
    const auto now = clock_.stamp();
    try {
      marked = store_.mark_ended(
          step, now,
          EventSpec{EventKind::ended,
                    fmt::format("srun says step {}.{} attempt {} ended", step.step.job_id,
                                step.step.step_id, step.step.attempt)});
      step = store_.find(step.step.run_id, step.step.attempt).value();
    } catch (const std::exception& e) {
      // The store cannot take the end (its disk full): the step's deadline
      // runs from the first time srun said so all the same.
      move_to(step, StepState::ended);
      step.set_ended(unstored_end(step, now, e.what()));
    }
  }
  // Every node said its tasks exited 0: no_fault now, without end_window;
  // else the engine looks for a node at fault.
  if (request.ended && step.state == StepState::ended && !verdicts_.clean_end(step) && marked)
    wake_();
  proto::VerdictReply reply;
  reply.run_id = step.step.run_id;
  reply.attempt = step.step.attempt;
  // The engine should have decided by now; srun hears give_up whether or
  // not it can be stored, unless another verdict was stored first (it
  // stands). The engine clears what is left of a repair.
  if (verdicts_.overdue(step) != Verdicts::Overdue::not_due) wake_();
  if (step.state == StepState::decided) {
    reports_.exits.forget(step.key());
    reply.verdict = step.verdict;
    reply.message = step.message;
    if (step.verdict == Verdict::relaunch) reply.relaunch = relaunch_plan(step);
  } else if (step.state == StepState::registered) {
    reply.verdict = Verdict::none;
    reply.message = "running";
  } else {
    reply.verdict = Verdict::wait;
    const auto checking = reports_.checks.checking_of(step.key());
    reply.message =
        step.state != StepState::ended
            ? "repairing the allocation (" + std::string(name_of(step.phase)) + ")"
        : checking ? fmt::format("checking {} after the step failed (failure_check)", *checking)
                   : std::string("checking the step's nodes");
  }
  return reply;
}

Stamp Service::unstored_end(const StoredStep& step, const Stamp& now, const std::string& why) {
  if (first_store_failure(step, "end"))
    log::warn("step {}: cannot store that srun says it ended; its deadline runs from now: {}",
              step.key(), why);
  std::lock_guard lock(mutex_);
  return unstored_ends_.try_emplace(step.key(), now).first->second;
}

bool Service::first_store_failure(const StoredStep& step, const char* what) {
  std::lock_guard lock(mutex_);
  return store_failures_.insert(fmt::format("{} {}", step.key(), what)).second;
}

proto::CancelReply Service::do_cancel(const proto::CancelRequest& request, uid_t caller) {
  auto step = owned_step(request.run_id, request.attempt, caller);
  if (step.state != StepState::decided &&
      store_.cancel(
          step, request.reason.empty() ? std::string("cancelled by its srun") : request.reason)) {
    // The repair's helper jobs as they are now (the engine may have added
    // one meanwhile; it cancels what it adds after this, see Engine).
    log::audit(
        {caller, "cancel", step.step.run_id}, name_of(EventKind::cancelled),
        fmt::format("job {}: step {}.{} attempt {} cancelled; its helper jobs go", step.step.job_id,
                    step.step.job_id, step.step.step_id, step.step.attempt));
    step = store_.find(step.step.run_id, step.step.attempt).value();
    for (const auto& [node, helper] : step.repair.helpers) {
      try {
        slurm_.cancel_job(helper);
      } catch (const std::exception&) {
        // gone already, or slurmctld is away: the engine cleans up by name
      }
    }
    wake_();
  }
  step = store_.find(step.step.run_id, step.step.attempt).value();
  reports_.exits.forget(step.key());
  return {step.step.run_id, step.step.attempt, step.verdict, step.message};
}

std::optional<StoredStep> Service::reported_step(const proto::TasksExitedRequest& report) {
  for (auto& step : store_.job_steps(report.job_id)) {
    if (step.step.step_id != report.step_id || step.state == StepState::decided) continue;
    if (!report.run_id.empty() && step.step.run_id != report.run_id) continue;
    if (report.attempt && step.step.attempt != *report.attempt) continue;
    return std::move(step);
  }
  return std::nullopt;
}

proto::TasksExitedReply Service::do_tasks_exited(const proto::TasksExitedRequest& report,
                                                 uid_t /*caller: privileged*/) {
  const auto what = fmt::format("step {}.{}", report.job_id, report.step_id);
  auto step = reported_step(report);
  if (!step)
    return {false,
            fmt::format("no protected {}{} is running, under repair or waiting for its "
                        "verdict: nothing to count",
                        what, report.run_id.empty() ? "" : " of run '" + report.run_id + "'")};
  // The name comes from the step's environment, which its user may set;
  // the node's index in the step comes from Slurm: both must agree with
  // slurmctld's list of the step's nodes.
  const auto hosts = registered_hosts(*step);
  if (report.node_id >= hosts.size() || hosts[report.node_id] != report.node)
    return {false, fmt::format("{} is not node {} of {} ({}): not counted", report.node,
                               report.node_id, what, shortened(step->step.nodelist, 256))};
  const auto tasks = fmt::format("{} of {}: {} task{}, {} with a status other than 0", report.node,
                                 what, report.tasks, report.tasks == 1 ? "" : "s", report.failed);
  if (reports_.exits.add(step->key(), report.node, report.clean(), hosts) &&
      step->state == StepState::ended && verdicts_.clean_end(*step))
    return {true, tasks + "; every node reported: no_fault"};
  return {true, tasks};
}

}  // namespace ar
