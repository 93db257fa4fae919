#pragma once
// Does a node's slurmd answer? A TCP connection to its port, all nodes in
// parallel within one deadline. A killed slurmd refuses at once, a dead host
// times out; a stopped (frozen) process still completes the handshake in
// the kernel, so a plain probe does not see a freeze. A deep probe also
// sends an empty Slurm message and waits for slurmd to read and reject it
// (close the connection): only a running slurmd does that, at the cost of
// one error line in its log per probe.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ar {

struct ProbeTarget {
  std::string address;  // NodeAddr: a name or a numeric address
  std::uint16_t port = 0;
};

enum class ProbeDepth { connect, deep };

// One result per target, in order: true if a connection was accepted (and,
// deep, the message read and the connection closed by slurmd).
std::vector<bool> probe_all(const std::vector<ProbeTarget>& targets,
                            std::chrono::milliseconds timeout,
                            ProbeDepth depth = ProbeDepth::connect);

// Probes nodes: the TCP probe above, or a test's stand-in.
class Prober {
 public:
  virtual ~Prober() = default;
  // As probe_all.
  virtual std::vector<bool> probe(const std::vector<ProbeTarget>& targets,
                                  std::chrono::milliseconds timeout, ProbeDepth depth) = 0;
};

class TcpProber final : public Prober {
 public:
  std::vector<bool> probe(const std::vector<ProbeTarget>& targets,
                          std::chrono::milliseconds timeout, ProbeDepth depth) override {
    return probe_all(targets, timeout, depth);
  }
};

}  // namespace ar
