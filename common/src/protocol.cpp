// The envelope of requests and replies (parse_request, ok_reply, error_reply,
// make_request, parse_reply), run ids, and `hello`; each op's fields are in
// protocol_*.cpp, their shared readers in protocol_detail.hpp.
#include "autoresume/protocol.hpp"

#include <algorithm>

#include "protocol_detail.hpp"

namespace ar::proto {

using namespace detail;  // NOLINT: the protocol's own helpers

namespace {

std::string text_of(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
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

}  // namespace ar::proto
