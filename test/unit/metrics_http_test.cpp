// The metrics endpoint's places (server/metrics_http.hpp): connections that
// hold a place without asking cannot keep a scrape out.

#include "server/metrics_http.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

// A TCP connection from the loopback address `from` to 127.0.0.1:port.
class Client {
 public:
  Client(const std::string& from, unsigned short port) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    REQUIRE(fd_ >= 0);
    sockaddr_in local{};
    local.sin_family = AF_INET;
    REQUIRE(inet_pton(AF_INET, from.c_str(), &local.sin_addr) == 1);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof local) == 0);
    sockaddr_in server{};
    server.sin_family = AF_INET;
    server.sin_port = htons(port);
    server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd_, reinterpret_cast<sockaddr*>(&server), sizeof server) == 0);
  }
  ~Client() { close(fd_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  void send_text(const std::string& text) const {
    REQUIRE(send(fd_, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size()));
  }
  // What the server sent until it closed, or until `wait_ms` passed.
  std::string receive(int wait_ms) const {
    std::string out;
    pollfd p{fd_, POLLIN, 0};
    while (poll(&p, 1, wait_ms) == 1) {
      char buffer[4096];
      const auto n = recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      out.append(buffer, static_cast<std::size_t>(n));
    }
    return out;
  }
  bool closed() const { return closed_; }

 private:
  int fd_;
  mutable bool closed_ = false;
};

}  // namespace

TEST_CASE("connections that hold a place without asking cannot keep a scrape out",
          "[metrics][security]") {
  namespace asio = ar::net::asio;
  asio::io_context io;
  asio::thread_pool workers(1);
  ar::MetricsServer server(io, workers, ar::Endpoint{"127.0.0.1", 0},  // a free port
                           [] { return std::string("auto_resume_up 1\n"); });
  server.start();
  auto guard = asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  const auto port = server.local_endpoint().port();
  {
    std::vector<std::unique_ptr<Client>> held;
    // One address: kMaxPerPeer places, and no more.
    for (std::size_t i = 0; i < ar::MetricsServer::kMaxPerPeer; ++i)
      held.push_back(std::make_unique<Client>("127.0.0.1", port));
    Client over("127.0.0.1", port);
    over.receive(2000);
    CHECK(over.closed());
    // Other addresses fill the rest with half a request each.
    for (std::size_t i = ar::MetricsServer::kMaxPerPeer; i < ar::MetricsServer::kMaxConnections;
         ++i) {
      held.push_back(std::make_unique<Client>("127.0.0." + std::to_string(2 + i), port));
      held.back()->send_text("GET /metr");
    }
    // A scrape from a new address takes the oldest waiting one's place.
    Client scrape("127.0.0.100", port);
    scrape.send_text("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    const auto reply = scrape.receive(5000);
    CHECK(reply.starts_with("HTTP/1.1 200"));
    CHECK(reply.find("auto_resume_up 1\n") != std::string::npos);
    held.front()->receive(2000);
    CHECK(held.front()->closed());  // the oldest place that never asked
  }
  guard.reset();
  io.stop();
  runner.join();
  workers.join();
}
