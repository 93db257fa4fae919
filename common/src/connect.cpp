#include "autoresume/connect.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ar::net {

namespace {

// A non-blocking socket for `address` with connect() called on it: the
// socket (`connected` when the connection was made at once, as it may be to
// a local address), or no socket and `error`.
Fd open_connect(const addrinfo& address, std::string& error, bool& connected) {
  connected = false;
  Fd sock(socket(address.ai_family, address.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                 address.ai_protocol));
  if (!sock.valid()) {
    error = std::strerror(errno);
    return Fd();
  }
  if (connect(sock.get(), address.ai_addr, address.ai_addrlen) == 0) {
    connected = true;
    return sock;
  }
  if (errno != EINPROGRESS) {
    error = std::strerror(errno);
    return Fd();
  }
  return sock;
}

}  // namespace

void Fd::reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

Addresses resolve(const std::string& host, std::uint16_t port, std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const auto service = std::to_string(port);
  if (const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    error = gai_strerror(rc);
    return nullptr;
  }
  return Addresses(found);
}

Fd start_connect(const addrinfo& address, std::string& error) {
  bool connected = false;
  return open_connect(address, error, connected);
}

int connect_error(int fd) {
  int error = 0;
  socklen_t length = sizeof error;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) < 0) return errno;
  return error;
}

int wait_until(std::span<pollfd> fds, Clock::time_point deadline) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return 0;
    const int ready = poll(fds.data(), fds.size(), static_cast<int>(left));
    if (ready >= 0 || errno != EINTR) return ready;
  }
}

Fd connect_by(const addrinfo& address, Clock::time_point deadline, std::string& error) {
  bool connected = false;
  Fd sock = open_connect(address, error, connected);
  if (!sock.valid() || connected) return sock;
  pollfd wanted{sock.get(), POLLOUT, 0};
  const int ready = wait_until({&wanted, 1}, deadline);
  if (ready <= 0) {
    error = ready == 0 ? std::string(kTimedOut) : std::strerror(errno);
    return Fd();
  }
  if (const int failed = connect_error(sock.get()); failed != 0) {
    error = std::strerror(failed);
    return Fd();
  }
  return sock;
}

}  // namespace ar::net
