#pragma once
// The one way clients (the srun plugin, the CLI, the node agent) talk to
// auto-resumed: a blocking client in plain POSIX, so that the SPANK plugin
// pulls in no event loop. A Client opens a protocol v2 session on its first
// request (one munge round trip that also authenticates the controller,
// docs/protocol.md) and keeps it for the next ones; each request and reply
// is signed with the session's key. Each call is bounded by one deadline.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "autoresume/connect.hpp"
#include "autoresume/endpoint.hpp"
#include "autoresume/munge_cred.hpp"
#include "autoresume/protocol.hpp"
#include "autoresume/session.hpp"

namespace ar {

// No trusted, well-formed reply in time: the controller could not be
// reached, did not answer in time, or whoever answered is not the
// controller. The message says why ("Connection refused", "timed out after
// 2000 ms", "... comes from uid 1000 ...") and names no endpoint: the caller
// says which one.
class ClientError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The controller answered with an error: its code (one of proto::code::*)
// and message; what() is "CODE: MESSAGE".
class Refused : public ClientError {
 public:
  Refused(std::string code, std::string message)
      : ClientError(code + ": " + message), code_(std::move(code)), message_(std::move(message)) {}
  const std::string& code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  std::string code_;
  std::string message_;
};

struct ClientOptions {
  Endpoint endpoint{"127.0.0.1", kDefaultPort};
  // The deadline of each call: connecting, the session's handshake, the
  // request and its reply.
  std::chrono::milliseconds timeout{2000};
  // munged's socket; empty: munge's default.
  std::string munge_socket;
  // The controller's uid, when it does not run as root: its credential
  // must come from root or from this uid.
  uid_t controller_uid = 0;
  // The numeric address connections come from (the node agent's heartbeats:
  // the controller checks it); empty: the system's choice.
  std::string source;
};

class Client {
 public:
  explicit Client(ClientOptions options);
  // With another munge (tests).
  Client(ClientOptions options, std::shared_ptr<Munge> munge);

  // Sends `request`; the controller's typed reply. Throws Refused (an error
  // reply), ClientError (no trusted reply in time), proto::ProtocolError (a
  // reply that does not parse as Request::Reply) or MungeError (no
  // credential).
  template <typename Request>
  typename Request::Reply send(const Request& request) {
    return Request::Reply::from_json(call(Request::kOp, request.to_json()));
  }

  // The result of `op` with `fields`, as send.
  proto::json call(std::string_view op, proto::json fields);

  // The deadline of the calls from now on (ClientOptions::timeout); the
  // session stays.
  void set_timeout(std::chrono::milliseconds timeout) { options_.timeout = timeout; }

 private:
  // Connects and opens a session by `deadline`.
  void open(net::Clock::time_point deadline);
  // One request and its reply on the open session.
  proto::json exchange(std::string_view op, proto::json fields, net::Clock::time_point deadline);
  std::string receive_line(net::Clock::time_point deadline);

  ClientOptions options_;
  std::shared_ptr<Munge> munge_;
  net::Fd socket_;
  session::Keys keys_;
  std::uint64_t seq_ = 0;
  std::string received_;  // bytes read past the last line
};

}  // namespace ar
