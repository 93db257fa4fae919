#pragma once
// The controller's Prometheus endpoint (metrics_listen): HTTP/1.1 served
// with Boost.Beast on the io thread, each scrape's text rendered on a
// worker (it reads the store). GET /metrics answers the exposition text;
// any other path 404, any other method 405. At most kMaxConnections at
// once (a new one past that is closed at once), each closed after one
// answer, when its request has not come within kRequestTimeout, or
// kTimeout after it.

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "autoresume/endpoint.hpp"
#include "server/net.hpp"

namespace ar {

class MetricsServer {
 public:
  static constexpr std::size_t kMaxConnections = 16;
  static constexpr std::chrono::seconds kRequestTimeout{2};  // to send the request
  static constexpr std::chrono::seconds kTimeout{10};        // then to render and send
  using Render = std::function<std::string()>;

  // Binds and listens at once (throws on failure, naming the endpoint).
  MetricsServer(net::asio::io_context& io, net::asio::thread_pool& workers, const Endpoint& listen,
                Render render);

  net::tcp::endpoint local_endpoint() const { return acceptor_.local_endpoint(); }
  void start();

 private:
  net::awaitable<void> accept_loop();
  net::awaitable<void> serve(net::tcp::socket socket);
  net::awaitable<std::string> render_on_worker();

  net::tcp::acceptor acceptor_;
  net::asio::thread_pool& workers_;
  Render render_;
  // Connections open, on the io thread only; shared with each connection's
  // coroutine, whose frame io destroys after this server is gone.
  std::shared_ptr<std::size_t> open_ = std::make_shared<std::size_t>(0);
};

}  // namespace ar
