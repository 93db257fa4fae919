// The controller's TCP front on loopback, with munge faked and a handler
// that answers with the caller's uid: connection limits, deadlines and
// what stays open for root during a flood.

#include "server/server.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "autoresume/connect.hpp"
#include "fake_munge.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using ar::proto::json;

namespace {

using SteadyClock = std::chrono::steady_clock;

ar::ConnectionLimits test_limits() {
  ar::ConnectionLimits limits;
  limits.auth_timeout = 300ms;
  limits.max_unauthenticated = 4;
  limits.max_user_connections = 2;
  limits.max_connections = 20;
  limits.privileged_connections = 4;  // users share 20 - 4 - 4 = 12
  return limits;
}

// A Server on 127.0.0.1, its io thread and workers; the handler answers
// {"uid": caller}; uid 0 is privileged.
struct ServerRig {
  std::shared_ptr<ar::test::MungeRealm> realm = std::make_shared<ar::test::MungeRealm>();
  ar::test::FakeMunge munge{realm, 0};
  ar::net::asio::io_context io;
  ar::net::asio::thread_pool workers{2};
  std::unique_ptr<ar::Server> server;
  std::thread thread;

  explicit ServerRig(const ar::ConnectionLimits& limits = test_limits()) {
    server = std::make_unique<ar::Server>(
        io, workers, ar::Endpoint{"127.0.0.1", 0}, limits, munge,
        [](const ar::proto::Request& request, uid_t caller) {
          return ar::proto::ok_reply(request.id, {{"uid", caller}});
        },
        [](uid_t uid) { return uid == 0; });
    server->start();
    thread = std::thread([this] { io.run(); });
  }
  ~ServerRig() {
    io.stop();
    thread.join();
    workers.join();
    server.reset();
  }
  std::uint16_t port() const { return server->local_endpoint().port(); }

  // A hello request line with a fresh credential of `uid`.
  std::string hello(uid_t uid) {
    ar::test::FakeMunge as_caller(realm, uid);
    return ar::proto::make_request(1, "hello", as_caller.encode(ar::credential_payload("hello")),
                                   json::object());
  }
};

// A blocking client connection to the rig.
struct Conn {
  ar::net::Fd fd;
  explicit Conn(std::uint16_t port) : fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    REQUIRE(connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }
  void send_line(const std::string& line) {
    REQUIRE(send(fd.get(), line.data(), line.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(line.size()));
  }
  // The next line; "<closed>" when the server closed, "<timeout>" at the deadline.
  std::string read_line(std::chrono::milliseconds wait = 5s) {
    const auto deadline = SteadyClock::now() + wait;
    std::string line;
    for (;;) {
      pollfd pfd{fd.get(), POLLIN, 0};
      if (ar::net::wait_until({&pfd, 1}, deadline) <= 0) return "<timeout>";
      char c = 0;
      const auto n = recv(fd.get(), &c, 1, 0);
      if (n <= 0) return "<closed>";
      if (c == '\n') return line;
      line.push_back(c);
    }
  }
  std::string ask(const std::string& line) {
    send_line(line);
    return read_line();
  }
};

bool answered_as(const std::string& reply, uid_t uid) {
  const auto parsed = json::parse(reply, nullptr, false);
  return !parsed.is_discarded() && parsed.value("ok", false) && parsed["result"]["uid"] == uid;
}

}  // namespace

TEST_CASE("a connection that sends nothing is closed at auth_timeout", "[server]") {
  ServerRig rig;
  Conn idle(rig.port());
  Conn partial(rig.port());
  partial.send_line("{\"v\":1,");  // half a request, never finished
  const auto start = SteadyClock::now();
  CHECK(idle.read_line(5s) == "<closed>");
  CHECK(partial.read_line(5s) == "<closed>");
  CHECK(SteadyClock::now() - start >= 250ms);
}

TEST_CASE("an authenticated connection stays open past auth_timeout", "[server]") {
  ServerRig rig;
  Conn conn(rig.port());
  CHECK(answered_as(conn.ask(rig.hello(1000)), 1000));
  CHECK(conn.read_line(600ms) == "<timeout>");  // twice auth_timeout: still open
  CHECK(answered_as(conn.ask(rig.hello(1000)), 1000));
}

TEST_CASE("a flood of idle connections leaves root and users served", "[server]") {
  ServerRig rig;
  std::vector<Conn> flood;
  for (int i = 0; i < 60; ++i) flood.emplace_back(rig.port());  // 3 times max_connections
  Conn root(rig.port());
  CHECK(answered_as(root.ask(rig.hello(0)), 0));
  Conn user(rig.port());
  CHECK(answered_as(user.ask(rig.hello(1000)), 1000));
  // At most max_unauthenticated of the flood are still open, and they close
  // at their deadline.
  std::size_t open = 0;
  for (auto& conn : flood) if (conn.read_line(2s) == "<timeout>") ++open;
  CHECK(open == 0);
}

TEST_CASE("a user holds at most max_user_connections, root more", "[server]") {
  ServerRig rig;
  std::vector<Conn> mine;
  for (int i = 0; i < 2; ++i) {
    mine.emplace_back(rig.port());
    REQUIRE(answered_as(mine.back().ask(rig.hello(1000)), 1000));
  }
  Conn third(rig.port());
  const auto refused = third.ask(rig.hello(1000));
  CHECK_THAT(refused, Contains("\"busy\"") && Contains("uid 1000") &&
                          Contains("max_user_connections=2"));
  CHECK(third.read_line() == "<closed>");
  Conn other(rig.port());
  CHECK(answered_as(other.ask(rig.hello(1001)), 1001));
  std::vector<Conn> roots;
  for (int i = 0; i < 5; ++i) {
    roots.emplace_back(rig.port());
    CHECK(answered_as(roots.back().ask(rig.hello(0)), 0));
  }
  mine.pop_back();  // one of the user's closes: room for another
  Conn again(rig.port());
  bool served = false;
  for (auto deadline = SteadyClock::now() + 5s; !served && SteadyClock::now() < deadline;) {
    Conn retry(rig.port());
    served = answered_as(retry.ask(rig.hello(1000)), 1000);
  }
  CHECK(served);
}

TEST_CASE("users together leave privileged_connections to root", "[server]") {
  ServerRig rig;
  std::vector<Conn> users;
  for (uid_t uid = 1000; uid < 1006; ++uid)  // 6 users x 2 = the users' share of 12
    for (int i = 0; i < 2; ++i) {
      users.emplace_back(rig.port());
      REQUIRE(answered_as(users.back().ask(rig.hello(uid)), uid));
    }
  Conn late(rig.port());
  CHECK_THAT(late.ask(rig.hello(1006)), Contains("\"busy\"") && Contains("kept for root"));
  std::vector<Conn> roots;
  for (int i = 0; i < 4; ++i) {
    roots.emplace_back(rig.port());
    CHECK(answered_as(roots.back().ask(rig.hello(0)), 0));
  }
}

TEST_CASE("a refused credential leaves the connection waiting, not authenticated", "[server]") {
  ServerRig rig;
  Conn conn(rig.port());
  CHECK_THAT(conn.ask(ar::proto::make_request(1, "hello", "garbage", json::object())),
             Contains("unauthenticated"));
  CHECK(conn.read_line(5s) == "<closed>");  // at auth_timeout, like a silent one
}

TEST_CASE("refusals are logged once per interval with a count", "[server]") {
  ar::RefusalLog log(10s);
  const SteadyClock::time_point t0{};
  const auto first = log.refused("one", t0 + 1s);
  REQUIRE(first);
  CHECK_THAT(*first, Contains("one"));
  CHECK_FALSE(log.refused("two", t0 + 2s));
  CHECK_FALSE(log.refused("three", t0 + 3s));
  CHECK(log.due() == t0 + 11s);
  CHECK_FALSE(log.flush(t0 + 10s));
  const auto summary = log.flush(t0 + 11s);
  REQUIRE(summary);
  CHECK_THAT(*summary, Contains("refused 2 connection") && Contains("three"));
  CHECK_FALSE(log.due());
  CHECK_FALSE(log.refused("four", t0 + 12s));  // within 10 s of the summary
  CHECK(log.refused("five", t0 + 22s));
}

TEST_CASE("connection limits come from the free descriptors less the reserve", "[server]") {
  ar::DaemonConfig config;
  config.reserved_fds = 100;
  config.privileged_connections = 50;
  config.max_unauthenticated = 30;
  const auto limits = ar::connection_limits(config, 1000);
  CHECK(limits.max_connections == 900);
  CHECK(limits.users_share() == 820);
  CHECK_THROWS_WITH(ar::connection_limits(config, 180),
                    Contains("180 descriptors") && Contains("reserved_fds=100") &&
                        Contains("LimitNOFILE"));
}
