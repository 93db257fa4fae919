#pragma once
// Protocol v2's sessions (docs/protocol.md, "Sessions"): one munge round
// trip per connection authenticates both ends and carries a fresh session
// key; then every request and reply carries an HMAC-SHA256 over the
// session, its sequence number and its exact body bytes. Both the
// controller and its clients build and check the lines here.

#include <sys/types.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "autoresume/munge_cred.hpp"
#include "autoresume/protocol.hpp"

namespace ar::session {

// The payloads' tag: a credential of another service or version carries
// another one.
inline constexpr std::string_view kTag = "slurm-auto-resume/2";

// What a line that is not protocol v2 gets told: the upgrade order.
std::string upgrade_rule();

// The keys of one connection, once its handshake is done.
struct Keys {
  std::string id;   // the session id, hex
  std::string key;  // the HMAC key, raw bytes
};

// Which way a message goes: part of what its MAC covers, so that a request
// cannot pass for a reply.
enum class Direction { request, reply };

// The client's first line: a fresh nonce in `body`, and a credential
// restricted to the controller's uid whose payload carries the body's hash.
struct ClientHello {
  std::string line;  // newline included
  std::string body;
};
ClientHello make_client_hello(Munge& munge, uid_t controller_uid);

// The controller's side of a handshake: who the client is (from its
// credential) and the reply line carrying the controller's own credential,
// restricted to the client's uid, with a fresh session key. Throws
// ProtocolError: bad_version for a line of another version (naming the
// upgrade rule), bad_request for a malformed one, unauthenticated for a
// credential munge refuses or whose payload does not match the body.
struct ServerHello {
  uid_t uid = 0;
  gid_t gid = 0;
  Keys keys;
  std::string line;  // newline included
};
ServerHello answer_client_hello(std::string_view line, Munge& munge);

// The client's check of the controller's reply to `hello`: its credential
// must come from root or `controller_uid` and answer this very hello.
// Returns the session's keys; throws ClientError-like SessionError saying
// why the controller is not believed or what it refused.
class SessionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
Keys accept_server_hello(std::string_view line, const ClientHello& hello, Munge& munge,
                         uid_t controller_uid);

// A message line: {"v":2,"seq":N,"body":BODY,"mac":HEX}, newline included.
std::string seal(const Keys& keys, Direction direction, std::uint64_t seq, std::string_view body);

// A message line's sequence number and body, once its MAC is checked.
// Throws ProtocolError: bad_version, bad_request (malformed), or
// unauthenticated (the MAC does not match).
struct Opened {
  std::uint64_t seq = 0;
  std::string body;
};
Opened open(std::string_view line, const Keys& keys, Direction direction);

// An unsigned error line (before a session exists, or when a line cannot be
// trusted), newline included.
std::string error_line(std::string_view code, std::string_view message);

// Hex of SHA-256 and of HMAC-SHA256, and fresh random bytes as hex.
std::string sha256_hex(std::string_view data);
std::string hmac_hex(std::string_view key, std::string_view data);
std::string random_hex(std::size_t bytes);

}  // namespace ar::session
