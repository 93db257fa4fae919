#pragma once
// The TCP front of the controller: one coroutine per connection reads
// newline-delimited lines (at most proto::kMaxLineBytes each) and answers
// each in order, so only one write is in flight per connection. The first
// line opens a protocol v2 session (one munge round trip: session.hpp);
// each later one is a request signed with the session's key, answered by a
// reply signed with it. Handshakes and requests are handled on a worker
// pool; a request the `Quick` predicate says waits on nothing (a node
// agent's heartbeat) is answered on the io thread, which saves the two
// hand-offs between threads that cost most of its time (bench/scale.sh).
//
// Connections are admitted within ConnectionLimits (docs/protocol.md,
// "Limits"): one waits at most auth_timeout for its session, at most
// max_unauthenticated wait at once (a new one closes the oldest of them
// that has sent nothing whole, from the address with the most), a user other than root and
// SlurmUser holds at most max_user_connections, and privileged_connections stay for root and
// SlurmUser. Refusals are logged at most once per kRefusalLogInterval.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "autoresume/endpoint.hpp"
#include "autoresume/munge_cred.hpp"
#include "autoresume/protocol.hpp"
#include "autoresume/session.hpp"
#include "server/limits.hpp"
#include "server/net.hpp"

namespace ar {

class Server {
 public:
  static constexpr std::chrono::seconds kRefusalLogInterval{10};
  // The reply body to an authenticated request from `peer`, the numeric
  // address the connection came from.
  using Handler =
      std::function<std::string(const proto::Request&, uid_t caller, const std::string& peer)>;
  // Whether a uid is root or SlurmUser (may ask slurmctld: called on a worker).
  using Privileged = std::function<bool(uid_t)>;
  // Told how each session's handshake ended: "opened", "refused" (a limit:
  // `busy`) or "failed" (a hello that does not authenticate). Called on the
  // io thread.
  using SessionOutcome = std::function<void(std::string_view outcome)>;
  // Whether a verified request of `caller` from `peer` is answered without
  // waiting on anything (munge, slurmctld, a name lookup): then on the io
  // thread. Called on the io thread.
  using Quick = std::function<bool(const proto::Request&, uid_t caller, const std::string& peer)>;

  // Binds and listens at once (throws on failure, e.g. the port is taken).
  // Handshakes are decoded and requests answered on `workers` (munge and
  // slurmctld may be slow), those `quick` names on the io thread.
  Server(net::asio::io_context& io, net::asio::thread_pool& workers, const Endpoint& listen,
         const ConnectionLimits& limits, Munge& munge, Handler handle, Privileged privileged,
         SessionOutcome sessions = {}, Quick quick = {});

  // The bound endpoint (the real port when listening on port 0).
  net::tcp::endpoint local_endpoint() const { return acceptor_.local_endpoint(); }

  void start();

 private:
  struct Connection;
  using ConnectionPtr = std::shared_ptr<Connection>;
  // A hello answered on a worker: the session and its reply, or the error
  // line to send.
  struct Handshake {
    std::string error_line;
    session::ServerHello hello;
    bool privileged = false;
  };
  // A request answered on a worker: the signed reply, or an unsigned error
  // line and the connection closed.
  struct Served {
    std::string line;
    std::uint64_t seq = 0;
    bool close = false;
  };

  net::awaitable<void> accept_loop();
  // Takes an accepted connection in, or closes it (returns false).
  bool admit(net::tcp::socket& socket);
  net::awaitable<void> session(ConnectionPtr connection);
  // The reply to one line of `connection`; sets `close_after` when the
  // connection must go once it is sent.
  net::awaitable<std::string> answer_line(Connection& connection, std::string line,
                                          bool& close_after);
  // Moves `connection` from waiting to authenticated as `uid`; empty when
  // it may stay, else why not.
  std::string promote(Connection& connection, uid_t uid, bool privileged);
  // The connection no longer counts: out of every tally, its socket closed.
  void release(Connection& connection);
  // Closes a connection waiting to authenticate that has sent nothing whole
  // yet: the oldest of those of the address that holds the most of them
  // (so that a flood from one address does not push out the others);
  // false when there is none.
  bool evict_oldest();
  void refused(const std::string& why);
  void arm_refusal_flush();

  // A line of an open session: its request (verified, in sequence,
  // parsed), or, without one, the answer that refuses it.
  struct Received {
    std::optional<proto::Request> request;
    std::uint64_t seq = 0;
    Served refusal;
  };
  Handshake handshake(std::string line);
  Received receive(const std::string& line, const session::Keys& keys,
                   std::uint64_t last_seq) const;
  // The signed reply to a received request.
  Served serve(const proto::Request& request, std::uint64_t seq, const session::Keys& keys,
               uid_t caller, const std::string& peer);
  net::awaitable<Handshake> handshake_on_worker(std::string line);
  net::awaitable<Served> serve_on_worker(proto::Request request, std::uint64_t seq,
                                         session::Keys keys, uid_t caller, std::string peer);

  net::tcp::acceptor acceptor_;
  net::asio::thread_pool& workers_;
  ConnectionLimits limits_;
  Munge& munge_;
  Handler handle_;
  Privileged privileged_;
  SessionOutcome sessions_;
  Quick quick_;
  // Touched on the io thread only.
  std::size_t open_ = 0;   // every connection admitted and not released
  std::size_t users_ = 0;  // authenticated, not root nor SlurmUser
  std::map<uid_t, std::size_t> per_user_;
  std::list<ConnectionPtr> waiting_;  // not authenticated yet, oldest first
  RefusalLog refusals_{kRefusalLogInterval};
  net::asio::steady_timer refusal_flush_;
  bool refusal_flush_armed_ = false;
};

}  // namespace ar
