// ar::Client: typed requests on one protocol v2 session to a real Server
// (munge faked), and what it says about controllers it cannot reach or
// does not believe.

#include "autoresume/client.hpp"

#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "server_rig.hpp"

using namespace std::chrono_literals;
using ar::proto::json;
using ar::test::ServerRig;
using Catch::Matchers::Contains;

namespace {

// A loopback socket on an ephemeral port; listening or only bound.
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
  ar::Endpoint endpoint() const { return {"127.0.0.1", port}; }
};

// Accepts one connection, reads one line, then writes what `answer` makes
// of it (nothing if empty) and closes.
std::thread serve_once(int listen_fd, std::function<std::string(const std::string&)> answer) {
  return std::thread([=] {
    const int conn = accept(listen_fd, nullptr, nullptr);
    if (conn < 0) return;
    std::string request;
    char c = 0;
    while (read(conn, &c, 1) == 1 && c != '\n') request.push_back(c);
    const auto reply = answer(request);
    if (!reply.empty()) (void)!write(conn, reply.data(), reply.size());
    close(conn);
  });
}

ar::ClientOptions options_for(const ar::Endpoint& endpoint,
                              std::chrono::milliseconds timeout = 2s) {
  return {endpoint, timeout, "", 0, {}};
}

std::string hello_handler(const ar::proto::Request& request, uid_t caller,
                          const std::string& peer) {
  if (request.op == "hello")
    return ar::proto::ok_reply(request.id, ar::proto::HelloReply{"9.9", 2, caller}.to_json());
  if (request.op == "status")
    return ar::proto::error_reply(request.id, "forbidden", "job 12 belongs to uid 1");
  return ServerRig::echo(request, caller, peer);
}

}  // namespace

TEST_CASE("a Client sends typed requests on one session", "[client]") {
  ServerRig rig(ar::test::test_limits(), hello_handler);
  ar::Client client(options_for(rig.endpoint()), rig.munge_of(1000));
  for (int i = 0; i < 3; ++i) CHECK(client.send(ar::proto::HelloRequest{}).uid == 1000);
  CHECK(rig.realm->next == 2);  // one munge round trip for the three
  // A call with another deadline (srun's wait after its step) keeps it.
  client.set_timeout(500ms);
  CHECK(client.send(ar::proto::HelloRequest{}).uid == 1000);
  CHECK(rig.realm->next == 2);
  CHECK(rig.sessions("opened") == 1);
}

TEST_CASE("a Client throws a refusal's code and message", "[client]") {
  ServerRig rig(ar::test::test_limits(), hello_handler);
  ar::Client client(options_for(rig.endpoint()), rig.munge_of(1000));
  try {
    client.send(ar::proto::StatusRequest{});
    FAIL("no refusal");
  } catch (const ar::Refused& e) {
    CHECK(e.code() == "forbidden");
    CHECK(e.message() == "job 12 belongs to uid 1");
  }
  CHECK(client.send(ar::proto::HelloRequest{}).uid == 1000);  // the session stays
}

TEST_CASE("a Client with a source address connects from it, and the server hands it on",
          "[client]") {
  ServerRig rig;  // echo: the reply carries the peer the handler was given
  auto options = options_for(rig.endpoint());
  options.source = "127.0.0.77";
  ar::Client client(options, rig.munge_of(0));
  CHECK(client.call("heartbeat", {{"node", "node1"}})["peer"] == "127.0.0.77");
  ar::Client plain(options_for(rig.endpoint()), rig.munge_of(0));
  CHECK(plain.call("heartbeat", {{"node", "node1"}})["peer"] == "127.0.0.1");
}

TEST_CASE("a Client names a source address it cannot send from", "[client]") {
  ServerRig rig;
  auto options = options_for(rig.endpoint());
  options.source = "192.0.2.1";  // TEST-NET-1: not an address of this host
  CHECK_THROWS_WITH(ar::Client(options, rig.munge_of(0)).send(ar::proto::HelloRequest{}),
                    Contains("cannot send from source address 192.0.2.1"));
  options.source = "::1";  // the controller is at an IPv4 address
  CHECK_THROWS_WITH(ar::Client(options, rig.munge_of(0)).send(ar::proto::HelloRequest{}),
                    Contains("source address '::1' is not a numeric IPv4 address"));
}

TEST_CASE("a Client refuses a fake controller without root's credential", "[client]") {
  // A user (uid 1000) bound the controller's port: it can read the hello
  // but only make credentials of its own.
  auto realm = std::make_shared<ar::test::MungeRealm>();
  auto user = std::make_shared<ar::test::FakeMunge>(realm, 1000);
  Listener listener(true);
  auto fake = serve_once(listener.fd, [&](const std::string& line) {
    const auto body = json::parse(line)["hello"].get<std::string>();
    const auto payload = "slurm-auto-resume/2 session 00 " + ar::session::sha256_hex(body) + " " +
                         std::string(64, 'a');
    return json{{"v", 2}, {"session", "00"}, {"cred", user->encode(payload, 1001)}}.dump() + "\n";
  });
  ar::Client client(options_for(listener.endpoint()),
                    std::make_shared<ar::test::FakeMunge>(realm, 1001));
  CHECK_THROWS_WITH(client.send(ar::proto::HelloRequest{}),
                    Contains("comes from uid 1000") && Contains("not the controller"));
  fake.join();
}

TEST_CASE("a Client refuses root's credential made for another hello", "[client]") {
  auto realm = std::make_shared<ar::test::MungeRealm>();
  auto root = std::make_shared<ar::test::FakeMunge>(realm, 0);
  // A captured controller credential: it answered someone else's hello.
  const auto old = root->encode(
      "slurm-auto-resume/2 session 00 " + std::string(64, 'b') + " " + std::string(64, 'a'), 1001);
  Listener listener(true);
  auto fake = serve_once(listener.fd, [&](const std::string&) {
    return json{{"v", 2}, {"session", "00"}, {"cred", old}}.dump() + "\n";
  });
  ar::Client client(options_for(listener.endpoint()),
                    std::make_shared<ar::test::FakeMunge>(realm, 1001));
  CHECK_THROWS_WITH(client.send(ar::proto::HelloRequest{}), Contains("does not answer this hello"));
  fake.join();
}

TEST_CASE("a Client names an old controller's refusal with the upgrade order", "[client]") {
  Listener listener(true);
  auto old = serve_once(listener.fd, [](const std::string&) {
    return std::string(
        R"x({"v":1,"ok":false,"error":{"code":"bad_version","message":"protocol version 2 is not supported (this server speaks 1)"}})x"
        "\n");
  });
  ar::Client client(
      options_for(listener.endpoint()),
      std::make_shared<ar::test::FakeMunge>(std::make_shared<ar::test::MungeRealm>(), 0));
  CHECK_THROWS_WITH(client.send(ar::proto::HelloRequest{}),
                    Contains("bad_version") && Contains("upgrade it first"));
  old.join();
}

TEST_CASE("a Client reports a refused connection", "[client]") {
  Listener bound(false);  // bound but not listening: nobody else can take the port
  ar::Client client(
      options_for(bound.endpoint()),
      std::make_shared<ar::test::FakeMunge>(std::make_shared<ar::test::MungeRealm>(), 0));
  CHECK_THROWS_WITH(client.send(ar::proto::HelloRequest{}), Contains("refused"));
}

TEST_CASE("a Client reports a host that does not resolve", "[client]") {
  ar::Client client(
      options_for({"no-such-host.invalid", 1}),
      std::make_shared<ar::test::FakeMunge>(std::make_shared<ar::test::MungeRealm>(), 0));
  CHECK_THROWS_WITH(client.send(ar::proto::HelloRequest{}), Contains("resolve"));
}

TEST_CASE("a Client gives up on a silent server at the deadline", "[client]") {
  Listener listener(true);  // accepts (backlog) but never answers
  ar::Client client(
      options_for(listener.endpoint(), 200ms),
      std::make_shared<ar::test::FakeMunge>(std::make_shared<ar::test::MungeRealm>(), 0));
  CHECK_THROWS_WITH(client.send(ar::proto::HelloRequest{}), Contains("timed out after 200 ms"));
}

TEST_CASE("a Client rejects a closed connection or a malformed reply", "[client]") {
  Listener listener(true);
  auto munge = std::make_shared<ar::test::FakeMunge>(std::make_shared<ar::test::MungeRealm>(), 0);
  auto closer = serve_once(listener.fd, [](const std::string&) { return std::string(); });
  CHECK_THROWS_WITH(
      ar::Client(options_for(listener.endpoint()), munge).send(ar::proto::HelloRequest{}),
      Contains("closed the connection"));
  closer.join();
  auto garbler = serve_once(listener.fd, [](const std::string&) { return std::string("x\n"); });
  CHECK_THROWS_WITH(
      ar::Client(options_for(listener.endpoint()), munge).send(ar::proto::HelloRequest{}),
      Contains("malformed reply"));
  garbler.join();
}

// Runs `body` on a thread of a `stack_bytes` stack, and waits for it.
void on_small_stack(std::size_t stack_bytes, const std::function<void()>& body) {
  pthread_attr_t attr;
  REQUIRE(pthread_attr_init(&attr) == 0);
  REQUIRE(pthread_attr_setstacksize(&attr, stack_bytes) == 0);
  pthread_t thread;
  auto run = [](void* arg) -> void* {
    (*static_cast<const std::function<void()>*>(arg))();
    return nullptr;
  };
  REQUIRE(pthread_create(&thread, &attr, run, const_cast<std::function<void()>*>(&body)) == 0);
  pthread_attr_destroy(&attr);
  REQUIRE(pthread_join(thread, nullptr) == 0);
}

// Found by fuzz/reply.cpp: the reply's result was copied out of the parsed
// line, a recursion as deep as the JSON; a reply of 32,000 nested arrays
// (64 KB, within the line limit) overflowed the stack of srun, the CLI or
// the node agent. Reading a reply takes a stack of a size that does not
// grow with its nesting.
TEST_CASE("a reply nested as deep as a line allows is read on a small stack", "[client]") {
  constexpr std::size_t kDepth = 32'000;
  const auto nested = std::string(kDepth, '[') + std::string(kDepth, ']');
  std::optional<ar::proto::Reply> reply;
  on_small_stack(
      1 << 20, [&] { reply = ar::proto::parse_reply("{\"ok\":true,\"result\":" + nested + "}"); });
  REQUIRE(reply);  // the result is the caller's to judge
  CHECK(reply->ok);
  CHECK(reply->result.is_array());
}

namespace {

std::string read_line_from(int fd) {
  std::string line;
  char c = 0;
  while (read(fd, &c, 1) == 1 && c != '\n') line.push_back(c);
  return line;
}

}  // namespace

TEST_CASE("a Client opens a new session when the controller closed its kept one", "[client]") {
  auto realm = std::make_shared<ar::test::MungeRealm>();
  auto root = std::make_shared<ar::test::FakeMunge>(realm, 0);
  Listener listener(true);
  std::mutex mutex;
  std::condition_variable changed;
  int closed = 0;
  // Two connections in turn: a session, one request, then closed (as the
  // controller closes an idle one).
  std::thread fake([&] {
    for (int i = 0; i < 2; ++i) {
      const int conn = accept(listener.fd, nullptr, nullptr);
      if (conn < 0) return;
      const auto hello = ar::session::answer_client_hello(read_line_from(conn), *root);
      (void)!write(conn, hello.line.data(), hello.line.size());
      const auto opened =
          ar::session::open(read_line_from(conn), hello.keys, ar::session::Direction::request);
      const auto body = ar::proto::ok_reply(
          nullptr,
          ar::proto::HelloReply{"9.9", 2, static_cast<std::uint32_t>(hello.uid)}.to_json());
      const auto reply =
          ar::session::seal(hello.keys, ar::session::Direction::reply, opened.seq, body);
      (void)!write(conn, reply.data(), reply.size());
      close(conn);
      std::lock_guard lock(mutex);
      ++closed;
      changed.notify_all();
    }
  });
  ar::Client client(options_for(listener.endpoint()),
                    std::make_shared<ar::test::FakeMunge>(realm, 1000));
  CHECK(client.send(ar::proto::HelloRequest{}).uid == 1000);
  {
    std::unique_lock lock(mutex);
    REQUIRE(changed.wait_for(lock, 5s, [&] { return closed == 1; }));
  }
  CHECK(client.send(ar::proto::HelloRequest{}).uid == 1000);
  fake.join();
  CHECK(closed == 2);
}
