#include "autoresume/client.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "autoresume/connect.hpp"

namespace ar {

namespace {

using Clock = net::Clock;

// What the helpers below say at the deadline; call_controller adds the timeout.
constexpr std::string_view kTimedOut = net::kTimedOut;

using net::Fd;

// Waits until `fd` is ready for `events` or the deadline passes; returns
// false on timeout. Throws on poll errors.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  pollfd pfd{fd, events, 0};
  const int ready = net::wait_until({&pfd, 1}, deadline);
  if (ready < 0) throw ClientError(std::strerror(errno));
  return ready > 0;
}

// A connected non-blocking socket to one of the endpoint's addresses, tried
// in turn; the last one's failure if none connects.
Fd connect_tcp(const Endpoint& endpoint, Clock::time_point deadline) {
  std::string error;
  const auto addresses = net::resolve_by(endpoint.host, endpoint.port, deadline, error);
  if (!addresses) throw ClientError("cannot resolve host: " + error);
  error = "no address";
  for (const addrinfo* addr = addresses.get(); addr != nullptr; addr = addr->ai_next) {
    if (auto sock = net::connect_by(*addr, deadline, error); sock.valid()) return sock;
  }
  throw ClientError(error);
}

void send_all(int fd, std::string_view data, Clock::time_point deadline) {
  while (!data.empty()) {
    const auto n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n >= 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_for(fd, POLLOUT, deadline)) throw ClientError(std::string(kTimedOut));
    } else if (errno != EINTR) {
      throw ClientError(std::string("send failed: ") + std::strerror(errno));
    }
  }
}

std::string receive_line(int fd, Clock::time_point deadline) {
  std::string line;
  char buffer[4096];
  for (;;) {
    if (!wait_for(fd, POLLIN, deadline)) throw ClientError(std::string(kTimedOut));
    const auto n = recv(fd, buffer, sizeof buffer, 0);
    if (n == 0) throw ClientError("the controller closed the connection without a reply");
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw ClientError(std::string("receive failed: ") + std::strerror(errno));
    }
    line.append(buffer, static_cast<std::size_t>(n));
    if (const auto nl = line.find('\n'); nl != std::string::npos) return line.substr(0, nl);
    if (line.size() > proto::kMaxMessageBytes) throw ClientError("reply too large");
  }
}

}  // namespace

Reply call_controller(const Endpoint& endpoint, std::chrono::milliseconds timeout,
                      std::string_view op, std::string_view cred, proto::json fields) {
  const auto deadline = Clock::now() + timeout;
  try {
    Fd sock = connect_tcp(endpoint, deadline);
    send_all(sock.get(), proto::make_request(1, op, cred, std::move(fields)), deadline);
    const auto line = receive_line(sock.get(), deadline);
    auto reply = proto::json::parse(line, nullptr, false);
    if (reply.is_discarded() || !reply.is_object() || !reply.contains("ok"))
      throw ClientError("the controller sent a malformed reply");
    Reply out;
    out.ok = reply.value("ok", false);
    // Moved out, never copied: a copy recurses as deep as the JSON is
    // nested, and a reply of 32,000 nested arrays overflowed the stack.
    const auto it = reply.find(out.ok ? "result" : "error");
    auto field = it != reply.end() ? std::move(*it) : proto::json::object();
    if (out.ok) {
      out.result = std::move(field);
    } else {
      out.code = field.value("code", std::string(proto::code::kInternal));
      out.message = field.value("message", std::string("no message"));
    }
    return out;
  } catch (const ClientError& e) {
    if (e.what() == kTimedOut)
      throw ClientError("timed out after " + std::to_string(timeout.count()) + " ms");
    throw;
  } catch (const proto::json::exception& e) {
    throw ClientError(std::string("the controller sent a malformed reply: ") + e.what());
  }
}

}  // namespace ar
