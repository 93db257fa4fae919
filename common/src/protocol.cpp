#include "autoresume/protocol.hpp"

namespace ar::proto {

namespace {

[[noreturn]] void bad(const std::string& message) {
  throw ProtocolError(code::kBadRequest, message);
}

std::string line_of(json reply) {
  return reply.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace

Request parse_request(std::string_view line) {
  if (line.size() > kMaxMessageBytes)
    throw ProtocolError(code::kTooLarge, "message of " + std::to_string(line.size()) +
                                             " bytes exceeds the limit of " +
                                             std::to_string(kMaxMessageBytes));
  json body = json::parse(line, nullptr, /*allow_exceptions=*/false);
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
  const auto v = body.find("v");
  if (v == body.end()) bad("missing field 'v' (protocol version)");
  if (!v->is_number_integer()) bad("field 'v' must be an integer");
  if (v->get<long long>() != kVersion)
    throw ProtocolError(code::kVersion, "protocol version " + v->dump() +
                                            " is not supported (this server speaks " +
                                            std::to_string(kVersion) + ")");
  request.op = get_string(body, "op", 64);
  request.cred = get_string(body, "cred", 16 * 1024);
  request.body = std::move(body);
  return request;
}

std::string ok_reply(const json& id, json result) {
  json reply = {{"v", kVersion}, {"ok", true}, {"result", std::move(result)}};
  if (!id.is_null()) reply["id"] = id;
  return line_of(std::move(reply));
}

std::string error_reply(const json& id, std::string_view code, std::string_view message) {
  json reply = {{"v", kVersion},
                {"ok", false},
                {"error", {{"code", std::string(code)}, {"message", std::string(message)}}}};
  if (!id.is_null()) reply["id"] = id;
  return line_of(std::move(reply));
}

std::string make_request(const json& id, std::string_view op, std::string_view cred, json fields) {
  json request = fields.is_object() ? std::move(fields) : json::object();
  request["v"] = kVersion;
  request["id"] = id;
  request["op"] = std::string(op);
  request["cred"] = std::string(cred);
  return line_of(std::move(request));
}

std::string get_string(const json& body, const char* field, std::size_t max_len) {
  const auto it = body.find(field);
  if (it == body.end()) bad(std::string("missing field '") + field + "'");
  if (!it->is_string()) bad(std::string("field '") + field + "' must be a string");
  auto value = it->get<std::string>();
  if (value.size() > max_len)
    bad(std::string("field '") + field + "' is longer than " + std::to_string(max_len) + " bytes");
  return value;
}

std::uint32_t get_u32(const json& body, const char* field) {
  const auto it = body.find(field);
  if (it == body.end()) bad(std::string("missing field '") + field + "'");
  const bool fits = it->is_number_unsigned()
                        ? it->get<std::uint64_t>() <= 0xffffffffULL
                        : it->is_number_integer() && it->get<std::int64_t>() >= 0 &&
                              it->get<std::int64_t>() <= 0xffffffffLL;
  if (!fits)
    bad(std::string("field '") + field + "' must be an unsigned 32-bit integer, got " + it->dump());
  return static_cast<std::uint32_t>(it->get<std::uint64_t>());
}

bool get_bool(const json& body, const char* field, bool fallback) {
  const auto it = body.find(field);
  if (it == body.end()) return fallback;
  if (!it->is_boolean())
    bad(std::string("field '") + field + "' must be true or false, got " + it->dump());
  return it->get<bool>();
}

std::vector<std::string> get_string_list(const json& body, const char* field,
                                         std::size_t max_items) {
  const auto it = body.find(field);
  if (it == body.end()) bad(std::string("missing field '") + field + "'");
  if (!it->is_array()) bad(std::string("field '") + field + "' must be an array of strings");
  if (it->size() > max_items)
    bad(std::string("field '") + field + "' has more than " + std::to_string(max_items) + " items");
  std::vector<std::string> out;
  for (const auto& item : *it) {
    if (!item.is_string()) bad(std::string("field '") + field + "' must be an array of strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

json StepRegistration::to_json() const {
  return {{"job_id", job_id}, {"step_id", step_id}, {"run_id", run_id},    {"attempt", attempt},
          {"argv", argv},     {"cwd", cwd},         {"nodelist", nodelist}};
}

StepRegistration StepRegistration::from_json(const json& body) {
  StepRegistration step;
  step.job_id = get_u32(body, "job_id");
  step.step_id = get_u32(body, "step_id");
  step.run_id = get_string(body, "run_id", 128);
  if (step.run_id.empty()) bad("field 'run_id' must not be empty");
  step.attempt = get_u32(body, "attempt");
  step.argv = get_string_list(body, "argv");
  if (step.argv.empty()) bad("field 'argv' must not be empty");
  step.cwd = get_string(body, "cwd");
  step.nodelist = get_string(body, "nodelist");
  return step;
}

}  // namespace ar::proto
