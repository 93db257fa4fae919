#include "nodes/probe.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include "autoresume/connect.hpp"

namespace ar {

namespace {

// A connect to the target's first address under way, or no socket when it
// failed at once (or the address does not resolve).
net::Fd start_connect(const ProbeTarget& target) {
  std::string error;
  const auto addresses = net::resolve(target.address, target.port, error);
  if (!addresses) return net::Fd();
  return net::start_connect(*addresses, error);
}

}  // namespace

std::vector<bool> probe_all(const std::vector<ProbeTarget>& targets,
                            std::chrono::milliseconds timeout, ProbeDepth depth) {
  std::vector<bool> answered(targets.size(), false);
  std::vector<net::Fd> sockets;
  std::vector<pollfd> fds;
  std::vector<std::size_t> index;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    auto sock = start_connect(targets[i]);
    if (!sock.valid()) continue;
    fds.push_back({sock.get(), POLLOUT, 0});
    sockets.push_back(std::move(sock));
    index.push_back(i);
  }
  std::size_t open = fds.size();
  auto finish = [&](std::size_t k, bool ok) {
    answered[index[k]] = ok;
    sockets[k].reset(-1);
    fds[k].fd = -1;  // poll skips negative descriptors
    --open;
  };
  const auto deadline = net::Clock::now() + timeout;
  while (open > 0) {
    if (net::wait_until(fds, deadline) <= 0) break;
    for (std::size_t k = 0; k < fds.size(); ++k) {
      auto& p = fds[k];
      if (p.fd < 0 || p.revents == 0) continue;
      if (p.events == POLLOUT) {  // the connection completed, or failed
        const bool connected = net::connect_error(p.fd) == 0 && (p.revents & POLLOUT) != 0;
        if (!connected || depth == ProbeDepth::connect) {
          finish(k, connected);
          continue;
        }
        // A message of length 0: slurmd reads it, rejects it and hangs up.
        const unsigned char empty[4] = {0, 0, 0, 0};
        if (send(p.fd, empty, sizeof empty, MSG_NOSIGNAL) != sizeof empty) {
          finish(k, false);
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
    }
  }
  return answered;
}

}  // namespace ar
