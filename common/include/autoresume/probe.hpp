#pragma once
// Does a node's slurmd answer? A TCP connection to its port, all nodes in
// parallel within one deadline. A killed slurmd refuses at once, a dead host
// times out; a stopped (frozen) process still completes the handshake in
// the kernel, so a plain probe does not see a freeze. A deep probe also
// sends an empty Slurm message and waits for slurmd to read and reject it
// (close the connection): only a running slurmd does that, at the cost of
// one error line in its log per probe.
//
// The controller probes the nodes under protected steps; node agents probe
// a suspect for it from their own nodes (a second vantage point).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ar {

struct ProbeTarget {
  std::string address;  // NodeAddr: a name or a numeric address
  std::uint16_t port = 0;
};

enum class ProbeDepth { connect, deep };

// What one probe found. `unknown`: the prober itself failed (the name did
// not resolve, no socket could be made, no route from this host): no word
// about the node, never counted as its silence.
enum class ProbeResult { answered, silent, unknown };

std::string_view to_string(ProbeResult result);
std::optional<ProbeResult> parse_probe_result(std::string_view text);

// One result per target, in order: answered if a connection was accepted
// (and, deep, the message read and the connection closed by slurmd).
std::vector<ProbeResult> probe_all(const std::vector<ProbeTarget>& targets,
                                   std::chrono::milliseconds timeout,
                                   ProbeDepth depth = ProbeDepth::connect);

}  // namespace ar
