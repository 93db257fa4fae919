#include "server/server.hpp"

#include <fmt/core.h>

#include <algorithm>

#include "log.hpp"

namespace ar {

namespace asio = net::asio;
using net::tcp;
namespace code = proto::code;

struct Server::Connection {
  enum class State { waiting, authenticated, released };
  explicit Connection(tcp::socket s) : socket(std::move(s)), deadline(socket.get_executor()) {}

  tcp::socket socket;
  // Closes the socket: auth_timeout after the accept, then idle_timeout
  // after each request.
  asio::steady_timer deadline;
  State state = State::waiting;
  // Waiting for its first whole line: the connection may be closed for a
  // newer one.
  bool evictable = true;
  uid_t uid = 0;
  bool privileged = false;
  net::asio::ip::address peer;
  std::string peer_text;  // numeric, an IPv4-mapped IPv6 address as IPv4
  std::list<ConnectionPtr>::iterator in_waiting;
  session::Keys keys;          // once authenticated
  std::uint64_t last_seq = 0;  // of the last request answered
};

Server::Server(asio::io_context& io, asio::thread_pool& workers, const Endpoint& listen,
               const ConnectionLimits& limits, Munge& munge, Handler handle, Privileged privileged,
               SessionOutcome sessions, Quick quick)
    : acceptor_(io, net::resolve_listen(io, listen), /*reuse_address=*/true),
      workers_(workers),
      limits_(limits),
      munge_(munge),
      handle_(std::move(handle)),
      privileged_(std::move(privileged)),
      sessions_(std::move(sessions)),
      quick_(std::move(quick)),
      refusal_flush_(io) {}

void Server::start() { asio::co_spawn(acceptor_.get_executor(), accept_loop(), asio::detached); }

asio::awaitable<void> Server::accept_loop() {
  for (;;) {
    boost::system::error_code error;
    auto socket = co_await acceptor_.async_accept(asio::redirect_error(net::use_awaitable, error));
    if (error == asio::error::operation_aborted) co_return;
    if (error) {
      // E.g. out of file descriptors: retrying at once would spin.
      refused("accept failed: " + error.message());
      asio::steady_timer pause(acceptor_.get_executor(), std::chrono::milliseconds(100));
      co_await pause.async_wait(net::use_awaitable);
      continue;
    }
    if (!admit(socket)) continue;  // the socket closes as it goes out of scope
    boost::system::error_code ignored;
    const auto peer = socket.remote_endpoint(ignored).address();
    auto connection = std::make_shared<Connection>(std::move(socket));
    connection->peer = peer;
    connection->peer_text =
        peer.is_v6() && peer.to_v6().is_v4_mapped()
            ? asio::ip::make_address_v4(asio::ip::v4_mapped, peer.to_v6()).to_string()
            : peer.to_string();
    ++open_;
    connection->in_waiting = waiting_.insert(waiting_.end(), connection);
    asio::co_spawn(acceptor_.get_executor(), session(std::move(connection)), asio::detached);
  }
}

bool Server::admit(tcp::socket& socket) {
  boost::system::error_code ignored;
  const auto peer = socket.remote_endpoint(ignored);
  const auto from = fmt::format("from {}:{}", peer.address().to_string(ignored), peer.port());
  if (waiting_.size() >= limits_.max_unauthenticated) {
    const auto why = fmt::format("{} connections wait to authenticate (max_unauthenticated={}): ",
                                 waiting_.size(), limits_.max_unauthenticated);
    if (!evict_oldest()) {
      refused(why + "refused a new one " + from);
      return false;
    }
    refused(why +
            "closed the oldest one that sent nothing, of the address with the most, for one " +
            from);
  }
  if (open_ >= limits_.max_connections && !evict_oldest()) {
    refused(
        fmt::format("{} connections open, all the descriptors left for them (RLIMIT_NOFILE "
                    "less reserved_fds): refused one {}",
                    open_, from));
    return false;
  }
  return true;
}

bool Server::evict_oldest() {
  std::map<net::asio::ip::address, std::size_t> waiting_from;
  std::size_t most = 0;
  for (const auto& candidate : waiting_)
    if (candidate->evictable) most = std::max(most, ++waiting_from[candidate->peer]);
  for (const auto& candidate : waiting_) {
    if (!candidate->evictable || waiting_from[candidate->peer] != most) continue;
    const auto victim = candidate;  // release() erases it from waiting_
    release(*victim);
    return true;
  }
  return false;
}

std::string Server::promote(Connection& connection, uid_t uid, bool privileged) {
  if (!privileged) {
    const auto held = per_user_.contains(uid) ? per_user_[uid] : 0;
    if (held >= limits_.max_user_connections)
      return fmt::format("uid {} holds {} connections already (max_user_connections={})", uid, held,
                         limits_.max_user_connections);
    if (users_ >= limits_.users_share())
      return fmt::format(
          "users hold {} connections already: the rest is kept for root and SlurmUser (the "
          "descriptors left less privileged_connections and max_unauthenticated)",
          users_);
    ++per_user_[uid];
    ++users_;
  }
  waiting_.erase(connection.in_waiting);
  connection.state = Connection::State::authenticated;
  connection.uid = uid;
  connection.privileged = privileged;
  return {};
}

void Server::release(Connection& connection) {
  using State = Connection::State;
  if (connection.state == State::released) return;
  if (connection.state == State::waiting) {
    waiting_.erase(connection.in_waiting);
  } else if (!connection.privileged) {
    --users_;
    if (--per_user_[connection.uid] == 0) per_user_.erase(connection.uid);
  }
  connection.state = State::released;
  --open_;
  connection.deadline.cancel();
  boost::system::error_code ignored;
  connection.socket.shutdown(tcp::socket::shutdown_both, ignored);
  connection.socket.close(ignored);
}

void Server::refused(const std::string& why) {
  if (auto line = refusals_.refused(why, RefusalLog::Clock::now()))
    log::warn("{}", *line);
  else
    arm_refusal_flush();
}

void Server::arm_refusal_flush() {
  const auto due = refusals_.due();
  if (refusal_flush_armed_ || !due) return;
  refusal_flush_armed_ = true;
  refusal_flush_.expires_at(*due);
  refusal_flush_.async_wait([this](const boost::system::error_code& ec) {
    refusal_flush_armed_ = false;
    if (ec) return;
    if (auto line = refusals_.flush(RefusalLog::Clock::now())) log::warn("{}", *line);
    arm_refusal_flush();
  });
}

Server::Handshake Server::handshake(std::string line) {
  Handshake out;
  try {
    out.hello = session::answer_client_hello(line, munge_);
  } catch (const proto::ProtocolError& e) {
    out.error_line = session::error_line(e.code(), e.what());
    return out;
  }
  out.privileged = privileged_(out.hello.uid);
  return out;
}

Server::Received Server::receive(const std::string& line, const session::Keys& keys,
                                 std::uint64_t last_seq) const {
  Received out;
  session::Opened opened;
  try {
    opened = session::open(line, keys, session::Direction::request);
  } catch (const proto::ProtocolError& e) {
    out.refusal = {session::error_line(e.code(), e.what()), 0, true};
    return out;
  }
  if (opened.seq <= last_seq) {
    out.refusal = {session::error_line(code::kUnauthenticated,
                                       fmt::format("sequence number {} is not above {}: a "
                                                   "replayed or reordered request",
                                                   opened.seq, last_seq)),
                   0, true};
    return out;
  }
  out.seq = opened.seq;
  try {
    out.request = proto::parse_request(opened.body);
  } catch (const proto::ProtocolError& e) {
    out.refusal = {session::seal(keys, session::Direction::reply, opened.seq,
                                 proto::error_reply(nullptr, e.code(), e.what())),
                   opened.seq, false};
  } catch (const std::exception& e) {
    out.refusal = {session::seal(keys, session::Direction::reply, opened.seq,
                                 proto::error_reply(nullptr, code::kInternal, e.what())),
                   opened.seq, false};
  }
  return out;
}

Server::Served Server::serve(const proto::Request& request, std::uint64_t seq,
                             const session::Keys& keys, uid_t caller, const std::string& peer) {
  std::string body;
  try {
    body = handle_(request, caller, peer);
  } catch (const proto::ProtocolError& e) {
    body = proto::error_reply(request.id, e.code(), e.what());
  } catch (const std::exception& e) {
    log::error("op '{}' from uid {} failed: {}", request.op, caller, e.what());
    body = proto::error_reply(request.id, code::kInternal, e.what());
  }
  return {session::seal(keys, session::Direction::reply, seq, body), seq, false};
}

// Coroutine functions rather than capturing lambdas: a lambda's captures
// live in the lambda object, which is gone before the coroutine runs.
asio::awaitable<Server::Handshake> Server::handshake_on_worker(std::string line) {
  co_return handshake(std::move(line));
}
asio::awaitable<Server::Served> Server::serve_on_worker(proto::Request request, std::uint64_t seq,
                                                        session::Keys keys, uid_t caller,
                                                        std::string peer) {
  co_return serve(request, seq, keys, caller, peer);
}

asio::awaitable<std::string> Server::answer_line(Connection& connection, std::string line,
                                                 bool& close_after) {
  if (connection.state == Connection::State::authenticated) {
    // Verified and parsed here (a keyed hash and a small JSON object),
    // answered here if it waits on nothing, else on a worker.
    auto received = receive(line, connection.keys, connection.last_seq);
    Served served;
    if (!received.request)
      served = std::move(received.refusal);
    else if (quick_ && quick_(*received.request, connection.uid, connection.peer_text))
      served = serve(*received.request, received.seq, connection.keys, connection.uid,
                     connection.peer_text);
    else
      served = co_await asio::co_spawn(
          workers_,
          serve_on_worker(std::move(*received.request), received.seq, connection.keys,
                          connection.uid, connection.peer_text),
          net::use_awaitable);
    if (served.close) {
      close_after = true;
    } else {
      connection.last_seq = served.seq;
    }
    co_return std::move(served.line);
  }
  // The first line: the session's hello. A failed one closes the connection.
  connection.evictable = false;
  close_after = true;
  auto shake =
      co_await asio::co_spawn(workers_, handshake_on_worker(std::move(line)), net::use_awaitable);
  if (!connection.socket.is_open()) co_return std::string();  // its deadline passed meanwhile
  auto outcome = [this](std::string_view what) {
    if (sessions_) sessions_(what);
  };
  if (!shake.error_line.empty()) {
    outcome("failed");
    co_return shake.error_line;
  }
  if (const auto why = promote(connection, shake.hello.uid, shake.privileged); !why.empty()) {
    refused(why);
    outcome("refused");
    co_return session::error_line(code::kBusy, why);
  }
  outcome("opened");
  connection.keys = std::move(shake.hello.keys);
  close_after = false;
  co_return std::move(shake.hello.line);
}

asio::awaitable<void> Server::session(ConnectionPtr connection) {
  auto& socket = connection->socket;
  const std::weak_ptr<Connection> weak = connection;
  auto arm = [&](std::chrono::milliseconds timeout) {
    connection->deadline.expires_after(timeout);
    connection->deadline.async_wait([weak](const boost::system::error_code& ec) {
      const auto expired = weak.lock();
      if (ec || !expired) return;
      boost::system::error_code ignored;
      expired->socket.close(ignored);
    });
  };
  arm(limits_.auth_timeout);
  std::string buffer;
  for (;;) {
    if (connection->state == Connection::State::authenticated) arm(limits_.idle_timeout);
    boost::system::error_code error;
    const auto n = co_await asio::async_read_until(
        socket, asio::dynamic_buffer(buffer, proto::kMaxLineBytes + 1), '\n',
        asio::redirect_error(net::use_awaitable, error));
    std::string reply;
    bool close_after = false;
    if (error == asio::error::not_found) {
      reply = session::error_line(
          code::kTooLarge, fmt::format("line exceeds the limit of {} bytes", proto::kMaxLineBytes));
      close_after = true;  // the rest of the oversized line cannot be resynchronized
    } else if (error) {
      break;  // closed by the peer, by the deadline or for a newer connection
    } else {
      std::string line(buffer.data(), n - 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      buffer.erase(0, n);
      reply = co_await answer_line(*connection, std::move(line), close_after);
    }
    boost::system::error_code write_error;
    co_await asio::async_write(socket, asio::buffer(reply),
                               asio::redirect_error(net::use_awaitable, write_error));
    if (write_error || close_after) break;
  }
  release(*connection);
}

}  // namespace ar
