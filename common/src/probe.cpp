#include "autoresume/probe.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace ar {

namespace {

struct AddrInfoDeleter {
  void operator()(addrinfo* info) const { freeaddrinfo(info); }
};

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

using Clock = std::chrono::steady_clock;

// One address; returns an error text or nothing.
std::optional<std::string> try_connect(const addrinfo& addr, Clock::time_point deadline) {
  Fd sock(
      socket(addr.ai_family, addr.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, addr.ai_protocol));
  if (sock.get() < 0) return std::string(std::strerror(errno));
  if (connect(sock.get(), addr.ai_addr, addr.ai_addrlen) == 0) return std::nullopt;
  if (errno != EINPROGRESS) return std::string(std::strerror(errno));
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return std::string("timed out");
    pollfd pfd{sock.get(), POLLOUT, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return std::string(std::strerror(errno));
    if (ready == 0) return std::string("timed out");
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(sock.get(), SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
    if (err != 0) return std::string(std::strerror(err));
    return std::nullopt;
  }
}

}  // namespace

std::optional<std::string> probe_tcp(const Endpoint& endpoint, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* raw = nullptr;
  const auto port = std::to_string(endpoint.port);
  if (const int rc = getaddrinfo(endpoint.host.c_str(), port.c_str(), &hints, &raw); rc != 0)
    return std::string("cannot resolve host: ") + gai_strerror(rc);
  std::unique_ptr<addrinfo, AddrInfoDeleter> list(raw);
  std::string last_error = "no address";
  for (const addrinfo* addr = list.get(); addr != nullptr; addr = addr->ai_next) {
    auto error = try_connect(*addr, deadline);
    if (!error) return std::nullopt;
    last_error = *error == "timed out"
                     ? "timed out after " + std::to_string(timeout.count()) + " ms"
                     : *error;
  }
  return last_error;
}

}  // namespace ar
