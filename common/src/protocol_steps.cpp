// The protected steps' ops: register, status, events, verdict, cancel and
// tasks_exited.
#include <string>

#include "autoresume/protocol.hpp"
#include "protocol_detail.hpp"

namespace ar::proto {

using namespace detail;  // NOLINT: the protocol's own helpers

namespace {

// A request's run id: 1 to kMaxRunIdBytes bytes of kRunIdPunctuation,
// letters and digits.
std::string get_run_id(const json& body, const char* field = "run_id") {
  auto text = get_string(body, field, kMaxRunIdBytes);
  if (text.empty()) bad(named(field) + " must not be empty");
  if (!valid_run_id(text))
    bad(named(field) + " may hold only letters, digits and " + std::string(kRunIdPunctuation) +
        ", got " + shown(json(text)));
  return text;
}

Verdict get_verdict(const json& body, const char* field) {
  const auto text = get_string(body, field, 64);
  const auto verdict = parse_verdict(text);
  if (!verdict) bad(named(field) + ": unknown verdict '" + text + "'");
  return *verdict;
}

}  // namespace

// register

json StepRegistration::to_json() const {
  json out = {{"job_id", job_id}, {"step_id", step_id}, {"run_id", run_id},    {"attempt", attempt},
              {"argv", argv},     {"cwd", cwd},         {"nodelist", nodelist}};
  if (min_nodes > 0) out["min_nodes"] = min_nodes;
  if (hang_timeout.automatic)
    out["hang_timeout"] = "auto";
  else if (hang_timeout.seconds > 0)
    out["hang_timeout"] = hang_timeout.seconds;
  if (hang_signal > 0) out["hang_signal"] = hang_signal;
  return out;
}

StepRegistration StepRegistration::from_json(const json& body) {
  StepRegistration step;
  step.job_id = get_u32(body, "job_id");
  step.step_id = get_u32(body, "step_id");
  step.run_id = get_run_id(body);
  step.attempt = get_u32(body, "attempt");
  step.argv = get_string_list(body, "argv");
  if (step.argv.empty()) bad("field 'argv' must not be empty");
  step.cwd = get_string(body, "cwd");
  std::size_t bytes = step.cwd.size();
  for (const auto& arg : step.argv) bytes += arg.size() + 1;
  if (bytes > kMaxCommandBytes)
    bad("fields 'argv' and 'cwd' hold " + std::to_string(bytes) +
        " bytes, more than the limit of " + std::to_string(kMaxCommandBytes));
  // What srun saw; the controller keeps slurmctld's list of the step instead.
  if (body.contains("nodelist")) step.nodelist = get_string(body, "nodelist");
  step.min_nodes = get_u32(body, "min_nodes", 0);
  if (body.contains("hang_timeout")) {
    const auto& value = body["hang_timeout"];
    if (value.is_string() && value.get<std::string>() == "auto") {
      step.hang_timeout.automatic = true;
    } else {
      step.hang_timeout.seconds = get_u32(body, "hang_timeout");
      if (step.hang_timeout.seconds > kMaxSectionSeconds)
        bad("field 'hang_timeout' is " + std::to_string(step.hang_timeout.seconds) +
            ": expected seconds up to " + std::to_string(kMaxSectionSeconds) + ", or \"auto\"");
    }
  }
  step.hang_signal = get_u32(body, "hang_signal", 0);
  if (step.hang_signal > 64)
    bad("field 'hang_signal' is " + std::to_string(step.hang_signal) + ": expected 1-64");
  return step;
}

json RegisterReply::to_json() const {
  return {{"run_id", run_id}, {"attempt", attempt}, {"duplicate", duplicate}};
}

RegisterReply RegisterReply::from_json(const json& result) {
  const auto& body = result_object(result);
  return {get_string(body, "run_id", kMaxRunIdBytes), get_u32(body, "attempt"),
          get_bool(body, "duplicate")};
}

// status

json StatusRequest::to_json() const {
  json body = json::object();
  if (job_id) body["job_id"] = *job_id;
  if (limit) body["limit"] = *limit;
  if (before) body["before"] = *before;
  return body;
}

StatusRequest StatusRequest::from_json(const json& body) {
  StatusRequest request;
  if (body.contains("job_id")) request.job_id = get_u32(body, "job_id");
  request.limit = get_limit(body);
  request.before = get_cursor(body, "before");
  return request;
}

json StatusReply::Step::to_json() const {
  auto item = step.to_json();
  item["uid"] = uid;
  item["state"] = name_of(state);
  item["created_at"] = created_at;
  if (verdict != Verdict::none) item["verdict"] = to_string(verdict);
  if (!message.empty()) item["message"] = message;
  if (phase != RepairPhase::none) item["phase"] = name_of(phase);
  return item;
}

StatusReply::Step StatusReply::Step::from_json(const json& item) {
  Step out;
  out.step = StepRegistration::from_json(item);
  out.uid = get_u32(item, "uid");
  out.state = get_named<StepState>(item, "state", "step state");
  out.created_at = get_i64(item, "created_at");
  if (item.contains("verdict")) out.verdict = get_verdict(item, "verdict");
  if (item.contains("message")) out.message = get_string(item, "message", kMaxTextBytes);
  if (item.contains("phase")) out.phase = get_named<RepairPhase>(item, "phase", "repair phase");
  return out;
}

json StatusReply::to_json() const {
  json out = {{"steps", to_json_array(steps)}};
  if (next) out["next"] = *next;
  if (controller) out["controller"] = controller->to_json();
  return out;
}

StatusReply StatusReply::from_json(const json& result) {
  const auto& body = result_object(result);
  StatusReply reply{get_items<Step>(body, "steps"), get_cursor(body, "next"), std::nullopt};
  if (body.contains("controller"))
    reply.controller = nested<GuardState>(body.at("controller"), "controller");
  return reply;
}

// events

json EventsRequest::to_json() const {
  json body = json::object();
  if (since) body["since"] = *since;
  if (limit) body["limit"] = *limit;
  if (after) body["after"] = *after;
  if (!group.empty()) body["group"] = group;
  if (!level.empty()) body["level"] = level;
  return body;
}

EventsRequest EventsRequest::from_json(const json& body) {
  EventsRequest request;
  if (body.contains("since")) request.since = get_u32(body, "since");
  request.limit = get_limit(body);
  request.after = get_cursor(body, "after");
  if (body.contains("group")) request.group = get_group_name(body, "group");
  if (body.contains("level")) {
    request.level = get_string(body, "level", 64);
    if (request.level != "info" && request.level != "warning" && request.level != "error")
      bad("field 'level': unknown level '" + request.level + "' (known: info, warning, error)");
  }
  return request;
}

json EventsReply::Event::to_json() const {
  json out = {{"id", id},     {"at", at},         {"job_id", job_id}, {"run_id", run_id},
              {"kind", kind}, {"detail", detail}, {"node", node},     {"uid", uid}};
  if (!group.empty()) out["group"] = group;
  if (level != "info") out["level"] = level;
  if (!resource.empty()) out["resource"] = resource;
  return out;
}

EventsReply::Event EventsReply::Event::from_json(const json& item) {
  return {get_i64(item, "id"),
          get_i64(item, "at"),
          get_u32(item, "job_id"),
          get_string(item, "run_id", kMaxRunIdBytes),
          get_string(item, "kind", 64),
          get_string(item, "detail", kMaxTextBytes),
          get_string(item, "node", kMaxTextBytes),
          item.contains("uid") ? get_i64(item, "uid") : 0,
          item.contains("group") ? get_string(item, "group", kMaxTextBytes) : "",
          item.contains("level") ? get_string(item, "level", 16) : "info",
          item.contains("resource") ? get_string(item, "resource", 16) : ""};
}

json EventsReply::to_json() const {
  json out = {{"events", to_json_array(events)}};
  if (next) out["next"] = *next;
  return out;
}

EventsReply EventsReply::from_json(const json& result) {
  const auto& body = result_object(result);
  return {get_items<Event>(body, "events"), get_cursor(body, "next")};
}

// verdict

json VerdictRequest::to_json() const {
  return {{"run_id", run_id}, {"attempt", attempt}, {"ended", ended}};
}

VerdictRequest VerdictRequest::from_json(const json& body) {
  return {get_run_id(body), get_u32(body, "attempt"), get_bool(body, "ended", false)};
}

json VerdictReply::Relaunch::to_json() const {
  json out = {{"nodelist", nodelist}, {"num_nodes", num_nodes}};
  if (step_nodes > 0) out["step_nodes"] = step_nodes;
  return out;
}

VerdictReply::Relaunch VerdictReply::Relaunch::from_json(const json& item) {
  return {get_string(item, "nodelist"), get_u32(item, "num_nodes"), get_u32(item, "step_nodes", 0)};
}

json VerdictReply::to_json() const {
  json result{{"run_id", run_id},
              {"attempt", attempt},
              {"verdict", std::string(ar::to_string(verdict))},
              {"message", message}};
  if (relaunch) result["relaunch"] = relaunch->to_json();
  return result;
}

VerdictReply VerdictReply::from_json(const json& result) {
  const auto& body = result_object(result);
  VerdictReply reply;
  reply.run_id = get_string(body, "run_id", kMaxRunIdBytes);
  reply.attempt = get_u32(body, "attempt");
  reply.verdict = get_verdict(body, "verdict");
  reply.message = get_string(body, "message", kMaxTextBytes);
  if (body.contains("relaunch")) reply.relaunch = nested<Relaunch>(body.at("relaunch"), "relaunch");
  return reply;
}

// cancel

json CancelRequest::to_json() const {
  json body{{"run_id", run_id}, {"attempt", attempt}};
  if (!reason.empty()) body["reason"] = reason;
  return body;
}

CancelRequest CancelRequest::from_json(const json& body) {
  CancelRequest request;
  request.run_id = get_run_id(body);
  request.attempt = get_u32(body, "attempt");
  if (body.contains("reason")) request.reason = get_string(body, "reason", kMaxReasonBytes);
  return request;
}

json CancelReply::to_json() const {
  return {{"run_id", run_id},
          {"attempt", attempt},
          {"verdict", std::string(ar::to_string(verdict))},
          {"message", message}};
}

CancelReply CancelReply::from_json(const json& result) {
  const auto& body = result_object(result);
  return {get_string(body, "run_id", kMaxRunIdBytes), get_u32(body, "attempt"),
          get_verdict(body, "verdict"), get_string(body, "message", kMaxTextBytes)};
}

// tasks_exited

json TasksExitedRequest::to_json() const {
  json body{{"job_id", job_id},   {"step_id", step_id}, {"node", node},
            {"node_id", node_id}, {"tasks", tasks},     {"failed", failed}};
  if (!run_id.empty()) body["run_id"] = run_id;
  if (attempt) body["attempt"] = *attempt;
  return body;
}

TasksExitedRequest TasksExitedRequest::from_json(const json& body) {
  TasksExitedRequest request;
  request.job_id = get_u32(body, "job_id");
  request.step_id = get_u32(body, "step_id");
  if (body.contains("run_id")) request.run_id = get_run_id(body);
  if (body.contains("attempt")) request.attempt = get_u32(body, "attempt");
  request.node = get_node_name(body, "node");
  request.node_id = get_u32(body, "node_id");
  request.tasks = get_u32(body, "tasks");
  if (request.tasks == 0) bad(named("tasks") + " must be at least 1, got 0");
  request.failed = get_u32(body, "failed");
  if (request.failed > request.tasks)
    bad(named("failed") + ": " + std::to_string(request.failed) + " is more than the " +
        std::to_string(request.tasks) + " tasks");
  return request;
}

json TasksExitedReply::to_json() const { return {{"counted", counted}, {"message", message}}; }

TasksExitedReply TasksExitedReply::from_json(const json& result) {
  const auto& body = result_object(result);
  return {get_bool(body, "counted"), get_string(body, "message", kMaxTextBytes)};
}

}  // namespace ar::proto
