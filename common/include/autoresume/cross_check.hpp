#pragma once
// A node agent's cross-checks (docs/nodes.md): a heartbeat's reply may name
// nodes the controller cannot reach; the agent probes their slurmd from its
// own host and sends what it found at once. The node agent and the
// heartbeat load generator (bench/scale.sh) answer them the same way.

#include <cstdint>
#include <string>

#include "autoresume/client.hpp"
#include "autoresume/protocol.hpp"

namespace ar {

// Probes the nodes `reply` names (connect and deep probes, 1 s each) and
// sends what was found as heartbeats of `node`, a few rounds at most, while
// the replies ask for more. Throws as Client::send.
void answer_cross_checks(Client& client, const std::string& node, std::uint32_t interval_ms,
                         proto::HeartbeatReply reply);

}  // namespace ar
