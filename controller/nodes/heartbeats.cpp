// The node keeper's heartbeats: node agents say they are alive; a node
// heard from and then silent, whose slurmd does not answer either, is
// marked for replacement (node_keeper.hpp has the rules and the guards).

#include <fmt/core.h>

#include <algorithm>
#include <stdexcept>

#include "autoresume/resume.hpp"
#include "autoresume/text.hpp"
#include "log.hpp"
#include "nodes/node_keeper.hpp"

namespace ar {

namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

double as_seconds(Clock::Steady::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

void NodeKeeper::heartbeat(const std::string& node, bool stopping) {
  std::lock_guard lock(mutex_);
  if (!known_.empty() && !known_.contains(node))
    throw std::invalid_argument("slurmctld does not know node '" + node +
                                "' (start the agent with --node NAME as slurm.conf names it)");
  if (stopping)
    heard_.erase(node);
  else
    heard_[node] = clock_.now();
}

std::map<std::string, double> NodeKeeper::heartbeat_ages() {
  std::lock_guard lock(mutex_);
  std::map<std::string, double> out;
  const auto now = clock_.now();
  for (const auto& [node, at] : heard_) out[node] = as_seconds(now - at);
  return out;
}

bool NodeKeeper::collect_late(const NodeMap& nodes, std::vector<std::string>& late,
                              std::vector<std::string>& silent, std::size_t& heard) {
  const auto now = clock_.now();
  const auto gap = last_tick_ == Steady::time_point{} ? Steady::duration{} : now - last_tick_;
  last_tick_ = now;
  std::lock_guard lock(mutex_);
  // The controller itself stood still (stopped, starved, swapped out):
  // heartbeats that came meanwhile may not be counted yet.
  const auto stall = std::max<Steady::duration>(seconds{2}, config_.heartbeat_timeout / 2);
  if (gap > stall) {
    for (auto& [node, at] : heard_) at = now;
    const auto detail = fmt::format(
        "the controller stood still for {:.1f} s: every node's heartbeat deadline starts again",
        as_seconds(gap));
    log::warn("heartbeats: {}", detail);
    store_.add_node_event("", {EventKind::stalled, detail});
    return false;
  }
  // Late: past half the timeout. The crowd guard counts late nodes, so that
  // when every agent falls silent at once (the controller's network) the
  // crowd shows before the first deadline runs out, however the agents'
  // intervals happen to be spread.
  heard = heard_.size();
  for (const auto& [node, at] : heard_) {
    if (now - at <= config_.heartbeat_timeout / 2) continue;
    const auto it = nodes.find(node);
    if (it == nodes.end() || it->second->fail || it->second->down) continue;  // out already
    late.push_back(node);
    if (now - at > config_.heartbeat_timeout) silent.push_back(node);
  }
  return true;
}

void NodeKeeper::watch_heartbeats(const NodeMap& nodes) {
  if (config_.heartbeat_timeout.count() == 0) return;
  std::vector<std::string> late;
  std::vector<std::string> silent;
  std::size_t heard = 0;
  if (!collect_late(nodes, late, silent, heard)) return;
  const auto is_silent = [&](const std::string& n) {
    return std::ranges::find(silent, n) != silent.end();
  };
  std::erase_if(late_said_, [&](const std::string& n) { return !is_silent(n); });
  std::erase_if(probed_, [&](const auto& entry) { return !is_silent(entry.first); });
  if (silent_crowd(late.size(), heard, config_.heartbeat_max_silent_percent)) {
    if (!crowd_said_) {
      crowd_said_ = true;
      const auto detail = fmt::format(
          "{} of {} nodes are silent at once ({}): the controller's own network is the likelier "
          "fault; none is marked (heartbeat_max_silent_percent={})",
          late.size(), heard, join(late, ","), config_.heartbeat_max_silent_percent);
      log::warn("heartbeats: {}", detail);
      store_.add_node_event("", {EventKind::heartbeat_crowd, detail});
    }
    return;
  }
  if (late.empty()) crowd_said_ = false;
  // A direct look at each silent node's slurmd, at most once per timeout
  // while it stays silent and answers (each look is an error line in
  // slurmd's log); not at nodes being replaced.
  const auto now = clock_.now();
  std::erase_if(silent, [&](const std::string& node) {
    const auto it = probed_.find(node);
    return (it != probed_.end() && now - it->second < config_.heartbeat_timeout) ||
           store_.node_repair(node);
  });
  if (!silent.empty()) mark_silent(std::move(silent), nodes);
}

void NodeKeeper::mark_silent(std::vector<std::string> silent, const NodeMap& nodes) {
  std::vector<ProbeTarget> targets;
  for (const auto& node : silent) {
    const auto& info = *nodes.at(node);
    targets.push_back({info.address, info.port});
    probed_[node] = clock_.now();
  }
  const auto answered = prober_.probe(targets, milliseconds{1000}, ProbeDepth::deep);
  for (std::size_t i = 0; i < silent.size(); ++i) {
    const auto& node = silent[i];
    double age = 0;
    {
      std::lock_guard lock(mutex_);
      const auto it = heard_.find(node);
      if (it == heard_.end()) continue;  // said goodbye meanwhile
      age = as_seconds(clock_.now() - it->second);
    }
    if (age * 1000 <= static_cast<double>(config_.heartbeat_timeout.count()))
      continue;  // heard again during the probe
    if (answered.at(i)) {
      if (late_said_.insert(node).second)
        store_.add_node_event(
            node, {EventKind::heartbeat_late,
                   fmt::format("no heartbeat from {} for {:.0f} s, but its slurmd answers: not "
                               "marked (is its agent running?)",
                               node, age)});
      continue;
    }
    const auto reason = fmt::format(
        "Action:Replace heartbeat: no heartbeat for {:.0f} s and slurmd does not answer", age);
    try {
      slurm_.set_node_fail(node, reason);
    } catch (const std::exception& e) {
      log::warn("{}: cannot mark it FAIL ({}): {}", node, reason, e.what());
      continue;  // tried again at a later look
    }
    {
      std::lock_guard lock(mutex_);
      heard_.erase(node);  // watched again once its agent is heard again
    }
    probed_.erase(node);
    const auto detail = fmt::format("{} marked FAIL: {}", node, reason);
    log::audit({0, "heartbeat", ""}, name_of(EventKind::marked), detail);
    store_.add_node_event(node, {EventKind::marked, detail});
  }
}

}  // namespace ar
