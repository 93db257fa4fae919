// The controller's TCP front on loopback, with munge faked: connection
// limits and deadlines, and protocol v2's sessions (server_rig.hpp).

#include "server/server.hpp"

#include <atomic>
#include <catch2/catch.hpp>
#include <vector>

#include "server_rig.hpp"

using namespace std::chrono_literals;
using ar::proto::json;
using ar::test::Conn;
using ar::test::ServerRig;
using Catch::Matchers::Contains;

namespace {
using SteadyClock = std::chrono::steady_clock;
}  // namespace

TEST_CASE("a connection that sends nothing is closed at auth_timeout", "[server]") {
  ServerRig rig;
  Conn idle(rig.port());
  Conn partial(rig.port());
  const std::string half = "{\"v\":2,";
  REQUIRE(send(partial.fd.get(), half.data(), half.size(), MSG_NOSIGNAL) == 7);
  const auto start = SteadyClock::now();
  CHECK(idle.read_line(5s) == "<closed>");
  CHECK(partial.read_line(5s) == "<closed>");
  CHECK(SteadyClock::now() - start >= 250ms);
}

TEST_CASE("an authenticated connection stays open past auth_timeout", "[server]") {
  ServerRig rig;
  Conn conn(rig.port());
  REQUIRE(conn.served_as(rig, 1000));
  CHECK(conn.read_line(600ms) == "<timeout>");  // twice auth_timeout: still open
  CHECK(conn.request("hello")["result"]["uid"] == 1000);
}

TEST_CASE("a flood of idle connections leaves root and users served", "[server]") {
  ServerRig rig;
  std::vector<Conn> flood;
  for (int i = 0; i < 60; ++i) flood.emplace_back(rig.port());  // 3 times max_connections
  Conn root(rig.port());
  CHECK(root.served_as(rig, 0));
  Conn user(rig.port());
  CHECK(user.served_as(rig, 1000));
  // The flood's connections are all closed: most at once for newer ones,
  // the rest at their deadline.
  std::size_t open = 0;
  for (auto& conn : flood)
    if (conn.read_line(2s) == "<timeout>") ++open;
  CHECK(open == 0);
}

TEST_CASE("a flood from one address does not push out another's waiting connection", "[server]") {
  ServerRig rig;
  std::vector<Conn> flood;
  for (int i = 0; i < 4; ++i) flood.emplace_back(rig.port(), "127.0.0.2");
  Conn user(rig.port());  // from 127.0.0.1, not sending its hello yet
  for (int i = 0; i < 12; ++i) flood.emplace_back(rig.port(), "127.0.0.2");
  // All 16 accepted: the flood's oldest made room, the newest 3 wait (with
  // the oldest connection evicted instead, the user's would be gone too).
  CHECK(flood[12].read_line(5s) == "<closed>");
  CHECK(user.served_as(rig, 1000));
}

TEST_CASE("a user holds at most max_user_connections, root more", "[server]") {
  ServerRig rig;
  std::vector<Conn> mine;
  for (int i = 0; i < 2; ++i) {
    mine.emplace_back(rig.port());
    REQUIRE(mine.back().served_as(rig, 1000));
  }
  Conn third(rig.port());
  CHECK_THAT(third.hello(rig, 1000),
             Contains("\"busy\"") && Contains("uid 1000") && Contains("max_user_connections=2"));
  CHECK(third.read_line() == "<closed>");
  CHECK(rig.sessions("opened") == 2);
  CHECK(rig.sessions("refused") == 1);
  Conn other(rig.port());
  CHECK(other.served_as(rig, 1001));
  std::vector<Conn> roots;
  for (int i = 0; i < 5; ++i) {
    roots.emplace_back(rig.port());
    CHECK(roots.back().served_as(rig, 0));
  }
  mine.pop_back();  // one of the user's closes: room for another, once the server saw it
  bool served = false;
  for (auto deadline = SteadyClock::now() + 5s; !served && SteadyClock::now() < deadline;) {
    Conn retry(rig.port());
    served = retry.served_as(rig, 1000);
  }
  CHECK(served);
}

TEST_CASE("users together leave privileged_connections to root", "[server]") {
  ServerRig rig;
  std::vector<Conn> users;
  for (uid_t uid = 1000; uid < 1006; ++uid)  // 6 users x 2 = the users' share of 12
    for (int i = 0; i < 2; ++i) {
      users.emplace_back(rig.port());
      REQUIRE(users.back().served_as(rig, uid));
    }
  Conn late(rig.port());
  CHECK_THAT(late.hello(rig, 1006), Contains("\"busy\"") && Contains("kept for root"));
  std::vector<Conn> roots;
  for (int i = 0; i < 4; ++i) {
    roots.emplace_back(rig.port());
    CHECK(roots.back().served_as(rig, 0));
  }
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
  CHECK_THROWS_WITH(ar::connection_limits(config, 180), Contains("180 descriptors") &&
                                                            Contains("reserved_fds=100") &&
                                                            Contains("LimitNOFILE"));
}

// Protocol v2.

TEST_CASE("a session serves signed requests in order", "[server][session]") {
  ServerRig rig;
  Conn conn(rig.port());
  REQUIRE(conn.served_as(rig, 1000));
  const auto reply = conn.request("status", {{"job_id", 12}});
  CHECK(reply["ok"] == true);
  CHECK(reply["id"] == 2);
  CHECK(reply["result"]["request"]["job_id"] == 12);
  CHECK(rig.realm->next == 2);  // one credential each way per session, none per request
}

TEST_CASE("a request the quick predicate names is answered on the io thread, others on a worker",
          "[server][session]") {
  std::atomic<std::thread::id> io_thread{};
  const auto handler = [&io_thread](const ar::proto::Request& request, uid_t, const std::string&) {
    return ar::proto::ok_reply(request.id,
                               {{"on_io", std::this_thread::get_id() == io_thread.load()}});
  };
  const auto quick = [](const ar::proto::Request& request, uid_t caller, const std::string& peer) {
    return request.op == "heartbeat" && caller == 0 && peer == "127.0.0.1";
  };
  ServerRig rig(ar::test::test_limits(), handler, quick);
  io_thread = rig.thread.get_id();
  Conn conn(rig.port());
  conn.hello(rig, 0);
  REQUIRE_FALSE(conn.keys.id.empty());
  CHECK(conn.request("heartbeat", {{"node", "node1"}})["result"]["on_io"] == true);
  CHECK(conn.request("status")["result"]["on_io"] == false);
  CHECK(conn.request("heartbeat", {{"node", "node1"}})["result"]["on_io"] == true);
  // Verified first all the same: a replayed heartbeat is refused, the
  // connection closed.
  const auto line = conn.sealed("heartbeat", {{"node", "node1"}});
  conn.send_line(line);
  const auto reply = conn.read_line();
  CHECK(json::parse(
            ar::session::open(reply, conn.keys, ar::session::Direction::reply).body)["ok"] == true);
  CHECK_THAT(conn.ask(line), Catch::Contains("is not above"));
  CHECK(conn.read_line() == "<closed>");
}

TEST_CASE("a tampered body is refused and the connection closed", "[server][session]") {
  ServerRig rig;
  Conn conn(rig.port());
  REQUIRE(conn.served_as(rig, 0));
  auto line = conn.sealed("replace", {{"node", "node4"}, {"mode", "wait"}});
  const auto at = line.find("wait");
  REQUIRE(at != std::string::npos);
  line.replace(at, 4, "force");
  const auto reply = conn.ask(line);
  CHECK_THAT(reply, Contains("unauthenticated") && Contains("MAC does not match"));
  CHECK(conn.read_line() == "<closed>");
}

TEST_CASE("a replayed sequence number is refused", "[server][session]") {
  ServerRig rig;
  Conn conn(rig.port());
  REQUIRE(conn.served_as(rig, 0));
  const auto line = conn.sealed("replace", {{"node", "node4"}, {"mode", "wait"}});
  CHECK_THAT(conn.ask(line), Contains("\"mac\""));
  CHECK_THAT(conn.ask(line), Contains("unauthenticated") && Contains("sequence number 2 is not "
                                                                     "above 2"));
  CHECK(conn.read_line() == "<closed>");
}

TEST_CASE("root's mode=wait request replayed with mode=force on another session is refused",
          "[server][session]") {
  ServerRig rig;
  Conn root(rig.port());
  REQUIRE(root.served_as(rig, 0));
  const auto captured = root.sealed("replace", {{"node", "node4"}, {"mode", "wait"}});
  CHECK(root.ask(captured).find("\"mac\"") != std::string::npos);
  auto forced = captured;
  forced.replace(forced.find("wait"), 4, "force");
  for (const auto& line : {captured, forced}) {
    Conn thief(rig.port());
    REQUIRE(thief.served_as(rig, 1000));
    CHECK_THAT(thief.ask(line), Contains("unauthenticated") && Contains("MAC does not match"));
  }
}

TEST_CASE("a replayed, foreign or misdirected hello credential is refused", "[server][session]") {
  ServerRig rig;
  auto munge = rig.munge_of(1000);
  const auto hello = ar::session::make_client_hello(*munge, 0);
  Conn first(rig.port());
  CHECK_THAT(first.ask(hello.line), Contains("\"session\""));
  Conn replay(rig.port());
  CHECK_THAT(replay.ask(hello.line), Contains("unauthenticated") && Contains("Replayed"));
  CHECK(replay.read_line() == "<closed>");
  // A credential of v1 (its payload names an op), or made for another hello.
  for (const auto* payload : {"slurm-auto-resume/1 hello", "slurm-auto-resume/2 hello 00"}) {
    const json line = {{"v", 2}, {"hello", hello.body}, {"cred", munge->encode(payload, 0)}};
    Conn foreign(rig.port());
    CHECK_THAT(foreign.ask(line.dump()),
               Contains("unauthenticated") && Contains("not made for this hello"));
  }
  // Restricted to another uid than the controller's.
  const auto elsewhere = ar::session::make_client_hello(*munge, 1000);
  Conn misdirected(rig.port());
  CHECK_THAT(misdirected.ask(elsewhere.line),
             Contains("unauthenticated") && Contains("Unauthorized"));
  CHECK(rig.sessions("opened") == 1);
  CHECK(rig.sessions("failed") == 4);
}

TEST_CASE("a v1 request is refused with the upgrade rule", "[server][session]") {
  ServerRig rig;
  Conn conn(rig.port());
  const auto reply = json::parse(conn.ask(R"({"v":1,"id":1,"op":"hello","cred":"MUNGE:x:"})"));
  CHECK(reply["ok"] == false);
  CHECK(reply["error"]["code"] == "bad_version");
  CHECK_THAT(reply["error"]["message"].get<std::string>(),
             Contains("version 1 is not supported") &&
                 Contains("upgrade the controller first, then the login and batch hosts") &&
                 Contains("then the node agents"));
  CHECK(conn.read_line() == "<closed>");
  Conn later(rig.port());  // v1 after a session's hello: the same
  REQUIRE(later.served_as(rig, 0));
  CHECK_THAT(later.ask(R"({"v":1,"op":"hello","cred":"x"})"), Contains("bad_version"));
}

TEST_CASE("an oversized line is refused and the connection closed", "[server][session]") {
  ServerRig rig;
  Conn conn(rig.port());
  REQUIRE(conn.served_as(rig, 0));
  CHECK_THAT(conn.ask(std::string(ar::proto::kMaxLineBytes + 10, 'x')), Contains("too_large"));
  CHECK(conn.read_line() == "<closed>");
}
