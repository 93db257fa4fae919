#include "server/server.hpp"

#include <fmt/core.h>

#include "autoresume/munge_cred.hpp"
#include "autoresume/protocol.hpp"
#include "log.hpp"

namespace ar {

namespace asio = net::asio;
using net::tcp;
namespace code = proto::code;

namespace {

tcp::endpoint resolve(asio::io_context& io, const Endpoint& listen) {
  tcp::resolver resolver(io);
  const auto results = resolver.resolve(listen.host, std::to_string(listen.port),
                                        tcp::resolver::passive | tcp::resolver::numeric_service);
  return results.begin()->endpoint();
}

}  // namespace

Server::Server(asio::io_context& io, asio::thread_pool& workers, const Endpoint& listen,
               Service& service, std::string munge_socket)
    : acceptor_(io, resolve(io, listen), /*reuse_address=*/true),
      workers_(workers),
      service_(service),
      munge_socket_(std::move(munge_socket)) {}

void Server::start() { asio::co_spawn(acceptor_.get_executor(), accept_loop(), asio::detached); }

asio::awaitable<void> Server::accept_loop() {
  for (;;) {
    boost::system::error_code error;
    auto socket = co_await acceptor_.async_accept(asio::redirect_error(net::use_awaitable, error));
    if (error == asio::error::operation_aborted) co_return;
    if (error) {
      // E.g. out of file descriptors: retrying at once would spin.
      log::warn("accept failed: {}", error.message());
      asio::steady_timer pause(acceptor_.get_executor(), std::chrono::milliseconds(100));
      co_await pause.async_wait(net::use_awaitable);
      continue;
    }
    if (sessions_ >= kMaxSessions) {
      log::warn("{} connections open: refusing one more", sessions_);
      continue;  // the socket closes as it goes out of scope
    }
    asio::co_spawn(acceptor_.get_executor(), session(std::move(socket)), asio::detached);
  }
}

std::string Server::answer(std::string_view line) {
  proto::Request request;
  try {
    request = proto::parse_request(line);
  } catch (const proto::ProtocolError& e) {
    return proto::error_reply(nullptr, e.code(), e.what());
  }
  uid_t caller = 0;
  try {
    const auto identity = munge_decode_credential(request.cred, munge_socket_);
    if (identity.payload != credential_payload(request.op))
      return proto::error_reply(request.id, code::kUnauthenticated,
                                "the credential was not made for op '" + request.op + "'");
    caller = identity.uid;
  } catch (const MungeError& e) {
    return proto::error_reply(request.id, code::kUnauthenticated, e.what());
  }
  try {
    return service_.handle(request, caller);
  } catch (const std::exception& e) {
    log::error("op '{}' from uid {} failed: {}", request.op, caller, e.what());
    return proto::error_reply(request.id, code::kInternal, e.what());
  }
}

// A coroutine function rather than a capturing lambda: a lambda's captures
// live in the lambda object, which is gone before the coroutine runs.
asio::awaitable<std::string> Server::answer_on_worker(std::string line) { co_return answer(line); }

asio::awaitable<void> Server::session(tcp::socket plain_socket) {
  ++sessions_;
  // Shared with the idle timer's handler, which may already be queued when
  // this coroutine ends: it holds the socket alive, and `done` tells it the
  // session is over.
  struct Shared {
    explicit Shared(tcp::socket s) : socket(std::move(s)) {}
    tcp::socket socket;
    bool done = false;
  };
  auto shared = std::make_shared<Shared>(std::move(plain_socket));
  auto& socket = shared->socket;
  asio::steady_timer idle(socket.get_executor());
  // Closes the socket when no request came for kIdleTimeout.
  auto arm = [&] {
    idle.expires_after(kIdleTimeout);
    idle.async_wait([shared](const boost::system::error_code& ec) {
      if (!ec && !shared->done) {
        boost::system::error_code ignored;
        shared->socket.close(ignored);
      }
    });
  };
  std::string buffer;
  for (;;) {
    arm();
    boost::system::error_code error;
    const auto n = co_await asio::async_read_until(
        socket, asio::dynamic_buffer(buffer, proto::kMaxMessageBytes + 1), '\n',
        asio::redirect_error(net::use_awaitable, error));
    std::string reply;
    bool close_after = false;
    if (error == asio::error::not_found) {
      reply = proto::error_reply(
          nullptr, code::kTooLarge,
          fmt::format("message exceeds the limit of {} bytes", proto::kMaxMessageBytes));
      close_after = true;  // the rest of the oversized line cannot be resynchronized
    } else if (error) {
      break;  // closed by the peer or by the idle timer
    } else {
      std::string line(buffer.data(), n - 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      buffer.erase(0, n);
      reply =
          co_await asio::co_spawn(workers_, answer_on_worker(std::move(line)), net::use_awaitable);
    }
    boost::system::error_code write_error;
    co_await asio::async_write(socket, asio::buffer(reply),
                               asio::redirect_error(net::use_awaitable, write_error));
    if (write_error || close_after) break;
  }
  shared->done = true;
  idle.cancel();
  boost::system::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  socket.close(ignored);
  --sessions_;
}

}  // namespace ar
