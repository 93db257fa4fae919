// The node keeper's cross-checks: a node the controller cannot reach is
// probed by the agents of other nodes before anything marks it, so that the
// controller's own network trouble (a lost route, a blip) is not taken for
// the node's death (node_keeper.hpp has the views).

#include <fmt/core.h>

#include <algorithm>

#include "autoresume/text.hpp"
#include "nodes/node_keeper.hpp"

namespace ar {

namespace {

// At most this many suspects are cross-checked at once: more is a crowd,
// which the callers' own guards hold back anyway.
constexpr std::size_t kMaxSuspects = 64;
// Agents asked about one suspect.
constexpr std::size_t kAgentsPerSuspect = 2;

}  // namespace

std::vector<std::string> NodeKeeper::live_agents(const std::string& suspect,
                                                 std::span<const std::string> near) {
  const auto fresh = config_.heartbeat_timeout.count() > 0
                         ? Steady::duration(config_.heartbeat_timeout)
                         : Steady::duration(std::chrono::seconds{10});
  const auto now = clock_.now();
  auto live = [&](const std::string& node) {
    const auto it = heard_.find(node);
    return node != suspect && it != heard_.end() && now - it->second.at <= fresh;
  };
  std::vector<std::string> out;
  for (const auto& node : near)
    if (out.size() < kAgentsPerSuspect && live(node) && std::ranges::find(out, node) == out.end())
      out.push_back(node);
  for (const auto& [node, heard] : heard_)
    if (out.size() < kAgentsPerSuspect && live(node) && std::ranges::find(out, node) == out.end())
      out.push_back(node);
  return out;
}

void NodeKeeper::ask_peers(const std::string& suspect, const PeerAsk& ask, PeerAsker asker) {
  std::lock_guard lock(mutex_);
  if (const auto it = peer_checks_.find(suspect); it != peer_checks_.end()) {
    it->second.target = ask.target;
    if (ask.depth == ProbeDepth::deep) it->second.depth = ProbeDepth::deep;
    it->second.askers |= static_cast<unsigned>(asker);
    return;
  }
  if (peer_checks_.size() >= kMaxSuspects) return;
  peer_checks_[suspect] = {ask.target,   ask.depth,
                           clock_.now(), live_agents(suspect, ask.near),
                           {},           static_cast<unsigned>(asker)};
}

void NodeKeeper::forget_peers(const std::string& suspect, PeerAsker asker) {
  std::lock_guard lock(mutex_);
  const auto it = peer_checks_.find(suspect);
  if (it == peer_checks_.end()) return;
  it->second.askers &= ~static_cast<unsigned>(asker);
  if (it->second.askers == 0) peer_checks_.erase(it);
}

NodeKeeper::CrossCheck NodeKeeper::cross_checked(const std::string& suspect) {
  std::lock_guard lock(mutex_);
  const auto it = peer_checks_.find(suspect);
  if (it == peer_checks_.end()) return {PeerView::none, "no cross-check"};
  const auto& check = it->second;
  if (check.agents.empty()) return {PeerView::none, "no node agent to cross-check with"};
  std::vector<std::string> reach, miss;
  for (const auto& [agent, result] : check.found) {
    if (result == ProbeResult::answered) reach.push_back(agent);
    if (result == ProbeResult::silent) miss.push_back(agent);
  }
  if (!reach.empty())
    return {PeerView::disputed,
            fmt::format("the agent{} of {} reach{} its slurmd", reach.size() == 1 ? "" : "s",
                        join(reach, ", "), reach.size() == 1 ? "es" : "")};
  if (!miss.empty())
    return {PeerView::confirmed, fmt::format("the agent{} of {} cannot reach it either",
                                             miss.size() == 1 ? "" : "s", join(miss, ", "))};
  if (check.found.size() >= check.agents.size())
    return {PeerView::none, fmt::format("the agents of {} could not probe it (their own errors)",
                                        join(check.agents, ", "))};
  if (clock_.now() - check.asked_at >= kPeerWait)
    return {PeerView::none, fmt::format("no answer from the agents of {} within {} s",
                                        join(check.agents, ", "), kPeerWait.count())};
  return {PeerView::pending, fmt::format("asked the agents of {}", join(check.agents, ", "))};
}

std::vector<proto::PeerProbe> NodeKeeper::peer_work(
    const std::string& agent, const std::map<std::string, ProbeResult>& found) {
  std::lock_guard lock(mutex_);
  std::vector<proto::PeerProbe> work;
  for (auto& [suspect, check] : peer_checks_) {
    if (std::ranges::find(check.agents, agent) == check.agents.end()) continue;
    if (const auto it = found.find(suspect); it != found.end()) check.found[agent] = it->second;
    if (!check.found.contains(agent) && work.size() < proto::kMaxPeerProbes)
      work.push_back(
          {suspect, check.target.address, check.target.port, check.depth == ProbeDepth::deep});
  }
  return work;
}

}  // namespace ar
