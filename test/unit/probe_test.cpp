// The TCP probe of a node's slurmd: answered, silent, or unknown when the
// prober itself fails (never counted as the node's silence).

#include "autoresume/probe.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>

namespace {

using ar::ProbeResult;
using namespace std::chrono_literals;

// A socket bound to a free loopback port; listening or not.
struct Port {
  int fd = -1;
  std::uint16_t port = 0;
  explicit Port(bool listening) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    socklen_t length = sizeof address;
    REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    port = ntohs(address.sin_port);
    if (listening) REQUIRE(listen(fd, 4) == 0);
  }
  ~Port() { close(fd); }
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;
};

}  // namespace

TEST_CASE("a probe tells an answer, a refusal and its own failure apart", "[probe]") {
  const Port listening(true);
  const Port closed(false);  // bound, not listening: connections are refused
  const auto results = ar::probe_all({{"127.0.0.1", listening.port},
                                      {"127.0.0.1", closed.port},
                                      {"no-such-node.invalid", listening.port}},
                                     1000ms);
  CHECK(results == std::vector{ProbeResult::answered, ProbeResult::silent, ProbeResult::unknown});
}

TEST_CASE("a prober out of descriptors says unknown, not silent", "[probe]") {
  const Port listening(true);
  rlimit saved{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
  // No descriptor is left to this process: socket() fails with EMFILE.
  const int next = open("/dev/null", O_RDONLY | O_CLOEXEC);  // the lowest free descriptor
  REQUIRE(next >= 0);
  close(next);
  rlimit tight = saved;
  tight.rlim_cur = static_cast<rlim_t>(next);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &tight) == 0);
  const auto results = ar::probe_all({{"127.0.0.1", listening.port}}, 1000ms);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &saved) == 0);
  CHECK(results == std::vector{ProbeResult::unknown});
  // With descriptors again, the same node answers.
  CHECK(ar::probe_all({{"127.0.0.1", listening.port}}, 1000ms) ==
        std::vector{ProbeResult::answered});
}

TEST_CASE("probe results have names for the wire", "[probe]") {
  for (const auto r : {ProbeResult::answered, ProbeResult::silent, ProbeResult::unknown})
    CHECK(ar::parse_probe_result(ar::to_string(r)) == r);
  CHECK_FALSE(ar::parse_probe_result("dead"));
}
