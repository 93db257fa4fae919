#pragma once
// Does a node's slurmd answer? A TCP connection to its port, all nodes in
// parallel within one deadline. A killed slurmd refuses at once, a dead host
// times out; a stopped (frozen) process still completes the handshake in
// the kernel, so freezes are left to Slurm's own pings (NOT_RESPONDING).

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ar {

struct ProbeTarget {
  std::string address;  // NodeAddr: a name or a numeric address
  std::uint16_t port = 0;
};

// One result per target, in order: true if a connection was accepted.
std::vector<bool> probe_all(const std::vector<ProbeTarget>& targets,
                            std::chrono::milliseconds timeout);

}  // namespace ar
