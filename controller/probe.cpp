#include "probe.hpp"

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
                            std::chrono::milliseconds timeout) {
  std::vector<bool> answered(targets.size(), false);
  std::vector<pollfd> fds;
  std::vector<std::size_t> index;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const int fd = start_connect(targets[i]);
    if (fd < 0) continue;
    fds.push_back({fd, POLLOUT, 0});
    index.push_back(i);
  }
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
      if (fds[k].fd < 0 || fds[k].revents == 0) continue;
      int error = 0;
      socklen_t length = sizeof error;
      getsockopt(fds[k].fd, SOL_SOCKET, SO_ERROR, &error, &length);
      answered[index[k]] = error == 0 && (fds[k].revents & POLLOUT) != 0;
      close(fds[k].fd);
      fds[k].fd = -1;  // poll skips negative descriptors
      --open;
    }
  }
  for (auto& p : fds)
    if (p.fd >= 0) close(p.fd);
  return answered;
}

}  // namespace ar
