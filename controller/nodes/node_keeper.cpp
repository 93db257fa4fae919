#include "nodes/node_keeper.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <stdexcept>

#include "autoresume/resume.hpp"
#include "log.hpp"
#include "nodes/probe.hpp"
#include "nodes/provider.hpp"

namespace ar {

namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::seconds;

double as_seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

bool wants_replacement(const slurm::NodeInfo& node) {
  return (node.fail || node.down) &&
         (node.reason.starts_with("Action:Replace") || node.reason.starts_with("auto-resume:"));
}

// The reasons `auto-resume replace` marks a node with. "Action:Replace" alone
// is the seeds' admin mark (jobs finish first); with "admin: ..." it reads
// as a failed check to the resume engine, which moves protected steps off
// the node at once.
constexpr const char* kWaitReason = "Action:Replace";
constexpr const char* kNowReason = "Action:Replace admin: replacement requested (--now)";
constexpr const char* kForceReason = "Action:Replace admin: replacement forced (--force)";
// How long --force waits for the resume engine to move protected steps off
// the node before it sets the node DOWN anyway.
constexpr seconds kForceGrace{30};
// A replacement record this young may be newer than the node list in hand.
constexpr seconds kFreshRecord{5};

}  // namespace

NodeKeeper::NodeKeeper(Store& store, const DaemonConfig& config) : store_(store), config_(config) {}

NodeKeeper::~NodeKeeper() {
  // Provider calls in flight are stopped (a restarted controller makes them
  // again): shutting down must not wait for provider_timeout.
  if (!calls_.empty() || !orphans_.empty()) cancel_commands();
  for (auto& [node, call] : calls_)
    if (call.valid()) call.wait();
  for (auto& call : orphans_)
    if (call.valid()) call.wait();
}

void NodeKeeper::heartbeat(const std::string& node, bool stopping) {
  std::lock_guard lock(mutex_);
  if (!known_.empty() && !known_.contains(node))
    throw std::invalid_argument("slurmctld does not know node '" + node +
                                "' (start the agent with --node NAME as slurm.conf names it)");
  if (stopping)
    heard_.erase(node);
  else
    heard_[node] = Clock::now();
}

std::map<std::string, double> NodeKeeper::heartbeat_ages() {
  std::lock_guard lock(mutex_);
  std::map<std::string, double> out;
  const auto now = Clock::now();
  for (const auto& [node, at] : heard_) out[node] = as_seconds(now - at);
  return out;
}

std::string NodeKeeper::request_replace(const std::string& node, const std::string& mode) {
  const char* reason = mode == "wait"    ? kWaitReason
                       : mode == "now"   ? kNowReason
                       : mode == "force" ? kForceReason
                                         : nullptr;
  if (reason == nullptr)
    throw std::invalid_argument("unknown mode '" + mode + "' (known: wait, now, force)");
  slurm::NodeWatcher watcher;
  std::optional<slurm::NodeInfo> info;
  for (const auto& n : watcher.load())
    if (n.name == node) info = n;
  if (!info) throw std::invalid_argument("slurmctld does not know node '" + node + "'");
  // A replacement under way goes on; one that failed may be asked again.
  if (const auto current = store_.node_repair(node);
      current && current->state != node_state::kFailed)
    return fmt::format("{} is being replaced already ({}, requested as '{}')", node, current->state,
                       current->mode);
  if (!can_replace(config_))
    throw std::invalid_argument(fmt::format(
        "provider={} cannot replace nodes (set local_restart_command or use provider=command)",
        to_string(config_.provider)));
  // The mark first: the engine finds the mode in the reason if it looks
  // before the record below is written, and never sees a waiting record on
  // an unmarked node.
  slurm::set_node_fail(node, reason);
  NodeRepair repair{node, node_state::kWaiting, reason, mode, info->slurmd_start_time, 0,
                    0,    unix_now(),           ""};
  const auto what = mode == "wait" ? "running jobs finish first"
                    : mode == "now"
                        ? "protected steps on it are resumed elsewhere now, other jobs finish"
                        : "protected steps on it are resumed elsewhere, other jobs are killed";
  const EventSpec event{"replace_requested",
                        fmt::format("{} marked FAIL ({}): {}", node, reason, what)};
  if (const auto current = store_.node_repair(node);
      current && current->state == node_state::kFailed)
    store_.save_node_repair(repair, event);  // asked again after a failure
  else
    store_.add_node_repair(repair, event);  // unless the engine recorded it meanwhile
  log::info("{}: replacement requested ({})", node, mode);
  return fmt::format("{} marked FAIL with reason '{}': {}, then the {} provider replaces it", node,
                     reason, what, to_string(config_.provider));
}

bool NodeKeeper::is_spare(const slurm::NodeInfo& node) {
  return node.drain && node.reason == kSpareReason && !node.fail && !node.down &&
         !node.not_responding && !node.allocated && !node.completing;
}

void NodeKeeper::tick(const NodeMap& nodes, const std::set<std::string>& protected_nodes) {
  {
    std::lock_guard lock(mutex_);
    known_.clear();
    for (const auto& [name, node] : nodes) known_.insert(name);
  }
  // Each part on its own: one that fails (slurmctld refusing a change) must
  // not hold up the others, nor the resume engine after them.
  auto guarded = [](const char* what, const auto& part) {
    try {
      part();
    } catch (const std::exception& e) {
      log::warn("{}: {}", what, e.what());
    }
  };
  guarded("heartbeats", [&] { watch_heartbeats(nodes); });
  guarded("replacements", [&] { find_new(nodes); });
  if (config_.provider == ProviderKind::spares)
    guarded("spares", [&] { keep_spares(nodes, protected_nodes); });
  // Provider calls of replacements that were dropped meanwhile.
  std::erase_if(orphans_, [](std::future<std::string>& call) {
    return call.wait_for(seconds{0}) == std::future_status::ready;
  });
  for (auto& repair : store_.node_repairs()) {
    try {
      advance(repair, nodes, protected_nodes);
    } catch (const std::exception& e) {
      // Asked again at the next tick; said once while it persists.
      if (repair.detail != e.what()) {
        repair.detail = e.what();
        save(repair, "error", e.what());
      }
    }
  }
}

void NodeKeeper::watch_heartbeats(const NodeMap& nodes) {
  if (config_.heartbeat_timeout.count() == 0) return;
  const auto now = Clock::now();
  const auto gap = last_tick_ == Clock::time_point{} ? Clock::duration{} : now - last_tick_;
  last_tick_ = now;
  // Late: past half the timeout. The crowd guard counts late nodes, so that
  // when every agent falls silent at once (the controller's network) the
  // crowd shows before the first deadline runs out, however the agents'
  // intervals happen to be spread.
  std::vector<std::string> late;
  std::vector<std::string> silent;
  std::size_t heard = 0;
  {
    std::lock_guard lock(mutex_);
    // The controller itself stood still (stopped, starved, swapped out):
    // heartbeats that came meanwhile may not be counted yet.
    const auto stall = std::max<Clock::duration>(seconds{2}, config_.heartbeat_timeout / 2);
    if (gap > stall) {
      for (auto& [node, at] : heard_) at = now;
      const auto detail = fmt::format(
          "the controller stood still for {:.1f} s: every node's heartbeat deadline starts again",
          as_seconds(gap));
      log::warn("heartbeats: {}", detail);
      store_.add_node_event("", {"stalled", detail});
      return;
    }
    heard = heard_.size();
    for (const auto& [node, at] : heard_) {
      if (now - at <= config_.heartbeat_timeout / 2) continue;
      const auto it = nodes.find(node);
      if (it == nodes.end() || it->second->fail || it->second->down) continue;  // out already
      late.push_back(node);
      if (now - at > config_.heartbeat_timeout) silent.push_back(node);
    }
  }
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
          late.size(), heard, join(late), config_.heartbeat_max_silent_percent);
      log::warn("heartbeats: {}", detail);
      store_.add_node_event("", {"heartbeat_crowd", detail});
    }
    return;
  }
  if (late.empty()) crowd_said_ = false;
  // A direct look at each silent node's slurmd, at most once per timeout
  // while it stays silent and answers (each look is an error line in
  // slurmd's log); not at nodes being replaced.
  std::erase_if(silent, [&](const std::string& node) {
    const auto it = probed_.find(node);
    return (it != probed_.end() && now - it->second < config_.heartbeat_timeout) ||
           store_.node_repair(node);
  });
  if (silent.empty()) return;
  std::vector<ProbeTarget> targets;
  for (const auto& node : silent) {
    const auto& info = *nodes.at(node);
    targets.push_back({info.address, info.port});
    probed_[node] = now;
  }
  const auto answered = probe_all(targets, milliseconds{1000}, ProbeDepth::deep);
  for (std::size_t i = 0; i < silent.size(); ++i) {
    const auto& node = silent[i];
    double age = 0;
    {
      std::lock_guard lock(mutex_);
      const auto it = heard_.find(node);
      if (it == heard_.end()) continue;  // said goodbye meanwhile
      age = as_seconds(Clock::now() - it->second);
    }
    if (age * 1000 <= static_cast<double>(config_.heartbeat_timeout.count()))
      continue;  // heard again during the probe
    if (answered[i]) {
      if (late_said_.insert(node).second)
        store_.add_node_event(
            node, {"heartbeat_late",
                   fmt::format("no heartbeat from {} for {:.0f} s, but its slurmd answers: not "
                               "marked (is its agent running?)",
                               node, age)});
      continue;
    }
    const auto reason = fmt::format(
        "Action:Replace heartbeat: no heartbeat for {:.0f} s and slurmd does not answer", age);
    try {
      slurm::set_node_fail(node, reason);
    } catch (const std::exception& e) {
      log::warn("{}: cannot mark it FAIL ({}): {}", node, reason, e.what());
      continue;  // tried again at a later look
    }
    {
      std::lock_guard lock(mutex_);
      heard_.erase(node);  // watched again once its agent is heard again
    }
    probed_.erase(node);
    log::warn("{}: marked FAIL: {}", node, reason);
    store_.add_node_event(node, {"marked", fmt::format("{} marked FAIL: {}", node, reason)});
  }
}

void NodeKeeper::find_new(const NodeMap& nodes) {
  for (const auto& [name, node] : nodes) {
    if (!wants_replacement(*node)) {
      no_provider_said_.erase(name);
      continue;
    }
    if (store_.node_repair(name)) continue;
    if (!can_replace(config_)) {
      if (no_provider_said_.insert(name).second)
        store_.add_node_event(
            name, {"no_provider", fmt::format("{} is marked for replacement ({}), but provider={} "
                                              "cannot replace nodes; it stays out",
                                              name, node->reason, to_string(config_.provider))});
      continue;
    }
    const auto mode = node->down || node->reason == kForceReason ? "force"
                      : node->reason == kWaitReason              ? "wait"
                                                                 : "now";
    NodeRepair repair{
        name, node_state::kWaiting, node->reason, mode, node->slurmd_start_time, 0, 0, unix_now(),
        ""};
    store_.add_node_repair(
        repair,
        {"replace_requested",
         fmt::format("{} is {} ({}): the {} provider replaces it once no job runs on it", name,
                     node->down ? "DOWN" : "FAIL", node->reason, to_string(config_.provider))});
  }
}

void NodeKeeper::advance(NodeRepair& repair, const NodeMap& nodes,
                         const std::set<std::string>& protected_nodes) {
  const auto& name = repair.node;
  const auto it = nodes.find(name);
  // A replacement dropped while its provider call runs: the call is left
  // to end by itself (its future polled, never waited for here).
  auto drop = [&](const std::string& why) {
    if (const auto call = calls_.find(name); call != calls_.end()) {
      orphans_.push_back(std::move(call->second));
      calls_.erase(call);
    }
    store_.remove_node_repair(name, {"replace_dropped", why});
  };
  if (it == nodes.end()) {
    drop(name + " is no longer in slurm.conf");
    return;
  }
  const auto& node = *it->second;
  // A node that is in service again (an admin resumed it; a slurmd came
  // back with ReturnToService=2) is not replaced: not while the replacement
  // waits, failed, or waits to ask the provider again. A record younger than
  // a few seconds may be newer than the node list, so it waits a little.
  const bool in_service = !node.fail && !node.down;
  const bool between_calls = repair.state == node_state::kReplacing && !calls_.contains(name);
  if (in_service && unix_now() - repair.started_at >= kFreshRecord.count() &&
      (repair.state == node_state::kWaiting || repair.state == node_state::kFailed ||
       between_calls)) {
    drop(fmt::format("{} was put back in service {}", name,
                     repair.state == node_state::kFailed ? "after its replacement failed"
                                                         : "before it was replaced"));
    return;
  }
  if (repair.state == node_state::kFailed) return;  // an admin's now
  if (repair.state == node_state::kWaiting) {
    if (repair.mode == "force" && !node.down) {
      const auto waited = unix_now() - repair.started_at;
      if (protected_nodes.contains(name) && waited < kForceGrace.count()) return;
      slurm::set_node_down(name, repair.reason);
      save(repair, "forced", fmt::format("{} set DOWN: the jobs left on it are killed", name));
      return;
    }
    if (node.allocated || node.completing) {
      if (repair.detail != "jobs") {
        repair.detail = "jobs";
        save(repair, "waiting", fmt::format("waiting for the jobs on {} to end", name));
      }
      return;
    }
    repair.state = node_state::kReplacing;
    repair.detail.clear();
    repair.next_try = unix_now();
    save(repair, "jobs_gone", fmt::format("no job runs on {}: replacing it", name));
  }
  if (repair.state == node_state::kReplacing) {
    auto call = calls_.find(name);
    if (call == calls_.end()) {
      if (unix_now() < repair.next_try) return;
      if (repair.attempts >= static_cast<std::int64_t>(config_.provider_retries)) {
        // Its last call was cut short by a restart of the controller.
        repair.state = node_state::kFailed;
        save(repair, "replace_failed",
             fmt::format("the replacement of {} failed after {} tries; the node stays out for an "
                         "admin: {}",
                         name, repair.attempts,
                         repair.detail.empty() ? "the controller restarted during the last try"
                                               : repair.detail));
        return;
      }
      ++repair.attempts;
      repair.called_at = unix_now();
      save(repair, "provider",
           fmt::format("asking the {} provider to replace {} (try {} of {})",
                       to_string(config_.provider), name, repair.attempts,
                       config_.provider_retries));
      // On a thread of its own: a slow provider must not hold up detection.
      calls_.emplace(name, std::async(std::launch::async, replace_node, std::cref(config_), name));
      return;
    }
    if (call->second.wait_for(seconds{0}) != std::future_status::ready) return;
    const auto error = call->second.get();
    calls_.erase(call);
    if (error.empty()) {
      repair.state = node_state::kReturning;
      repair.detail.clear();
      // The new instance must register within register_timeout.
      repair.next_try = unix_now() + (config_.register_timeout.count() + 999) / 1000;
      save(repair, "provider_done",
           fmt::format("the provider replaced {}; waiting for its new instance to register", name));
      return;
    }
    repair.detail = error;
  } else if (repair.state == node_state::kReturning) {
    // The new instance: a slurmd started since the provider's call (not one
    // that restarted by itself before it) and answering slurmctld.
    if (node.slurmd_start_time != repair.instance && node.slurmd_start_time >= repair.called_at &&
        !node.not_responding) {
      const auto short_of = config_.provider == ProviderKind::spares ? short_of_spares(name, nodes)
                                                                     : std::vector<std::string>{};
      // Only the replacement's own mark is lifted: an admin's drain set
      // meanwhile (other reason) stays, and so does the node.
      const bool ours = node.reason == repair.reason || wants_replacement(node);
      if (ours && (node.fail || node.down || node.drain)) slurm::resume_node(name);
      if (ours && !short_of.empty()) slurm::set_node_drain(name, kSpareReason);
      store_.remove_node_repair(
          name, {"replaced",
                 fmt::format("{} is back in service: a new instance (slurmd started "
                             "at {}) replaced the old one{}",
                             name, node.slurmd_start_time,
                             !ours ? ", left as an admin set it meanwhile (" + node.reason + ")"
                             : short_of.empty() ? ""
                                                : ", kept as a spare of " + join(short_of))});
      log::info("{}: replaced", name);
      return;
    }
    if (unix_now() < repair.next_try) return;
    repair.detail = fmt::format("{} did not register again within register_timeout={} s", name,
                                config_.register_timeout.count() / 1000);
  }
  // The provider failed (or its node never came back): again after a
  // backoff, until provider_retries calls have failed.
  if (repair.attempts >= static_cast<std::int64_t>(config_.provider_retries)) {
    repair.state = node_state::kFailed;
    log::error("{}: replacement failed after {} tries: {}", name, repair.attempts, repair.detail);
    save(repair, "replace_failed",
         fmt::format("the replacement of {} failed after {} tries; the node stays out for an "
                     "admin: {}",
                     name, repair.attempts, repair.detail));
    return;
  }
  auto delay = duration_cast<seconds>(config_.provider_backoff);
  for (std::int64_t i = 1; i < repair.attempts && delay < seconds{600}; ++i) delay *= 2;
  repair.state = node_state::kReplacing;
  repair.next_try = unix_now() + std::min<std::int64_t>(delay.count(), 600);
  save(repair, "provider_failed",
       fmt::format("replacing {} failed (try {} of {}; again in {} s): {}", name, repair.attempts,
                   config_.provider_retries, repair.next_try - unix_now(), repair.detail));
}

void NodeKeeper::save(NodeRepair& repair, const std::string& kind, const std::string& detail) {
  store_.save_node_repair(repair, {kind, detail});
}

std::vector<std::string> NodeKeeper::short_of_spares(const std::string& node,
                                                     const NodeMap& nodes) {
  if (partitions_.empty()) partitions_ = slurm::partitions();
  std::vector<std::string> out;
  for (const auto& [partition, members] : partitions_) {
    if (std::ranges::find(members, node) == members.end()) continue;
    const auto have = std::ranges::count_if(members, [&](const std::string& m) {
      const auto it = nodes.find(m);
      return it != nodes.end() && is_spare(*it->second);
    });
    if (static_cast<unsigned>(have) < config_.spares) out.push_back(partition);
  }
  return out;
}

void NodeKeeper::keep_spares(const NodeMap& nodes, const std::set<std::string>& protected_nodes) {
  // Partitions change rarely; read them again now and then.
  if (partitions_.empty() || Clock::now() - partitions_read_ > seconds{60}) {
    partitions_ = slurm::partitions();
    partitions_read_ = Clock::now();
  }
  std::set<std::string> drained;  // this tick's: the node map does not show them yet
  for (const auto& [partition, members] : partitions_) {
    auto have = static_cast<unsigned>(std::ranges::count_if(members, [&](const std::string& m) {
      const auto it = nodes.find(m);
      return drained.contains(m) || (it != nodes.end() && is_spare(*it->second));
    }));
    while (have < config_.spares) {
      const slurm::NodeInfo* pick = nullptr;
      for (const auto& m : members) {
        const auto it = nodes.find(m);
        if (it == nodes.end() || drained.contains(m) || protected_nodes.contains(m)) continue;
        const auto& n = *it->second;
        if (!n.idle || n.drain || n.fail || n.down || n.not_responding || n.completing) continue;
        if (store_.node_repair(m)) continue;
        pick = &n;
        break;
      }
      if (pick == nullptr) {
        if (short_said_.insert(partition).second)
          store_.add_node_event(
              "", {"spares_short", fmt::format("partition {} has {} of {} spares and no idle node "
                                               "to add",
                                               partition, have, config_.spares)});
        break;
      }
      short_said_.erase(partition);
      slurm::set_node_drain(pick->name, kSpareReason);
      drained.insert(pick->name);
      ++have;
      store_.add_node_event(
          pick->name, {"spare_added", fmt::format("{} drained as a spare of partition {} "
                                                  "({} of {})",
                                                  pick->name, partition, have, config_.spares)});
    }
  }
}

}  // namespace ar
