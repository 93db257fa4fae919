#include "autoresume/client.hpp"

#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <functional>
#include <optional>
#include <string>
#include <thread>

using namespace std::chrono_literals;
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

// Accepts one connection, reads one line into *request, then writes `reply`
// (nothing if empty) and closes.
std::thread serve_once(int listen_fd, std::string reply, std::string* request) {
  return std::thread([=] {
    const int conn = accept(listen_fd, nullptr, nullptr);
    if (conn < 0) return;
    char c = 0;
    while (read(conn, &c, 1) == 1 && c != '\n') request->push_back(c);
    if (!reply.empty()) (void)!write(conn, reply.data(), reply.size());
    close(conn);
  });
}

}  // namespace

TEST_CASE("call_controller sends one request line and reads the reply", "[client]") {
  Listener listener(true);
  std::string request;
  auto server = serve_once(listener.fd, "{\"v\":1,\"ok\":true,\"result\":{\"x\":7}}\n", &request);
  const auto reply =
      ar::call_controller(listener.endpoint(), 2s, "hello", "CRED", {{"field", "value"}});
  server.join();
  CHECK(reply.ok);
  CHECK(reply.result["x"] == 7);
  const auto sent = ar::proto::json::parse(request);
  CHECK(sent["v"] == ar::proto::kVersion);
  CHECK(sent["op"] == "hello");
  CHECK(sent["cred"] == "CRED");
  CHECK(sent["field"] == "value");
}

TEST_CASE("call_controller returns an error reply's code and message", "[client]") {
  Listener listener(true);
  std::string request;
  auto server = serve_once(
      listener.fd, "{\"v\":1,\"ok\":false,\"error\":{\"code\":\"forbidden\",\"message\":\"no\"}}\n",
      &request);
  const auto reply = ar::call_controller(listener.endpoint(), 2s, "status", "C", {});
  server.join();
  CHECK_FALSE(reply.ok);
  CHECK(reply.code == "forbidden");
  CHECK(reply.message == "no");
}

TEST_CASE("call_controller reports a refused connection", "[client]") {
  Listener bound(false);  // bound but not listening: nobody else can take the port
  CHECK_THROWS_WITH(ar::call_controller(bound.endpoint(), 2s, "hello", "C", {}),
                    Contains("refused"));
}

TEST_CASE("call_controller reports a host that does not resolve", "[client]") {
  CHECK_THROWS_WITH(ar::call_controller({"no-such-host.invalid", 1}, 2s, "hello", "C", {}),
                    Contains("resolve"));
}

TEST_CASE("call_controller gives up on a silent server at the deadline", "[client]") {
  Listener listener(true);  // accepts (backlog) but never answers
  CHECK_THROWS_WITH(ar::call_controller(listener.endpoint(), 200ms, "hello", "C", {}),
                    Contains("timed out after 200 ms"));
}

TEST_CASE("call_controller rejects a closed connection or a malformed reply", "[client]") {
  Listener listener(true);
  std::string request;
  auto closer = serve_once(listener.fd, "", &request);
  CHECK_THROWS_WITH(ar::call_controller(listener.endpoint(), 2s, "hello", "C", {}),
                    Contains("closed the connection"));
  closer.join();
  auto garbler = serve_once(listener.fd, "not json\n", &request);
  CHECK_THROWS_WITH(ar::call_controller(listener.endpoint(), 2s, "hello", "C", {}),
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

// Found by fuzz/reply.cpp: the reply's result and error were copied out of
// the parsed line, a recursion as deep as the JSON; a reply of 32,000
// nested arrays (64 KB, within the line limit) overflowed the stack of
// srun, the CLI or the node agent. Reading a reply takes a stack of a size
// that does not grow with its nesting.
TEST_CASE("call_controller reads a reply nested as deep as a line allows", "[client]") {
  constexpr std::size_t kDepth = 32'000;
  const auto nested = std::string(kDepth, '[') + std::string(kDepth, ']');
  Listener listener(true);
  std::string request;
  for (const auto* field : {"\"ok\":true,\"result\":", "\"ok\":false,\"error\":"}) {
    CAPTURE(field);
    auto server =
        serve_once(listener.fd, "{\"v\":1," + std::string(field) + nested + "}\n", &request);
    std::optional<ar::Reply> reply;
    std::string error;
    on_small_stack(1 << 20, [&] {
      try {
        reply = ar::call_controller(listener.endpoint(), 5s, "status", "C", {});
      } catch (const ar::ClientError& e) {
        error = e.what();
      }
    });
    server.join();
    if (std::string_view(field).find("true") != std::string_view::npos) {
      REQUIRE(reply);  // the result is the caller's to judge
      CHECK(reply->ok);
      CHECK(reply->result.is_array());
    } else {
      CHECK_FALSE(reply);  // an error must be an object
      CHECK_THAT(error, Contains("malformed reply"));
    }
  }
}
