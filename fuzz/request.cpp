// The controller's side of the protocol: a request's body as a client sends
// it (inside a signed line of protocol 2), parsed by proto::parse_request and then by every typed
// request's from_json (the server picks one by the op; all are tried here). Bad input must be
// refused with a ProtocolError, nothing else; what a request struct accepted must survive its own
// to_json and from_json unchanged; the replies, the error replies naming what is wrong included,
// must fit in a line a client reads (kMaxMessageBytes).

#include <typeinfo>

#include "autoresume/protocol.hpp"
#include "fuzz.hpp"

namespace {

using namespace ar::proto;

// A reply line must fit the line limit that clients read with.
void check_reply(const std::string& line) {
  if (line.size() > kMaxMessageBytes + 1)
    ar::fuzz::finding("a reply of " + std::to_string(line.size()) +
                      " bytes: " + line.substr(0, 200) + "...");
}

// Parses `body` as a Request; a parsed request must round-trip.
template <typename Request>
void parse_as(const json& id, const json& body) {
  Request request;
  try {
    request = Request::from_json(body);
  } catch (const ProtocolError& e) {
    if (e.code() != code::kBadRequest)
      ar::fuzz::finding(std::string(Request::kOp) + ": code " + e.code() + " for a bad field");
    check_reply(error_reply(id, e.code(), e.what()));
    return;
  }
  const auto once = request.to_json();
  const auto twice = Request::from_json(once).to_json();
  if (once != twice)
    ar::fuzz::finding(std::string(Request::kOp) + ": " + once.dump() + " came back as " +
                      twice.dump());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Request request;
  try {
    request = parse_request(ar::fuzz::text(data, size));
  } catch (const ProtocolError& e) {
    check_reply(error_reply(nullptr, e.code(), e.what()));
    return 0;
  }
  parse_as<HelloRequest>(request.id, request.body);
  parse_as<StepRegistration>(request.id, request.body);
  parse_as<StatusRequest>(request.id, request.body);
  parse_as<EventsRequest>(request.id, request.body);
  parse_as<VerdictRequest>(request.id, request.body);
  parse_as<CancelRequest>(request.id, request.body);
  parse_as<HeartbeatRequest>(request.id, request.body);
  parse_as<ReplaceRequest>(request.id, request.body);
  parse_as<NodesRequest>(request.id, request.body);
  parse_as<PauseRequest>(request.id, request.body);
  parse_as<UnpauseRequest>(request.id, request.body);
  parse_as<ResumeActionsRequest>(request.id, request.body);
  parse_as<TasksExitedRequest>(request.id, request.body);
  check_reply(ok_reply(request.id, json::object()));
  check_reply(error_reply(request.id, code::kBadRequest, "unknown op '" + request.op + "'"));
  (void)make_request(request.id, request.op, std::move(request.body));
  return 0;
}
