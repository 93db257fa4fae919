#pragma once
// The controller's TCP front on loopback for tests: a Server with munge
// faked (uid 0 is privileged) whose handler answers {"uid": caller,
// "request": the request's body}, and a blocking connection to it that can
// open a protocol v2 session as any uid and send signed or crafted lines.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "autoresume/connect.hpp"
#include "autoresume/session.hpp"
#include "fake_munge.hpp"
#include "server/server.hpp"

namespace ar::test {

using namespace std::chrono_literals;

inline ConnectionLimits test_limits() {
  ConnectionLimits limits;
  limits.auth_timeout = 300ms;
  limits.max_unauthenticated = 4;
  limits.max_user_connections = 2;
  limits.max_connections = 20;
  limits.privileged_connections = 4;  // users share 20 - 4 - 4 = 12
  return limits;
}

struct ServerRig {
  std::shared_ptr<MungeRealm> realm = std::make_shared<MungeRealm>();
  FakeMunge munge{realm, 0};
  net::asio::io_context io;
  net::asio::thread_pool workers{2};
  std::unique_ptr<Server> server;
  std::thread thread;
  // How the sessions' handshakes ended, as the server told them.
  std::mutex outcomes_mutex;
  std::map<std::string, int> outcomes;

  explicit ServerRig(const ConnectionLimits& limits = test_limits(), Server::Handler handler = echo,
                     Server::Quick quick = {}) {
    server = std::make_unique<Server>(
        io, workers, Endpoint{"127.0.0.1", 0}, limits, munge, std::move(handler),
        [](uid_t uid) { return uid == 0; },
        [this](std::string_view outcome) {
          std::lock_guard lock(outcomes_mutex);
          ++outcomes[std::string(outcome)];
        },
        std::move(quick));
    server->start();
    thread = std::thread([this] { io.run(); });
  }
  ~ServerRig() {
    io.stop();
    thread.join();
    workers.join();
    server.reset();
  }
  ServerRig(const ServerRig&) = delete;
  ServerRig& operator=(const ServerRig&) = delete;

  std::uint16_t port() const { return server->local_endpoint().port(); }
  int sessions(const std::string& outcome) {
    std::lock_guard lock(outcomes_mutex);
    return outcomes.contains(outcome) ? outcomes[outcome] : 0;
  }
  Endpoint endpoint() const { return {"127.0.0.1", port()}; }
  // munge as a process of `uid` sees it.
  std::shared_ptr<FakeMunge> munge_of(uid_t uid) { return std::make_shared<FakeMunge>(realm, uid); }

  static std::string echo(const proto::Request& request, uid_t caller, const std::string& peer) {
    return proto::ok_reply(request.id,
                           {{"uid", caller}, {"peer", peer}, {"request", request.body}});
  }
};

// A blocking connection to a rig.
struct Conn {
  net::Fd fd;
  session::Keys keys;
  std::uint64_t seq = 0;

  // From `source` (a loopback address) when given.
  explicit Conn(std::uint16_t port, const char* source = nullptr)
      : fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    if (source != nullptr) {
      sockaddr_in from{};
      from.sin_family = AF_INET;
      REQUIRE(inet_pton(AF_INET, source, &from.sin_addr) == 1);
      REQUIRE(bind(fd.get(), reinterpret_cast<sockaddr*>(&from), sizeof from) == 0);
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    REQUIRE(connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }
  void send_line(const std::string& line) {
    const auto text = line.ends_with('\n') ? line : line + "\n";
    REQUIRE(send(fd.get(), text.data(), text.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(text.size()));
  }
  // The next line; "<closed>" when the server closed, "<timeout>" at the deadline.
  std::string read_line(std::chrono::milliseconds wait = 5s) {
    const auto deadline = net::Clock::now() + wait;
    std::string line;
    for (;;) {
      pollfd pfd{fd.get(), POLLIN, 0};
      if (net::wait_until({&pfd, 1}, deadline) <= 0) return "<timeout>";
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
  // Opens a session as `uid`; the controller's reply line (a refusal when
  // it is not a session's).
  std::string hello(ServerRig& rig, uid_t uid) {
    auto munge = rig.munge_of(uid);
    const auto hello = session::make_client_hello(*munge, 0);
    const auto reply = ask(hello.line);
    try {
      keys = session::accept_server_hello(reply, hello, *munge, 0);
    } catch (const session::SessionError&) {
    }
    return reply;
  }
  // The next request line of this session.
  std::string sealed(std::string_view op, proto::json fields) {
    ++seq;
    return session::seal(keys, session::Direction::request, seq,
                         proto::make_request(seq, op, std::move(fields)));
  }
  // Sends `op` on the session: the reply's body, or the unsigned line.
  proto::json request(std::string_view op, proto::json fields = proto::json::object()) {
    const auto line = ask(sealed(op, std::move(fields)));
    try {
      return proto::json::parse(session::open(line, keys, session::Direction::reply).body);
    } catch (const std::exception&) {
      return {{"unsigned", line}};
    }
  }
  // A session as `uid` whose hello request is answered as `uid`.
  bool served_as(ServerRig& rig, uid_t uid) {
    hello(rig, uid);
    if (keys.id.empty()) return false;
    const auto reply = request("hello");
    return reply.value("ok", false) && reply["result"]["uid"] == uid;
  }
};

}  // namespace ar::test
