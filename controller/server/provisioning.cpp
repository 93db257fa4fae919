// The service's continuous provisioning ops (docs/provisioning.md): groups,
// group_set, group_apply, group_retry, group_roll, usage, lifecycle_log.
// Root and SlurmUser only: they change or show the cluster's nodes.

#include <fmt/core.h>

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include "autoresume/text.hpp"
#include "provision/instances.hpp"
#include "server/service.hpp"

namespace ar {

using proto::json;
using proto::ProtocolError;
namespace code = proto::code;

namespace {

// The bytes of a lifecycle log a reply carries: its end.
constexpr std::size_t kLogTailBytes = 32 * 1024;

std::string group_detail(const provision::Group& group, provision::Millis now) {
  std::vector<std::string> what;
  if (group.stopped)
    what.push_back(
        fmt::format("stopped after {} lifecycle failures in a row (auto-resume group retry {})",
                    group.bootstrap_failures, group.spec.name));
  if (group.config_failed)
    what.push_back(
        "the provider said the group's configuration is wrong (exit 78): fix it, "
        "then auto-resume group retry " +
        group.spec.name);
  if (group.capacity_until > now)
    what.push_back(fmt::format("no capacity: creates wait {} s more",
                               (group.capacity_until - now).count() / 1000));
  if (group.operation.rollback)
    what.push_back(fmt::format("rolled back to count {} (min_count not reached in time)",
                               group.operation.count));
  const auto rolling =
      std::ranges::count_if(group.slots, [](const provision::Slot& s) { return s.roll; });
  if (rolling > 0)
    what.push_back(
        fmt::format("rolling update: {} to replace, {} at a time", rolling, group.roll_batch));
  return join(what, "; ");
}

}  // namespace

Provisioner& Service::provision_op(const std::string& op, uid_t caller) {
  if (!privileged(caller))
    refuse(caller, fmt::format("{} is for root and SlurmUser, not uid {}", op, caller));
  if (provisioner_ == nullptr)
    throw ProtocolError(code::kUnavailable,
                        fmt::format("{}: continuous provisioning is off on this controller "
                                    "(node_provisioning=continuous turns it on)",
                                    op));
  return *provisioner_;
}

json Service::do_provision(const std::string& op, const json& body, uid_t caller) {
  using namespace proto;
  auto& provisioner = provision_op(op, caller);
  try {
    if (op == GroupsRequest::kOp) {
      GroupsRequest::from_json(body);
      return do_groups(provisioner).to_json();
    }
    if (op == UsageRequest::kOp) return do_usage(UsageRequest::from_json(body)).to_json();
    if (op == GroupPlanRequest::kOp) {
      GroupPlanRequest::from_json(body);
      return do_group_plan(provisioner).to_json();
    }
    if (op == LifecycleLogRequest::kOp)
      return do_lifecycle_log(provisioner, LifecycleLogRequest::from_json(body)).to_json();
    GroupReply reply;
    if (op == GroupSetRequest::kOp) {
      const auto request = GroupSetRequest::from_json(body);
      reply.message = provisioner.set_group(request.name, request.count, request.min_count, caller);
    } else if (op == GroupApplyRequest::kOp) {
      GroupApplyRequest::from_json(body);
      reply.message = provisioner.apply_groups(caller);
    } else if (op == GroupRetryRequest::kOp) {
      reply.message = provisioner.retry_group(GroupRetryRequest::from_json(body).name, caller);
    } else {
      const auto request = GroupRollRequest::from_json(body);
      reply.message = provisioner.roll_group(request.name, request.batch, caller);
    }
    wake_();  // the engine's next tick acts on it at once
    return reply.to_json();
  } catch (const std::invalid_argument& e) {
    throw ProtocolError(code::kBadRequest, e.what());
  } catch (const ProtocolError&) {
    throw;
  } catch (const std::exception& e) {
    throw ProtocolError(code::kUnavailable, fmt::format("{}: {}", op, e.what()));
  }
}

proto::GroupPlanReply Service::do_group_plan(Provisioner& provisioner) {
  const auto plan = provisioner.plan_include();
  proto::GroupPlanReply reply;
  reply.path = plan.path;
  reply.change = plan.change;
  reply.error = printable(shortened(plan.error, proto::kMaxTextBytes / 4));
  std::size_t bytes = 0;
  for (const auto& line : plan.diff) {
    bytes += line.size() + 8;
    if (reply.diff.size() == proto::GroupPlanReply::kMaxDiffLines ||
        bytes > proto::kMaxListBytes / 2) {
      ++reply.diff_left_out;
    } else {
      reply.diff.push_back(printable(line));
    }
  }
  return reply;
}

proto::GroupsReply Service::do_groups(const Provisioner& provisioner) {
  const auto cluster = provisioner.state();
  const provision::Millis now{clock_.unix_now() * 1000};
  proto::GroupsReply reply;
  for (const auto& group : cluster.groups) {
    proto::GroupsReply::Group out;
    out.name = group.spec.name;
    out.type = std::string(to_string(group.spec.type));
    out.status = std::string(provision::to_string(group.status));
    out.count = group.operation.count;
    out.min_count = group.operation.min_count;
    out.max_count = group.spec.max_count;
    out.operation = group.operation.id;
    const auto slots = provision::count_slots(group);
    out.in_service = slots.in_service;
    out.starting = slots.starting;
    out.leaving = slots.leaving;
    out.detail = group_detail(group, now);
    reply.groups.push_back(std::move(out));
  }
  return reply;
}

proto::UsageReply Service::do_usage(const proto::UsageRequest& request) {
  const auto since = request.since.value_or(0);
  const auto now = clock_.unix_now();
  const auto records = store_.instance_records(request.group, since);
  proto::UsageReply reply;
  for (auto& g : usage(records, since, now))
    reply.groups.push_back({std::move(g.group), g.instances, g.instance_hours});
  const auto limit = request.limit.value_or(proto::kMaxPageRows);
  std::size_t bytes = 0;
  for (auto it = records.rbegin(); it != records.rend(); ++it) {  // newest first
    if (reply.instances.size() == limit) break;
    proto::UsageReply::Instance row{it->group,
                                    it->node,
                                    it->instance_id,
                                    it->token,
                                    it->operation,
                                    it->requested,
                                    it->started,
                                    it->in_service,
                                    it->terminated,
                                    it->end_reason,
                                    static_cast<double>(billable_seconds(*it, since, now)) / 3600};
    const auto size = row.to_json().dump().size() + 1;
    if (bytes + size > proto::kMaxListBytes) break;
    bytes += size;
    reply.instances.push_back(std::move(row));
  }
  reply.left_out = records.size() - reply.instances.size();
  return reply;
}

proto::LifecycleLogReply Service::do_lifecycle_log(const Provisioner& provisioner,
                                                   const proto::LifecycleLogRequest& request) {
  const auto path = provisioner.lifecycle_log(request.node);
  if (!path) throw ProtocolError(code::kNotFound, "'" + request.node + "' is no group's node");
  if (path->empty())
    throw ProtocolError(code::kNotFound, request.node + " has had no create yet: no log");
  std::ifstream in(*path, std::ios::binary | std::ios::ate);
  if (!in)
    throw ProtocolError(code::kNotFound,
                        fmt::format("{}: no lifecycle log at {} (the provider writes it when it "
                                    "runs the group's lifecycle_script)",
                                    request.node, *path));
  const auto size = static_cast<std::uint64_t>(in.tellg());
  const auto keep = std::min<std::uint64_t>(size, kLogTailBytes);
  in.seekg(static_cast<std::streamoff>(size - keep));
  std::string text(keep, '\0');
  in.read(text.data(), static_cast<std::streamsize>(keep));
  // Each line safe for a terminal; the lines stay lines.
  std::string shown;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto end = std::min(text.find('\n', start), text.size());
    shown += printable(std::string_view(text).substr(start, end - start));
    if (end < text.size()) shown += '\n';
    start = end + 1;
  }
  return {request.node, *path, std::move(shown), size};
}

}  // namespace ar
