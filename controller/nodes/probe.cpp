#include "nodes/probe.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

namespace ar {

namespace {

// A non-blocking connect in progress, or -1 when it failed at once.
int start_connect(const ProbeTarget& target) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const auto port = std::to_string(target.port);
  if (getaddrinfo(target.address.c_str(), port.c_str(), &hints, &found) != 0) return -1;
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owner(found, &freeaddrinfo);
  const int fd = socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, found->ai_addr, found->ai_addrlen) == 0 || errno == EINPROGRESS) return fd;
  close(fd);
  return -1;
}

}  // namespace

std::vector<bool> probe_all(const std::vector<ProbeTarget>& targets,
                            std::chrono::milliseconds timeout, ProbeDepth depth) {
  std::vector<bool> answered(targets.size(), false);
  std::vector<pollfd> fds;
  std::vector<std::size_t> index;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const int fd = start_connect(targets[i]);
    if (fd < 0) continue;
    fds.push_back({fd, POLLOUT, 0});
    index.push_back(i);
  }
  auto finish = [&](std::size_t k, bool ok) {
    answered[index[k]] = ok;
    close(fds[k].fd);
    fds[k].fd = -1;  // poll skips negative descriptors
  };
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::size_t open = fds.size();
  while (open > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    const int ready = poll(fds.data(), fds.size(), static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;
    for (std::size_t k = 0; k < fds.size(); ++k) {
      auto& p = fds[k];
      if (p.fd < 0 || p.revents == 0) continue;
      if (p.events == POLLOUT) {  // the connection completed, or failed
        int error = 0;
        socklen_t length = sizeof error;
        getsockopt(p.fd, SOL_SOCKET, SO_ERROR, &error, &length);
        const bool connected = error == 0 && (p.revents & POLLOUT) != 0;
        if (!connected || depth == ProbeDepth::connect) {
          finish(k, connected);
          --open;
          continue;
        }
        // A message of length 0: slurmd reads it, rejects it and hangs up.
        const unsigned char empty[4] = {0, 0, 0, 0};
        if (send(p.fd, empty, sizeof empty, MSG_NOSIGNAL) != sizeof empty) {
          finish(k, false);
          --open;
          continue;
        }
        p.events = POLLIN;
        p.revents = 0;
        continue;
      }
      // Deep: whatever comes back (the hang-up, a reset) shows a live reader.
      char buffer[64];
      const auto n = recv(p.fd, buffer, sizeof buffer, MSG_DONTWAIT);
      if (n > 0) continue;  // not expected from slurmd; wait for its hang-up
      finish(k, n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK));
      --open;
    }
  }
  for (auto& p : fds)
    if (p.fd >= 0) close(p.fd);
  return answered;
}

}  // namespace ar
