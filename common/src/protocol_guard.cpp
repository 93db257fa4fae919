// The guard rails' ops: pause, unpause, resume_actions, and the controller's
// guard state that they and status answer with.
#include <string>

#include "autoresume/protocol.hpp"
#include "protocol_detail.hpp"

namespace ar::proto {

using namespace detail;  // NOLINT: the protocol's own helpers

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

}  // namespace ar::proto
