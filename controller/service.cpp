#include "service.hpp"

#include <fmt/core.h>

#include "autoresume/version.hpp"

namespace ar {

using proto::json;
using proto::ProtocolError;
namespace code = proto::code;

Service::Service(Store& store, JobLookup load_job, UidLookup slurm_user)
    : store_(store), load_job_(std::move(load_job)), lookup_slurm_user_(std::move(slurm_user)) {}

bool Service::privileged(uid_t caller) {
  if (caller == 0) return true;
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
    throw ProtocolError(code::kBadRequest,
                        "unknown op '" + request.op + "' (known: hello, register, status, events)");
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
  if (const auto owner = store_.run_owner(step.run_id); owner && *owner != job->uid)
    throw ProtocolError(code::kForbidden,
                        fmt::format("run '{}' belongs to uid {}", step.run_id, *owner));
  const auto result = store_.register_step(step, job->uid);
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
                      {"detail", e.detail}});
  return {{"events", std::move(events)}};
}

}  // namespace ar
