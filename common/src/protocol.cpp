#include "autoresume/protocol.hpp"

#include <algorithm>
#include <cctype>

#include "autoresume/text.hpp"

namespace ar::proto {

namespace {

[[noreturn]] void bad(const std::string& message) {
  throw ProtocolError(code::kBadRequest, message);
}

std::string text_of(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string named(const char* field) { return std::string("field '") + field + "'"; }

// `value` as an error message shows it: its JSON, cut to 64 bytes. A reply
// escapes the message once more, and must fit in a line.
std::string shown(const json& value) {
  constexpr std::size_t kShown = 64;
  auto text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > kShown) text = text.substr(0, kShown - 3) + "...";
  return text;
}

const json& required(const json& body, const char* field) {
  const auto it = body.find(field);
  if (it == body.end()) bad(std::string("missing field '") + field + "'");
  return *it;
}

std::string get_string(const json& body, const char* field, std::size_t max_len = 4096) {
  const auto& value = required(body, field);
  if (!value.is_string()) bad(named(field) + " must be a string");
  auto text = value.get<std::string>();
  if (text.size() > max_len)
    bad(named(field) + " is longer than " + std::to_string(max_len) + " bytes");
  return text;
}

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

std::uint32_t get_u32(const json& body, const char* field) {
  const auto& value = required(body, field);
  const bool fits = value.is_number_unsigned()
                        ? value.get<std::uint64_t>() <= 0xffffffffULL
                        : value.is_number_integer() && value.get<std::int64_t>() >= 0 &&
                              value.get<std::int64_t>() <= 0xffffffffLL;
  if (!fits) bad(named(field) + " must be an unsigned 32-bit integer, got " + shown(value));
  return static_cast<std::uint32_t>(value.get<std::uint64_t>());
}

// An optional one: `fallback` when absent.
std::uint32_t get_u32(const json& body, const char* field, std::uint32_t fallback) {
  return body.contains(field) ? get_u32(body, field) : fallback;
}

std::int64_t get_i64(const json& body, const char* field) {
  const auto& value = required(body, field);
  const bool fits = value.is_number_unsigned() ? value.get<std::uint64_t>() <= 0x7fffffffffffffffULL
                                               : value.is_number_integer();
  if (!fits) bad(named(field) + " must be a 64-bit integer, got " + shown(value));
  return value.get<std::int64_t>();
}

bool get_bool(const json& body, const char* field) {
  const auto& value = required(body, field);
  if (!value.is_boolean()) bad(named(field) + " must be true or false, got " + shown(value));
  return value.get<bool>();
}

// An optional boolean: `fallback` when absent.
bool get_bool(const json& body, const char* field, bool fallback) {
  return body.contains(field) ? get_bool(body, field) : fallback;
}

std::vector<std::string> get_string_list(const json& body, const char* field,
                                         std::size_t max_items = 1024) {
  const auto& value = required(body, field);
  if (!value.is_array()) bad(named(field) + " must be an array of strings");
  if (value.size() > max_items)
    bad(named(field) + " has more than " + std::to_string(max_items) + " items");
  std::vector<std::string> out;
  for (const auto& item : value) {
    if (!item.is_string()) bad(named(field) + " must be an array of strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

// `node`, the value of `field`, if it is a node name as slurm.conf spells
// one.
std::string node_name(std::string node, const char* field) {
  if (node.empty() || node.size() > kMaxNodeNameBytes ||
      !std::ranges::all_of(node, [](unsigned char c) {
        return std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.';
      }))
    bad(named(field) + ": '" + node + "' is not a node name");
  return node;
}

std::string get_node_name(const json& body, const char* field) {
  return node_name(get_string(body, field, kMaxNodeNameBytes), field);
}

// A node group's name, as its file's name gives it (the controller's
// provision/groups.hpp).
std::string get_group_name(const json& body, const char* field) {
  auto name = get_string(body, field, 4096);
  if (!is_slurm_name(name, kMaxGroupNameBytes))
    bad(named(field) + ": " + shown(json(name)) +
        " is not a group name (letters, digits, '_' and '-', starting with a letter, at most " +
        std::to_string(kMaxGroupNameBytes) + " bytes)");
  return name;
}

Verdict get_verdict(const json& body, const char* field) {
  const auto text = get_string(body, field, 64);
  const auto verdict = parse_verdict(text);
  if (!verdict) bad(named(field) + ": unknown verdict '" + text + "'");
  return *verdict;
}

// A state by its name (states.hpp); `what` names the kind in the error.
template <typename E>
E get_named(const json& body, const char* field, const char* what) {
  const auto text = get_string(body, field, 64);
  const auto value = parse_name<E>(text);
  if (!value) bad(named(field) + ": unknown " + what + " '" + text + "'");
  return *value;
}

// A reply's result: an object, whatever its fields.
const json& result_object(const json& result) {
  if (!result.is_object()) bad("the result must be a JSON object, got " + shown(result));
  return result;
}

// An object nested in `field` (of an array, at `index`), parsed by Item.
template <typename Item>
Item nested(const json& item, const char* field, std::optional<std::size_t> index = {}) {
  const auto where = named(field) + (index ? " item " + std::to_string(*index) : "");
  if (!item.is_object()) bad(where + " must be an object, got " + shown(item));
  try {
    return Item::from_json(item);
  } catch (const ProtocolError& e) {
    bad(where + ": " + e.what());
  }
}

template <typename Item>
std::vector<Item> get_items(const json& body, const char* field) {
  const auto& value = required(body, field);
  if (!value.is_array()) bad(named(field) + " must be an array of objects");
  std::vector<Item> out;
  for (std::size_t i = 0; i < value.size(); ++i) out.push_back(nested<Item>(value[i], field, i));
  return out;
}

template <typename Item>
json to_json_array(const std::vector<Item>& items) {
  json out = json::array();
  for (const auto& item : items) out.push_back(item.to_json());
  return out;
}

}  // namespace

bool valid_run_id(std::string_view run_id) {
  return std::ranges::all_of(run_id, [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           kRunIdPunctuation.find(c) != std::string_view::npos;
  });
}

Request parse_request(std::string_view body_text) {
  if (body_text.size() > kMaxMessageBytes)
    throw ProtocolError(code::kTooLarge, "message of " + std::to_string(body_text.size()) +
                                             " bytes exceeds the limit of " +
                                             std::to_string(kMaxMessageBytes));
  json body = json::parse(body_text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) bad("not valid JSON");
  if (!body.is_object()) bad("a request must be a JSON object");
  Request request;
  if (auto it = body.find("id"); it != body.end()) {
    // Echoed in the reply: keep it flat and short.
    const bool flat = it->is_null() || it->is_number() || it->is_boolean() ||
                      (it->is_string() && it->get_ref<const std::string&>().size() <= 128);
    if (!flat) bad("field 'id' must be a number or a string of at most 128 bytes");
    request.id = *it;
  }
  request.op = get_string(body, "op", 64);
  request.body = std::move(body);
  return request;
}

std::string ok_reply(const json& id, json result) {
  json reply = {{"ok", true}, {"result", std::move(result)}};
  if (!id.is_null()) reply["id"] = id;
  return text_of(reply);
}

std::string error_reply(const json& id, std::string_view code, std::string_view message) {
  json reply = {{"ok", false},
                {"error", {{"code", std::string(code)}, {"message", std::string(message)}}}};
  if (!id.is_null()) reply["id"] = id;
  return text_of(reply);
}

std::string make_request(const json& id, std::string_view op, json fields) {
  json request = fields.is_object() ? std::move(fields) : json::object();
  if (!id.is_null()) request["id"] = id;
  request["op"] = std::string(op);
  return text_of(request);
}

Reply parse_reply(std::string_view body_text) {
  auto body = json::parse(body_text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) bad("a reply must be a JSON object");
  Reply out;
  out.ok = get_bool(body, "ok");
  if (out.ok) {
    // Moved out, never copied: a copy recurses as deep as the JSON is
    // nested, and a reply of 32,000 nested arrays overflowed the stack.
    const auto it = body.find("result");
    out.result = it != body.end() ? std::move(*it) : json::object();
    return out;
  }
  const auto& error = required(body, "error");
  if (!error.is_object()) bad("field 'error' must be an object");
  out.code = get_string(error, "code", 64);
  out.message = get_string(error, "message", kMaxTextBytes);
  return out;
}

// hello

json HelloRequest::to_json() const { return json::object(); }
HelloRequest HelloRequest::from_json(const json&) { return {}; }

json HelloReply::to_json() const {
  return {{"version", version}, {"protocol", protocol}, {"uid", uid}};
}

HelloReply HelloReply::from_json(const json& result) {
  const auto& body = result_object(result);
  return {get_string(body, "version", 64), get_u32(body, "protocol"), get_u32(body, "uid")};
}

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

namespace {

std::optional<std::uint32_t> get_limit(const json& body) {
  if (!body.contains("limit")) return std::nullopt;
  const auto limit = get_u32(body, "limit");
  if (limit == 0 || limit > kMaxPageRows)
    bad("field 'limit' must be 1-" + std::to_string(kMaxPageRows) + ", got " +
        std::to_string(limit));
  return limit;
}

std::optional<std::int64_t> get_cursor(const json& body, const char* field) {
  if (!body.contains(field)) return std::nullopt;
  const auto cursor = get_i64(body, field);
  if (cursor < 0) bad(named(field) + " must not be negative, got " + std::to_string(cursor));
  return cursor;
}

}  // namespace

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

// heartbeat

json HeartbeatRequest::to_json() const {
  json body{{"node", node}};
  if (stopping) body["stopping"] = true;
  if (interval_ms != 0) body["interval_ms"] = interval_ms;
  if (!peers.empty()) {
    body["peers"] = json::object();
    for (const auto& [name, result] : peers) body["peers"][name] = std::string(to_string(result));
  }
  if (!progress.empty()) {
    body["progress"] = json::array();
    for (const auto& step : progress) {
      json ranks = json::array();
      for (const auto& r : step.ranks) {
        json item{{"rank", r.rank}, {"age_ms", r.age_ms}};
        if (r.beat.step) item["step"] = *r.beat.step;
        if (!r.beat.section.empty()) {
          item["section"] = r.beat.section;
          item["section_s"] = r.beat.section_s;
        }
        ranks.push_back(std::move(item));
      }
      body["progress"].push_back(
          {{"job_id", step.job_id}, {"step_id", step.step_id}, {"ranks", std::move(ranks)}});
    }
  }
  if (checked)
    body["checked"] = {
        {"id", checked->id}, {"passed", checked->passed}, {"detail", checked->detail}};
  return body;
}

namespace {

// One rank of a heartbeat's "progress".
RankProgress rank_progress(const json& item) {
  if (!item.is_object()) bad("'progress': a rank must be an object");
  RankProgress r{get_u32(item, "rank"), get_u32(item, "age_ms"), {}};
  if (item.contains("step")) {
    const auto& step = item["step"];
    if (!step.is_number_unsigned() || step.get<std::uint64_t>() > (std::uint64_t{1} << 63) - 1)
      bad("'progress': rank " + std::to_string(r.rank) + "'s 'step' must be 0 to 2^63-1");
    r.beat.step = step.get<std::uint64_t>();
  }
  if (item.contains("section")) {
    const auto name = get_string(item, "section", kMaxSectionName);
    const auto seconds = get_u32(item, "section_s");
    if (!parse_beat(name + ":" + std::to_string(seconds)))
      bad("'progress': rank " + std::to_string(r.rank) + "'s section '" + name + "' of " +
          std::to_string(seconds) + " s is not a section (1-" + std::to_string(kMaxSectionName) +
          " letters, digits, '_', '.', '-'; 1-" + std::to_string(kMaxSectionSeconds) + " s)");
    r.beat.section = name;
    r.beat.section_s = seconds;
  }
  return r;
}

}  // namespace

HeartbeatRequest HeartbeatRequest::from_json(const json& body) {
  HeartbeatRequest request{get_node_name(body, "node"), get_bool(body, "stopping", false), {}};
  request.interval_ms = get_u32(body, "interval_ms", 0);
  if (body.contains("interval_ms") &&
      (request.interval_ms < kMinHeartbeatInterval || request.interval_ms > kMaxHeartbeatInterval))
    bad("'interval_ms' is " + std::to_string(request.interval_ms) + ": expected " +
        std::to_string(kMinHeartbeatInterval) + " to " + std::to_string(kMaxHeartbeatInterval) +
        " (milliseconds between heartbeats)");
  if (body.contains("progress")) {
    const auto& list = body["progress"];
    if (!list.is_array()) bad("'progress' must be an array");
    if (list.size() > kMaxProgressSteps)
      bad("'progress' has " + std::to_string(list.size()) + " steps, more than " +
          std::to_string(kMaxProgressSteps));
    std::size_t ranks = 0;
    for (const auto& item : list) {
      if (!item.is_object()) bad("'progress' must be an array of objects");
      StepProgress step{get_u32(item, "job_id"), get_u32(item, "step_id"), {}};
      if (!item.contains("ranks") || !item["ranks"].is_array())
        bad("'progress': step " + std::to_string(step.job_id) + "." + std::to_string(step.step_id) +
            " has no 'ranks' array");
      ranks += item["ranks"].size();
      if (ranks > kMaxProgressRanks)
        bad("'progress' has more than " + std::to_string(kMaxProgressRanks) + " ranks");
      for (const auto& rank : item["ranks"]) step.ranks.push_back(rank_progress(rank));
      request.progress.push_back(std::move(step));
    }
  }
  if (body.contains("checked")) {
    const auto& item = body["checked"];
    if (!item.is_object()) bad("'checked' must be an object");
    if (!item.contains("id") || !item["id"].is_number_unsigned() ||
        item["id"].get<std::uint64_t>() == 0)
      bad("'checked': 'id' must be a positive integer");
    request.checked = CheckDone{item["id"].get<std::uint64_t>(), get_bool(item, "passed"),
                                get_string(item, "detail", kMaxCheckDetailBytes)};
  }
  if (!body.contains("peers")) return request;
  const auto& peers = body["peers"];
  if (!peers.is_object()) bad("'peers' must be an object of node names and probe results");
  if (peers.size() > kMaxPeerProbes)
    bad("'peers' has more than " + std::to_string(kMaxPeerProbes) + " nodes");
  for (const auto& [name, value] : peers.items()) {
    const auto node = get_node_name(json{{"peers", name}}, "peers");
    const auto text = get_string(peers, name.c_str(), 16);
    const auto result = parse_probe_result(text);
    if (!result)
      bad("'peers': the result for " + node + " is '" + text +
          "' (known: answered, silent, unknown)");
    request.peers[node] = *result;
  }
  return request;
}

json HeartbeatReply::to_json() const {
  json result = json::object();
  if (check) result["check"] = {{"id", check->id}, {"timeout_ms", check->timeout_ms}};
  if (probe.empty()) return result;
  result["probe"] = json::array();
  for (const auto& p : probe) {
    json item{{"node", p.node}, {"address", p.address}, {"port", p.port}};
    if (p.deep) item["deep"] = true;
    result["probe"].push_back(std::move(item));
  }
  return result;
}

HeartbeatReply HeartbeatReply::from_json(const json& result) {
  result_object(result);
  HeartbeatReply reply;
  if (result.contains("check")) {
    const auto& item = result["check"];
    if (!item.is_object() || !item.contains("id") || !item["id"].is_number_unsigned() ||
        item["id"].get<std::uint64_t>() == 0)
      bad("'check' must be an object with a positive 'id'");
    const auto timeout = get_u32(item, "timeout_ms");
    if (timeout == 0 || timeout > 600'000)
      bad("'check': 'timeout_ms' is " + std::to_string(timeout) + ": expected 1 to 600000");
    reply.check = CheckAsk{item["id"].get<std::uint64_t>(), timeout};
  }
  if (!result.contains("probe")) return reply;
  const auto& list = result["probe"];
  if (!list.is_array()) bad("'probe' must be an array");
  if (list.size() > kMaxPeerProbes)
    bad("'probe' has more than " + std::to_string(kMaxPeerProbes) + " nodes");
  for (const auto& item : list) {
    if (!item.is_object()) bad("'probe' must be an array of objects");
    PeerProbe p{get_node_name(item, "node"), get_string(item, "address", 255), 0,
                get_bool(item, "deep", false)};
    if (p.address.empty() || !std::ranges::all_of(p.address, [](unsigned char c) {
          return std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == ':';
        }))
      bad("'probe': '" + p.address + "' is not a host name or numeric address");
    const auto port = get_u32(item, "port");
    if (port == 0 || port > 65535)
      bad("'probe': port " + std::to_string(port) + " of " + p.node + " is not 1-65535");
    p.port = static_cast<std::uint16_t>(port);
    reply.probe.push_back(std::move(p));
  }
  return reply;
}

// replace

json ReplaceRequest::to_json() const {
  return {{"node", node}, {"mode", std::string(name_of(mode))}};
}

ReplaceRequest ReplaceRequest::from_json(const json& body) {
  ReplaceRequest request;
  request.node = get_node_name(body, "node");
  if (body.contains("mode")) {
    const auto mode = get_string(body, "mode", 16);
    const auto parsed = parse_name<ReplaceMode>(mode);
    if (!parsed) bad("unknown mode '" + mode + "' (known: wait, now, force)");
    request.mode = *parsed;
  }
  return request;
}

json ReplaceReply::to_json() const { return {{"node", node}, {"message", message}}; }

ReplaceReply ReplaceReply::from_json(const json& result) {
  const auto& body = result_object(result);
  return {get_node_name(body, "node"), get_string(body, "message", kMaxTextBytes)};
}

// nodes

json NodesRequest::to_json() const {
  json out = json::object();
  if (!nodes.empty()) out["nodes"] = nodes;
  return out;
}

NodesRequest NodesRequest::from_json(const json& body) {
  NodesRequest request;
  if (!body.contains("nodes")) return request;
  for (auto& node : get_string_list(body, "nodes", kMaxNodesListed))
    request.nodes.push_back(node_name(std::move(node), "node"));
  return request;
}

json NodesReply::Replacement::to_json() const {
  return {{"node", node},          {"state", name_of(state)}, {"reason", reason},
          {"mode", name_of(mode)}, {"attempts", attempts},    {"started_at", started_at},
          {"detail", detail}};
}

NodesReply::Replacement NodesReply::Replacement::from_json(const json& item) {
  return {get_string(item, "node", kMaxTextBytes),
          get_named<NodeRepairState>(item, "state", "replacement state"),
          get_string(item, "reason", kMaxTextBytes),
          get_named<RepairMode>(item, "mode", "replace mode"),
          get_i64(item, "attempts"),
          get_i64(item, "started_at"),
          get_string(item, "detail", kMaxTextBytes)};
}

json NodesReply::to_json() const {
  json out{{"replacements", to_json_array(replacements)}, {"heartbeats", heartbeats}};
  if (heartbeats_left_out > 0) out["heartbeats_left_out"] = heartbeats_left_out;
  return out;
}

NodesReply NodesReply::from_json(const json& result) {
  const auto& body = result_object(result);
  NodesReply reply;
  reply.replacements = get_items<Replacement>(body, "replacements");
  const auto& heard = required(body, "heartbeats");
  if (!heard.is_object()) bad("field 'heartbeats' must be an object, got " + shown(heard));
  if (heard.size() > kMaxNodesListed)
    bad("field 'heartbeats' has more than " + std::to_string(kMaxNodesListed) + " nodes");
  for (const auto& [node, age] : heard.items()) {
    if (!age.is_number())
      bad("field 'heartbeats': '" + node + "' must be a number of seconds, got " + shown(age));
    reply.heartbeats[node] = age.get<double>();
  }
  reply.heartbeats_left_out = get_u32(body, "heartbeats_left_out", 0);
  return reply;
}

// the guard rails

json GuardState::to_json() const {
  json out{{"mode", mode},
           {"paused", paused},
           {"tripped", tripped},
           {"marks", marks},
           {"max_marks", max_marks},
           {"replacements", replacements},
           {"max_replacements", max_replacements}};
  if (!paused_detail.empty()) out["paused_detail"] = paused_detail;
  if (!tripped_detail.empty()) out["tripped_detail"] = tripped_detail;
  return out;
}

GuardState GuardState::from_json(const json& item) {
  GuardState out;
  out.mode = get_string(item, "mode", 16);
  if (out.mode != "act" && out.mode != "observe")
    bad("field 'mode': unknown mode '" + out.mode + "' (known: act, observe)");
  out.paused = get_bool(item, "paused");
  out.tripped = get_bool(item, "tripped");
  out.marks = get_u32(item, "marks");
  out.max_marks = get_u32(item, "max_marks");
  out.replacements = get_u32(item, "replacements");
  out.max_replacements = get_u32(item, "max_replacements");
  if (item.contains("paused_detail"))
    out.paused_detail = get_string(item, "paused_detail", kMaxTextBytes);
  if (item.contains("tripped_detail"))
    out.tripped_detail = get_string(item, "tripped_detail", kMaxTextBytes);
  return out;
}

json PauseRequest::to_json() const {
  json body = json::object();
  if (!reason.empty()) body["reason"] = reason;
  return body;
}

PauseRequest PauseRequest::from_json(const json& body) {
  PauseRequest request;
  if (body.contains("reason")) request.reason = get_string(body, "reason", kMaxReasonBytes);
  return request;
}

json UnpauseRequest::to_json() const { return json::object(); }
UnpauseRequest UnpauseRequest::from_json(const json&) { return {}; }

json ResumeActionsRequest::to_json() const { return json::object(); }
ResumeActionsRequest ResumeActionsRequest::from_json(const json&) { return {}; }

json GuardReply::to_json() const {
  return {{"message", message}, {"controller", controller.to_json()}};
}

GuardReply GuardReply::from_json(const json& result) {
  const auto& body = result_object(result);
  return {get_string(body, "message", kMaxTextBytes),
          nested<GuardState>(required(body, "controller"), "controller")};
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

// continuous provisioning

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
