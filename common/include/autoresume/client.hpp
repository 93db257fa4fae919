#pragma once
// A blocking client of auto-resumed, in plain POSIX so that the SPANK plugin
// pulls in no event loop: connect, send one request line, read one reply
// line, all within one deadline.

#include <chrono>
#include <stdexcept>
#include <string>
#include <string_view>

#include "autoresume/endpoint.hpp"
#include "autoresume/protocol.hpp"

namespace ar {

// The controller could not be reached or did not answer in time. The message
// says why ("Connection refused", "timed out after 2000 ms") and names no
// endpoint: the caller says which one.
class ClientError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Reply {
  bool ok = false;
  proto::json result;   // when ok
  std::string code;     // when not ok: one of proto::code::*
  std::string message;  // when not ok
};

// Sends `op` with `fields` and credential `cred`; returns the controller's
// reply. Throws ClientError when there is no well-formed reply in time.
Reply call_controller(const Endpoint& endpoint, std::chrono::milliseconds timeout,
                      std::string_view op, std::string_view cred, proto::json fields);

}  // namespace ar
