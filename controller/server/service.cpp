#include "server/service.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <stdexcept>

#include "autoresume/version.hpp"

namespace ar {

using proto::json;
using proto::ProtocolError;
namespace code = proto::code;

Service::Service(Store& store, JobLookup load_job, UidLookup slurm_user, JobCancel cancel_job,
                 std::function<void()> wake, NodeKeeper* keeper)
    : store_(store),
      load_job_(std::move(load_job)),
      lookup_slurm_user_(std::move(slurm_user)),
      cancel_job_(std::move(cancel_job)),
      wake_(std::move(wake)),
      keeper_(keeper) {}

bool Service::privileged(uid_t caller) {
  if (caller == 0) return true;
  std::lock_guard lock(mutex_);
  if (!slurm_user_) {
    try {
      slurm_user_ = lookup_slurm_user_();
    } catch (const std::exception&) {
      return false;  // asked again next time
    }
  }
  return caller == *slurm_user_;
}

std::string Service::handle(const proto::Request& request, uid_t caller) {
  try {
    if (request.op == "hello")
      return proto::ok_reply(
          request.id, {{"version", kVersion}, {"protocol", proto::kVersion}, {"uid", caller}});
    if (request.op == "register")
      return proto::ok_reply(request.id, do_register(request.body, caller));
    if (request.op == "status") return proto::ok_reply(request.id, do_status(request.body, caller));
    if (request.op == "events") return proto::ok_reply(request.id, do_events(request.body, caller));
    if (request.op == "verdict")
      return proto::ok_reply(request.id, do_verdict(request.body, caller));
    if (request.op == "cancel") return proto::ok_reply(request.id, do_cancel(request.body, caller));
    if (request.op == "heartbeat")
      return proto::ok_reply(request.id, do_heartbeat(request.body, caller));
    if (request.op == "replace")
      return proto::ok_reply(request.id, do_replace(request.body, caller));
    if (request.op == "nodes") return proto::ok_reply(request.id, do_nodes(caller));
    throw ProtocolError(code::kBadRequest,
                        "unknown op '" + request.op +
                            "' (known: hello, register, status, events, verdict, cancel, "
                            "heartbeat, replace, nodes)");
  } catch (const ProtocolError& e) {
    return proto::error_reply(request.id, e.code(), e.what());
  }
}

json Service::do_register(const json& body, uid_t caller) {
  const auto step = proto::StepRegistration::from_json(body);
  std::optional<slurm::JobInfo> job;
  try {
    job = load_job_(step.job_id);
  } catch (const std::exception& e) {
    throw ProtocolError(code::kUnavailable, std::string("cannot ask Slurm: ") + e.what());
  }
  if (!job)
    throw ProtocolError(code::kNotFound, fmt::format("job {} is not known to Slurm", step.job_id));
  if (job->uid != caller && !privileged(caller))
    throw ProtocolError(code::kForbidden, fmt::format("job {} belongs to uid {}, not to uid {}",
                                                      step.job_id, job->uid, caller));
  if (job->heterogeneous)
    throw ProtocolError(code::kBadRequest,
                        fmt::format("job {} is a heterogeneous job, which auto-resume cannot "
                                    "repair (its components are separate allocations)",
                                    step.job_id));
  if (const auto owner = store_.run_owner(step.run_id); owner && *owner != job->uid)
    throw ProtocolError(code::kForbidden,
                        fmt::format("run '{}' belongs to uid {}", step.run_id, *owner));
  StoredStep other;
  const auto result = store_.register_step(step, job->uid, &other);
  // One protected launch per job at a time: two would repair the same
  // allocation at once.
  if (result == Store::Insert::busy)
    throw ProtocolError(
        code::kBadRequest,
        fmt::format("job {} already has a protected step running ({}.{}, run {}); auto-resume "
                    "protects one step per job at a time",
                    step.job_id, other.step.job_id, other.step.step_id, other.step.run_id));
  return {{"run_id", step.run_id},
          {"attempt", step.attempt},
          {"duplicate", result == Store::Insert::duplicate}};
}

json Service::do_status(const json& body, uid_t caller) {
  std::optional<std::uint32_t> job_filter;
  if (body.contains("job_id")) job_filter = proto::get_u32(body, "job_id");
  json steps = json::array();
  for (const auto& stored :
       store_.steps(privileged(caller) ? std::nullopt : std::optional(caller))) {
    if (job_filter && stored.step.job_id != *job_filter) continue;
    auto item = stored.step.to_json();
    item["uid"] = stored.uid;
    item["state"] = stored.state;
    item["created_at"] = stored.created_at;
    if (!stored.verdict.empty()) item["verdict"] = stored.verdict;
    if (!stored.message.empty()) item["message"] = stored.message;
    if (!stored.phase.empty()) item["phase"] = stored.phase;
    steps.push_back(std::move(item));
  }
  return {{"steps", std::move(steps)}};
}

json Service::do_events(const json& body, uid_t caller) {
  std::int64_t since = 0;
  if (body.contains("since")) since = proto::get_u32(body, "since");
  json events = json::array();
  for (const auto& e :
       store_.events(privileged(caller) ? std::nullopt : std::optional(caller), since))
    events.push_back({{"id", e.id},
                      {"at", e.at},
                      {"job_id", e.job_id},
                      {"run_id", e.run_id},
                      {"kind", e.kind},
                      {"detail", e.detail},
                      {"node", e.node}});
  return {{"events", std::move(events)}};
}

namespace {

// A node name as slurm.conf spells one.
std::string node_name(const json& body) {
  auto node = proto::get_string(body, "node", 64);
  if (node.empty() || !std::ranges::all_of(node, [](unsigned char c) {
        return std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.';
      }))
    throw ProtocolError(code::kBadRequest, "field 'node': '" + node + "' is not a node name");
  return node;
}

}  // namespace

NodeKeeper& Service::node_op(const char* op, uid_t caller) {
  if (!privileged(caller))
    throw ProtocolError(code::kForbidden,
                        fmt::format("{} is for root and SlurmUser, not uid {}", op, caller));
  if (keeper_ == nullptr)
    throw ProtocolError(code::kUnavailable, fmt::format("this controller does not take {}", op));
  return *keeper_;
}

json Service::do_heartbeat(const json& body, uid_t caller) {
  auto& keeper = node_op("heartbeat", caller);
  try {
    keeper.heartbeat(node_name(body), proto::get_bool(body, "stopping", false));
  } catch (const std::invalid_argument& e) {
    throw ProtocolError(code::kBadRequest, e.what());
  }
  return json::object();
}

json Service::do_replace(const json& body, uid_t caller) {
  auto& keeper = node_op("replace", caller);
  const auto node = node_name(body);
  const auto mode = body.contains("mode") ? proto::get_string(body, "mode", 16) : "wait";
  try {
    return {{"node", node}, {"message", keeper.request_replace(node, mode)}};
  } catch (const std::invalid_argument& e) {
    throw ProtocolError(code::kBadRequest, e.what());
  } catch (const std::exception& e) {
    throw ProtocolError(code::kUnavailable, std::string("cannot ask Slurm: ") + e.what());
  }
}

json Service::do_nodes(uid_t caller) {
  auto& keeper = node_op("nodes", caller);
  json repairs = json::array();
  for (const auto& r : store_.node_repairs())
    repairs.push_back({{"node", r.node},
                       {"state", r.state},
                       {"reason", r.reason},
                       {"mode", r.mode},
                       {"attempts", r.attempts},
                       {"started_at", r.started_at},
                       {"detail", r.detail}});
  json heard = json::object();
  for (const auto& [node, age] : keeper.heartbeat_ages()) heard[node] = age;
  return {{"replacements", std::move(repairs)}, {"heartbeats", std::move(heard)}};
}

}  // namespace ar

namespace ar {

StoredStep Service::owned_step(const json& body, uid_t caller) {
  const auto run_id = proto::get_string(body, "run_id", 128);
  const auto attempt = proto::get_u32(body, "attempt");
  auto step = store_.find(run_id, attempt);
  if (!step)
    throw ProtocolError(code::kNotFound, fmt::format("no step is registered as run '{}' attempt {}",
                                                     run_id, attempt));
  if (step->uid != caller && !privileged(caller))
    throw ProtocolError(code::kForbidden, fmt::format("run '{}' belongs to uid {}, not to uid {}",
                                                      run_id, step->uid, caller));
  return *step;
}

json Service::do_verdict(const json& body, uid_t caller) {
  auto step = owned_step(body, caller);
  if (proto::get_bool(body, "ended", false) && step.state == step_state::kRegistered) {
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    if (store_.mark_ended(step, now,
                          EventSpec{"ended", fmt::format("srun says step {}.{} attempt {} ended",
                                                         step.step.job_id, step.step.step_id,
                                                         step.step.attempt)}))
      wake_();
    step = store_.find(step.step.run_id, step.step.attempt).value();
  }
  json reply{{"run_id", step.step.run_id}, {"attempt", step.step.attempt}};
  if (step.state == step_state::kDecided) {
    reply["verdict"] = step.verdict;
    reply["message"] = step.message;
    if (step.verdict == "relaunch")
      reply["relaunch"] = step.repair.value("relaunch", json::object());
  } else if (step.state == step_state::kRegistered) {
    reply["verdict"] = "none";
    reply["message"] = "running";
  } else {
    reply["verdict"] = "wait";
    reply["message"] = step.state == step_state::kEnded
                           ? std::string("checking the step's nodes")
                           : "repairing the allocation (" + step.phase + ")";
  }
  return reply;
}

json Service::do_cancel(const json& body, uid_t caller) {
  auto step = owned_step(body, caller);
  const auto reason = body.contains("reason") ? proto::get_string(body, "reason", 256) : "";
  if (step.state != step_state::kDecided &&
      store_.cancel(step, reason.empty() ? std::string("cancelled by its srun") : reason)) {
    // The repair's helper jobs as they are now (the engine may have added
    // one meanwhile; it cancels what it adds after this, see Engine).
    step = store_.find(step.step.run_id, step.step.attempt).value();
    if (step.repair.contains("helpers"))
      for (const auto& [node, helper] : step.repair["helpers"].items()) {
        try {
          cancel_job_(helper.get<std::uint32_t>());
        } catch (const std::exception&) {
          // gone already, or slurmctld is away: the engine cleans up by name
        }
      }
    wake_();
  }
  step = store_.find(step.step.run_id, step.step.attempt).value();
  return {{"run_id", step.step.run_id},
          {"attempt", step.step.attempt},
          {"verdict", step.verdict},
          {"message", step.message}};
}

}  // namespace ar
