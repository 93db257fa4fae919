#include "autoresume/connect.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>

namespace ar::net {

namespace {

// Binds `fd` (of `family`) to the numeric address `source`, any port.
bool bind_source(int fd, int family, const std::string& source, std::string& error) {
  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
  addrinfo* found = nullptr;
  if (getaddrinfo(source.c_str(), nullptr, &hints, &found) != 0) {
    error = "source address '" + source + "' is not a numeric " +
            (family == AF_INET6 ? "IPv6" : "IPv4") + " address like the controller's";
    return false;
  }
  const Addresses owned(found);
  if (bind(fd, found->ai_addr, found->ai_addrlen) != 0) {
    error = "cannot send from source address " + source + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

// A non-blocking socket for `address` with connect() called on it: the
// socket (`connected` when the connection was made at once, as it may be to
// a local address), or no socket and `error`.
Fd open_connect(const addrinfo& address, std::string& error, bool& connected,
                const std::string& source = {}) {
  connected = false;
  Fd sock(socket(address.ai_family, address.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                 address.ai_protocol));
  if (!sock.valid()) {
    error = std::strerror(errno);
    return Fd();
  }
  if (!source.empty() && !bind_source(sock.get(), address.ai_family, source, error)) return Fd();
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

std::string numeric_host(const addrinfo& address) {
  char text[NI_MAXHOST];
  if (getnameinfo(address.ai_addr, address.ai_addrlen, text, sizeof text, nullptr, 0,
                  NI_NUMERICHOST) != 0)
    return {};
  return text;
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

namespace {

// A lookup's outcome, shared by the caller and the thread that runs it; the
// last of the two to let go frees it.
struct PendingLookup {
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  int rc = 0;
  addrinfo* found = nullptr;

  ~PendingLookup() {
    if (found != nullptr) freeaddrinfo(found);
  }
};

}  // namespace

Addresses resolve_by(const std::string& host, std::uint16_t port, Clock::time_point deadline,
                     std::string& error, const Lookup& lookup) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST;
  const auto service = std::to_string(port);
  addrinfo* numeric = nullptr;
  const int numeric_rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &numeric);
  if (numeric_rc == 0) return Addresses(numeric);
  if (numeric_rc != EAI_NONAME) {
    error = gai_strerror(numeric_rc);
    return nullptr;
  }
  hints.ai_flags = 0;
  auto pending = std::make_shared<PendingLookup>();
  try {
    std::thread([pending, host, service, hints, lookup] {
      addrinfo* found = nullptr;
      const int rc = lookup(host.c_str(), service.c_str(), &hints, &found);
      std::lock_guard lock(pending->mutex);
      pending->rc = rc;
      pending->found = rc == 0 ? found : nullptr;
      pending->done = true;
      pending->finished.notify_all();
    }).detach();
  } catch (const std::system_error& e) {
    error = std::string("cannot start a lookup: ") + e.what();
    return nullptr;
  }
  std::unique_lock lock(pending->mutex);
  if (!pending->finished.wait_until(lock, deadline, [&] { return pending->done; })) {
    error = std::string(kTimedOut);
    return nullptr;
  }
  if (pending->rc != 0) {
    error = gai_strerror(pending->rc);
    return nullptr;
  }
  return Addresses(std::exchange(pending->found, nullptr));
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

Fd connect_by(const addrinfo& address, Clock::time_point deadline, std::string& error,
              const std::string& source) {
  bool connected = false;
  Fd sock = open_connect(address, error, connected, source);
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
