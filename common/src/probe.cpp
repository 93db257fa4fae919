#include "autoresume/probe.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>

#include "autoresume/connect.hpp"

namespace ar {

namespace {

constexpr std::array<std::string_view, 3> kResultNames{"answered", "silent", "unknown"};

// Errors of this host, not of the node: out of descriptors, ports or
// memory, no route at all, a local firewall.
bool local_error(int error) {
  switch (error) {
    case EMFILE:
    case ENFILE:
    case ENOBUFS:
    case ENOMEM:
    case EAFNOSUPPORT:
    case EADDRNOTAVAIL:
    case EAGAIN:
    case ENETUNREACH:
    case ENETDOWN:
    case EPERM:
    case EACCES:
      return true;
    default:
      return false;
  }
}

// A connect to the target's first address under way (or done), or no
// socket with `result` set: silent (refused at once) or unknown (this
// host's own failure, or the name did not resolve).
net::Fd start_probe(const ProbeTarget& target, ProbeResult& result) {
  std::string error;
  const auto addresses = net::resolve(target.address, target.port, error);
  result = ProbeResult::unknown;
  if (!addresses) return net::Fd();
  const auto& address = *addresses;
  net::Fd sock(socket(address.ai_family, address.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                      address.ai_protocol));
  if (!sock.valid()) return net::Fd();
  if (connect(sock.get(), address.ai_addr, address.ai_addrlen) == 0 || errno == EINPROGRESS) {
    result = ProbeResult::silent;  // until it answers
    return sock;
  }
  result = local_error(errno) ? ProbeResult::unknown : ProbeResult::silent;
  return net::Fd();
}

}  // namespace

std::string_view to_string(ProbeResult result) {
  return kResultNames.at(static_cast<std::size_t>(result));
}

std::optional<ProbeResult> parse_probe_result(std::string_view text) {
  for (std::size_t i = 0; i < kResultNames.size(); ++i)
    if (kResultNames[i] == text) return static_cast<ProbeResult>(i);
  return std::nullopt;
}

std::vector<ProbeResult> probe_all(const std::vector<ProbeTarget>& targets,
                                   std::chrono::milliseconds timeout, ProbeDepth depth) {
  std::vector<ProbeResult> results(targets.size(), ProbeResult::silent);
  std::vector<net::Fd> sockets;
  std::vector<pollfd> fds;
  std::vector<std::size_t> index;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    auto sock = start_probe(targets[i], results[i]);
    if (!sock.valid()) continue;
    fds.push_back({sock.get(), POLLOUT, 0});
    sockets.push_back(std::move(sock));
    index.push_back(i);
  }
  std::size_t open = fds.size();
  auto finish = [&](std::size_t k, ProbeResult result) {
    results[index[k]] = result;
    sockets[k].reset(-1);
    fds[k].fd = -1;  // poll skips negative descriptors
    --open;
  };
  const auto deadline = net::Clock::now() + timeout;
  while (open > 0) {
    const int ready = net::wait_until(fds, deadline);
    if (ready < 0) {  // poll itself failed: nothing is known of the rest
      for (std::size_t k = 0; k < fds.size(); ++k)
        if (fds[k].fd >= 0) finish(k, ProbeResult::unknown);
      break;
    }
    if (ready == 0) break;  // the rest stay silent
    for (std::size_t k = 0; k < fds.size(); ++k) {
      auto& p = fds[k];
      if (p.fd < 0 || p.revents == 0) continue;
      if (p.events == POLLOUT) {  // the connection completed, or failed
        const int error = net::connect_error(p.fd);
        const bool connected = error == 0 && (p.revents & POLLOUT) != 0;
        if (!connected) {
          finish(k, local_error(error) ? ProbeResult::unknown : ProbeResult::silent);
          continue;
        }
        if (depth == ProbeDepth::connect) {
          finish(k, ProbeResult::answered);
          continue;
        }
        // A message of length 0: slurmd reads it, rejects it and hangs up.
        const unsigned char empty[4] = {0, 0, 0, 0};
        if (send(p.fd, empty, sizeof empty, MSG_NOSIGNAL) != sizeof empty) {
          finish(k, ProbeResult::silent);
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
      finish(k, n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) ? ProbeResult::answered
                                                                    : ProbeResult::silent);
    }
  }
  return results;
}

}  // namespace ar
