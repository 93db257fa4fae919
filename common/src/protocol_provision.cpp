// Continuous provisioning's ops: groups, group_set, group_apply, group_retry,
// group_roll, group_plan, usage and lifecycle_log.
#include <string>

#include "autoresume/protocol.hpp"
#include "protocol_detail.hpp"

namespace ar::proto {

using namespace detail;  // NOLINT: the protocol's own helpers

json GroupsRequest::to_json() const { return json::object(); }
GroupsRequest GroupsRequest::from_json(const json&) { return {}; }

json GroupsReply::Group::to_json() const {
  return {{"name", name},
          {"type", type},
          {"status", status},
          {"count", count},
          {"min_count", min_count},
          {"max_count", max_count},
          {"in_service", in_service},
          {"starting", starting},
          {"leaving", leaving},
          {"operation", operation},
          {"detail", detail}};
}

GroupsReply::Group GroupsReply::Group::from_json(const json& item) {
  return {get_group_name(item, "name"),
          get_string(item, "type", 16),
          get_string(item, "status", 32),
          get_u32(item, "count"),
          get_u32(item, "min_count"),
          get_u32(item, "max_count"),
          get_u32(item, "in_service"),
          get_u32(item, "starting"),
          get_u32(item, "leaving"),
          static_cast<std::uint64_t>(get_i64(item, "operation")),
          get_string(item, "detail", kMaxTextBytes)};
}

json GroupsReply::to_json() const { return {{"groups", to_json_array(groups)}}; }

GroupsReply GroupsReply::from_json(const json& result) {
  return {get_items<Group>(result_object(result), "groups")};
}

json GroupSetRequest::to_json() const {
  json body{{"name", name}};
  if (count) body["count"] = *count;
  if (min_count) body["min_count"] = *min_count;
  return body;
}

GroupSetRequest GroupSetRequest::from_json(const json& body) {
  GroupSetRequest request;
  request.name = get_group_name(body, "name");
  if (body.contains("count")) request.count = get_u32(body, "count");
  if (body.contains("min_count")) request.min_count = get_u32(body, "min_count");
  if (!request.count && !request.min_count) bad("group_set needs count or min_count (or both)");
  return request;
}

json GroupApplyRequest::to_json() const { return json::object(); }
GroupApplyRequest GroupApplyRequest::from_json(const json&) { return {}; }

json GroupRetryRequest::to_json() const { return {{"name", name}}; }

GroupRetryRequest GroupRetryRequest::from_json(const json& body) {
  return {get_group_name(body, "name")};
}

json GroupRollRequest::to_json() const { return {{"name", name}, {"batch", batch}}; }

GroupRollRequest GroupRollRequest::from_json(const json& body) {
  GroupRollRequest request;
  request.name = get_group_name(body, "name");
  request.batch = get_u32(body, "batch", 1);
  if (request.batch == 0) bad("field 'batch' must be at least 1, got 0");
  return request;
}

json GroupPlanRequest::to_json() const { return json::object(); }
GroupPlanRequest GroupPlanRequest::from_json(const json&) { return {}; }

json GroupPlanReply::to_json() const {
  return {{"path", path},
          {"change", change},
          {"diff", diff},
          {"diff_left_out", diff_left_out},
          {"error", error}};
}

GroupPlanReply GroupPlanReply::from_json(const json& result) {
  const auto& body = result_object(result);
  GroupPlanReply reply;
  reply.path = get_string(body, "path", kMaxTextBytes);
  reply.change = get_string(body, "change", 64);
  reply.diff = get_string_list(body, "diff", kMaxDiffLines);
  reply.diff_left_out = get_u32(body, "diff_left_out", 0);
  reply.error = get_string(body, "error", kMaxTextBytes);
  return reply;
}

json GroupReply::to_json() const { return {{"message", message}}; }

GroupReply GroupReply::from_json(const json& result) {
  return {get_string(result_object(result), "message", kMaxTextBytes)};
}

json UsageRequest::to_json() const {
  json body = json::object();
  if (!group.empty()) body["group"] = group;
  if (since) body["since"] = *since;
  if (limit) body["limit"] = *limit;
  return body;
}

UsageRequest UsageRequest::from_json(const json& body) {
  UsageRequest request;
  if (body.contains("group")) request.group = get_group_name(body, "group");
  request.since = get_cursor(body, "since");
  request.limit = get_limit(body);
  return request;
}

json UsageReply::Instance::to_json() const {
  return {{"group", group},
          {"node", node},
          {"instance_id", instance_id},
          {"token", token},
          {"operation", operation},
          {"requested", requested},
          {"started", started},
          {"in_service", in_service},
          {"terminated", terminated},
          {"end_reason", end_reason},
          {"hours", hours}};
}

namespace {

double get_hours(const json& body, const char* field) {
  const auto& value = required(body, field);
  if (!value.is_number() || value.get<double>() < 0)
    bad(named(field) + " must be a number of hours, got " + shown(value));
  return value.get<double>();
}

}  // namespace

UsageReply::Instance UsageReply::Instance::from_json(const json& item) {
  return {get_group_name(item, "group"),
          get_string(item, "node", kMaxNodeNameBytes),
          get_string(item, "instance_id", kMaxReasonBytes),
          get_string(item, "token", kMaxReasonBytes),
          static_cast<std::uint64_t>(get_i64(item, "operation")),
          get_i64(item, "requested"),
          get_i64(item, "started"),
          get_i64(item, "in_service"),
          get_i64(item, "terminated"),
          get_string(item, "end_reason", kMaxTextBytes),
          get_hours(item, "hours")};
}

json UsageReply::Group::to_json() const {
  return {{"group", group}, {"instances", instances}, {"instance_hours", instance_hours}};
}

UsageReply::Group UsageReply::Group::from_json(const json& item) {
  return {get_group_name(item, "group"), static_cast<std::uint64_t>(get_i64(item, "instances")),
          get_hours(item, "instance_hours")};
}

json UsageReply::to_json() const {
  return {{"groups", to_json_array(groups)},
          {"instances", to_json_array(instances)},
          {"left_out", left_out}};
}

UsageReply UsageReply::from_json(const json& result) {
  const auto& body = result_object(result);
  return {get_items<Group>(body, "groups"), get_items<Instance>(body, "instances"),
          static_cast<std::uint64_t>(get_i64(body, "left_out"))};
}

json LifecycleLogRequest::to_json() const { return {{"node", node}}; }

LifecycleLogRequest LifecycleLogRequest::from_json(const json& body) {
  return {get_node_name(body, "node")};
}

json LifecycleLogReply::to_json() const {
  return {{"node", node}, {"path", path}, {"text", text}, {"size", size}};
}

LifecycleLogReply LifecycleLogReply::from_json(const json& result) {
  const auto& body = result_object(result);
  return {get_node_name(body, "node"), get_string(body, "path", 4096),
          get_string(body, "text", kMaxTextBytes),
          static_cast<std::uint64_t>(get_i64(body, "size"))};
}

}  // namespace ar::proto
