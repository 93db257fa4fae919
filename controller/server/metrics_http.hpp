#pragma once
// The controller's Prometheus endpoint (metrics_listen): HTTP/1.1 served
// with Boost.Beast on the io thread, each scrape's text rendered on a
// worker (it reads the store). GET /metrics answers the exposition text;
// any other path 404, any other method 405. At most kMaxConnections at
// once and kMaxPerPeer from one address, each closed after one answer,
// when its request has not come within kRequestTimeout, or kTimeout after
// it. When all are taken, a new connection from an address with none open
// takes the place of the oldest one still waiting for its request (one
// that holds a place without asking cannot keep a scrape out); past the
// peer's bound, or with every place answering, the new one is closed.

#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "autoresume/endpoint.hpp"
#include "server/net.hpp"

namespace ar {

class MetricsServer {
 public:
  static constexpr std::size_t kMaxConnections = 16;
  static constexpr std::size_t kMaxPerPeer = 4;
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
  struct Connection {
    std::string peer;
    std::weak_ptr<boost::beast::tcp_stream> stream;
    bool asked = false;  // its request came in
  };
  // The connections open, by the order they came in; on the io thread only,
  // shared with each connection's coroutine, whose frame io destroys after
  // this server is gone.
  struct Open {
    std::uint64_t next = 0;
    std::map<std::uint64_t, Connection> connections;
  };
  // Whether a new connection from `peer` may be served, making room if it
  // may (the oldest connection still waiting for its request is closed).
  bool admit(const std::string& peer);
  net::awaitable<void> serve(std::shared_ptr<boost::beast::tcp_stream> stream, std::uint64_t id);
  net::awaitable<std::string> render_on_worker();

  net::tcp::acceptor acceptor_;
  net::asio::thread_pool& workers_;
  Render render_;
  std::shared_ptr<Open> open_ = std::make_shared<Open>();
};

}  // namespace ar
