// The clients' side of the protocol: a reply's body from the controller (as
// ar::Client reads it once its line's MAC is checked), parsed by
// proto::parse_reply and then by every typed reply's from_json (each client
// picks one by the op it sent; all are tried here). A bad reply must be
// refused with a ProtocolError, nothing else; what a reply struct accepted
// must survive its own to_json and from_json unchanged.

#include "autoresume/protocol.hpp"
#include "fuzz.hpp"

namespace {

using namespace ar::proto;

// Parses `result` as a Reply; a parsed reply must round-trip.
template <typename Reply>
void parse_as(const json& result, const char* name) {
  Reply reply;
  try {
    reply = Reply::from_json(result);
  } catch (const ProtocolError&) {
    return;
  }
  const auto once = reply.to_json();
  const auto twice = Reply::from_json(once).to_json();
  if (once != twice)
    ar::fuzz::finding(std::string(name) + ": " + once.dump() + " came back as " + twice.dump());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Reply reply;
  try {
    reply = parse_reply(ar::fuzz::text(data, size));
  } catch (const ProtocolError&) {
    return 0;
  }
  if (!reply.ok) return 0;
  parse_as<HelloReply>(reply.result, "hello");
  parse_as<RegisterReply>(reply.result, "register");
  parse_as<StatusReply>(reply.result, "status");
  parse_as<EventsReply>(reply.result, "events");
  parse_as<VerdictReply>(reply.result, "verdict");
  parse_as<CancelReply>(reply.result, "cancel");
  parse_as<HeartbeatReply>(reply.result, "heartbeat");
  parse_as<ReplaceReply>(reply.result, "replace");
  parse_as<NodesReply>(reply.result, "nodes");
  parse_as<GuardReply>(reply.result, "pause");
  parse_as<TasksExitedReply>(reply.result, "tasks_exited");
  return 0;
}
