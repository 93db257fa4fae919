#pragma once
// The TCP front of the controller: one coroutine per connection reads
// newline-delimited requests (at most proto::kMaxMessageBytes each),
// authenticates each by its munge credential and answers it in order, so
// only one write is in flight per connection. A connection idle for
// kIdleTimeout is closed. Requests are answered on a worker pool.

#include <chrono>
#include <string>

#include "autoresume/endpoint.hpp"
#include "server/net.hpp"
#include "server/service.hpp"

namespace ar {

class Server {
 public:
  static constexpr std::chrono::seconds kIdleTimeout{60};
  // Connections beyond this are closed at once, so that no one client can
  // use up the daemon's file descriptors.
  static constexpr std::size_t kMaxSessions = 1024;

  // Binds and listens at once (throws on failure, e.g. the port is taken).
  // Requests are decoded and answered on `workers` (munge and slurmctld may
  // be slow), never on the io thread.
  Server(net::asio::io_context& io, net::asio::thread_pool& workers, const Endpoint& listen,
         Service& service, std::string munge_socket);

  // The bound endpoint (the real port when listening on port 0).
  net::tcp::endpoint local_endpoint() const { return acceptor_.local_endpoint(); }

  void start();

 private:
  net::awaitable<void> accept_loop();
  net::awaitable<void> session(net::tcp::socket socket);
  std::string answer(std::string_view line);
  net::awaitable<std::string> answer_on_worker(std::string line);

  net::tcp::acceptor acceptor_;
  net::asio::thread_pool& workers_;
  Service& service_;
  std::string munge_socket_;
  std::size_t sessions_ = 0;
};

}  // namespace ar
