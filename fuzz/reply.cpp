// The clients' side of the protocol: a reply line from the controller, read
// by ar::call_controller (the plugin's, the CLI's and the node agent's one
// client) from a loopback peer that answers each request with the input,
// then parsed by every typed reply's from_json (each client picks one by
// the op it sent; all are tried here). A bad reply must be refused with a
// ClientError (call_controller) or a ProtocolError (from_json), nothing
// else; what a reply struct accepted must survive its own to_json and
// from_json unchanged.

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "autoresume/client.hpp"
#include "autoresume/protocol.hpp"
#include "fuzz.hpp"

namespace {

using namespace ar::proto;

// A controller on 127.0.0.1 that reads one request line per connection and
// answers it with `reply` and a newline.
class FakeController {
 public:
  FakeController() {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof addr;
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API
    auto* any = reinterpret_cast<sockaddr*>(&addr);
    if (listener_ < 0 || bind(listener_, any, sizeof addr) != 0 || listen(listener_, 16) != 0 ||
        getsockname(listener_, any, &length) != 0)
      ar::fuzz::finding("cannot listen on 127.0.0.1");
    port_ = ntohs(addr.sin_port);
    std::thread([this] { serve(); }).detach();
  }

  ar::Endpoint endpoint() const { return {"127.0.0.1", port_}; }

  void set_reply(std::string_view reply) {
    const std::lock_guard lock(mutex_);
    reply_ = std::string(reply) + "\n";
  }

 private:
  void serve() {
    for (;;) {
      const int fd = accept(listener_, nullptr, nullptr);
      if (fd < 0) continue;
      read_line(fd);
      std::string reply;
      {
        const std::lock_guard lock(mutex_);
        reply = reply_;
      }
      std::string_view rest = reply;
      while (!rest.empty()) {
        const auto n = send(fd, rest.data(), rest.size(), MSG_NOSIGNAL);
        if (n <= 0) break;
        rest.remove_prefix(static_cast<std::size_t>(n));
      }
      close(fd);
    }
  }

  static void read_line(int fd) {
    char buffer[4096];
    for (;;) {
      const auto n = recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0 || std::string_view(buffer, static_cast<std::size_t>(n)).find('\n') !=
                        std::string_view::npos)
        return;
    }
  }

  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::mutex mutex_;
  std::string reply_;
};

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
  static FakeController controller;
  controller.set_reply(ar::fuzz::text(data, size));
  ar::Reply reply;
  try {
    reply = ar::call_controller(controller.endpoint(), std::chrono::seconds(5), "status", "cred",
                                json::object());
  } catch (const ar::ClientError&) {
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
  return 0;
}
