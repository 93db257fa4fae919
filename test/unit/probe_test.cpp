#include "autoresume/probe.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

// A listening socket on an ephemeral loopback port.
struct Listener {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  std::uint16_t port = 0;

  explicit Listener(bool listening) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    socklen_t len = sizeof addr;
    REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port = ntohs(addr.sin_port);
    if (listening) REQUIRE(listen(fd, 4) == 0);
  }
  ~Listener() { close(fd); }
};

}  // namespace

TEST_CASE("probe_tcp succeeds against a listening port", "[probe]") {
  Listener listener(true);
  CHECK_FALSE(ar::probe_tcp({"127.0.0.1", listener.port}, 2s).has_value());
}

TEST_CASE("probe_tcp reports a refused connection", "[probe]") {
  // Bound but not listening: nobody else can take the port meanwhile.
  Listener bound(false);
  const auto error = ar::probe_tcp({"127.0.0.1", bound.port}, 2s);
  REQUIRE(error.has_value());
  CHECK_THAT(*error, Contains("refused"));
}

TEST_CASE("probe_tcp reports a host that does not resolve", "[probe]") {
  const auto error = ar::probe_tcp({"no-such-host.invalid", 1}, 2s);
  REQUIRE(error.has_value());
  CHECK_THAT(*error, Contains("resolve"));
}
