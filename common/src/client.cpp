#include "autoresume/client.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace ar {

namespace {

using Clock = std::chrono::steady_clock;

// What the helpers below say at the deadline; call_controller adds the timeout.
constexpr std::string_view kTimedOut = "timed out";

struct AddrInfoDeleter {
  void operator()(addrinfo* info) const { freeaddrinfo(info); }
};

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept {
    reset(other.release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(-1); }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

// Waits until `fd` is ready for `events` or the deadline passes; returns
// false on timeout. Throws on poll errors.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd pfd{fd, events, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(left));
    if (ready > 0) return true;
    if (ready == 0) return false;
    if (errno != EINTR) throw ClientError(std::strerror(errno));
  }
}

// One address: a connected non-blocking socket, or the reason it failed.
Fd try_connect(const addrinfo& addr, Clock::time_point deadline, std::string& error) {
  Fd sock(
      socket(addr.ai_family, addr.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, addr.ai_protocol));
  if (sock.get() < 0) {
    error = std::strerror(errno);
    return Fd();
  }
  if (connect(sock.get(), addr.ai_addr, addr.ai_addrlen) == 0) return sock;
  if (errno != EINPROGRESS) {
    error = std::strerror(errno);
    return Fd();
  }
  if (!wait_for(sock.get(), POLLOUT, deadline)) {
    error = kTimedOut;
    return Fd();
  }
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(sock.get(), SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
  if (err != 0) {
    error = std::strerror(err);
    return Fd();
  }
  return sock;
}

Fd connect_tcp(const Endpoint& endpoint, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* raw = nullptr;
  const auto port = std::to_string(endpoint.port);
  if (const int rc = getaddrinfo(endpoint.host.c_str(), port.c_str(), &hints, &raw); rc != 0)
    throw ClientError(std::string("cannot resolve host: ") + gai_strerror(rc));
  std::unique_ptr<addrinfo, AddrInfoDeleter> list(raw);
  std::string error = "no address";
  for (const addrinfo* addr = list.get(); addr != nullptr; addr = addr->ai_next) {
    if (auto sock = try_connect(*addr, deadline, error); sock.get() >= 0) return sock;
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
    const auto reply = proto::json::parse(line, nullptr, false);
    if (reply.is_discarded() || !reply.is_object() || !reply.contains("ok"))
      throw ClientError("the controller sent a malformed reply");
    Reply out;
    out.ok = reply.value("ok", false);
    if (out.ok) {
      out.result = reply.value("result", proto::json::object());
    } else {
      const auto error = reply.value("error", proto::json::object());
      out.code = error.value("code", std::string(proto::code::kInternal));
      out.message = error.value("message", std::string("no message"));
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
