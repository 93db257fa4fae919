// The node keeper's heartbeats: node agents say they are alive; a node
// heard from and then silent, whose slurmd does not answer either, is
// marked for replacement (node_keeper.hpp has the rules and the guards).

#include <fmt/core.h>

#include <algorithm>
#include <stdexcept>
#include <utility>

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

void NodeKeeper::heartbeat(const std::string& node, bool stopping, const std::string& peer,
                           std::chrono::milliseconds interval) {
  check_origin(node, peer);
  std::lock_guard lock(mutex_);
  if (stopping) {
    heard_.erase(node);
    return;
  }
  const auto known = known_.find(node);
  heard_[node] = {clock_.now(), known == known_.end() ? 0 : known->second.instance,
                  interval.count() > 0 ? interval : milliseconds{proto::kDefaultHeartbeatInterval}};
}

NodeKeeper::Life NodeKeeper::life_of(const std::string& node) {
  std::lock_guard lock(mutex_);
  const auto it = heard_.find(node);
  if (it == heard_.end()) return {};
  const auto age = clock_.now() - it->second.at;
  // A fresh heartbeat is the host's life, whatever slurmd instance it came
  // under (one restarting registers anew before the agent's next beat).
  if (age <= fresh_for(it->second)) return {AgentView::beating, as_seconds(age)};
  // The silence of an older instance's agent (the node rebooted or was
  // replaced since) says nothing of this one.
  const auto known = known_.find(node);
  if (known != known_.end() && known->second.instance != 0 && it->second.instance != 0 &&
      known->second.instance != it->second.instance)
    return {};
  return {AgentView::silent, as_seconds(age)};
}

bool NodeKeeper::heartbeat_at_hand(const std::string& node, const std::string& peer) {
  try {
    return check_origin(node, peer, false);
  } catch (const std::exception&) {
    return true;  // refused without a lookup
  }
}

bool NodeKeeper::check_origin(const std::string& node, const std::string& peer, bool resolve) {
  Whereabouts where;
  {
    std::lock_guard lock(mutex_);
    if (!looked_)
      throw HeartbeatRefused(HeartbeatRefused::Why::not_yet,
                             "the controller has not loaded the nodes from slurmctld yet");
    const auto it = known_.find(node);
    if (it == known_.end())
      throw std::invalid_argument("slurmctld does not know node '" + node +
                                  "' (start the agent with --node NAME as slurm.conf names it)");
    where = it->second;
  }
  const auto from = origin::parse(peer);
  if (!from)
    throw HeartbeatRefused(
        HeartbeatRefused::Why::wrong_address,
        fmt::format("a heartbeat for {} from '{}', not a numeric address", node, printable(peer)));
  std::vector<std::string> seen;  // what the node's addresses are, for the refusal
  bool ok = false;
  if (const auto it = binds_.find(node); it != binds_.end())
    for (const auto& network : it->second) {
      ok = ok || network.contains(*from);
      seen.push_back(network.str() + " (heartbeat_bind)");
    }
  for (const auto& [name, what] :
       {std::pair{where.address, "NodeAddr"}, std::pair{where.hostname, "NodeHostname"}}) {
    if (ok || name.empty()) continue;
    std::string error;
    const auto found = addresses_of(name, error, resolve);
    if (!found) return false;  // a lookup, which the caller does not want
    const auto& addresses = *found;
    ok = std::ranges::find(addresses, *from) != addresses.end();
    std::vector<std::string> texts;
    for (const auto& a : addresses) texts.push_back(a.to_string());
    const auto resolved = texts.size() == 1 && texts.front() == name ? ""
                          : error.empty()                            ? ": " + join(texts, ", ")
                                          : ": does not resolve: " + error;
    seen.push_back(fmt::format("{} ({}{})", name, what, resolved));
  }
  if (!ok)
    throw HeartbeatRefused(
        HeartbeatRefused::Why::wrong_address,
        fmt::format("a heartbeat for {} from {}, which is not the node's address: {} is at {} "
                    "(an agent on another host started with --node {}? An address of the node's "
                    "own can be added with heartbeat_bind)",
                    node, from->to_string(), node, join(seen, ", "), node));
  if (from->is_loopback()) {
    std::lock_guard lock(mutex_);
    // Named for the first few nodes only (a benchmark's thousands would
    // fill the log).
    constexpr std::size_t kLoopbackNamed = 3;
    if (loopback_said_.say(node) && loopback_said_.size() <= kLoopbackNamed + 1)
      log::warn(
          "heartbeats: {} is heard over loopback ({}): its agent runs on the controller's host, "
          "where any local process may send from that address (fine for a local test "
          "cluster){}",
          node, from->to_string(),
          loopback_said_.size() > kLoopbackNamed ? "; the next nodes heard so are not named" : "");
  }
  return true;
}

std::optional<std::vector<origin::Address>> NodeKeeper::addresses_of(const std::string& name,
                                                                     std::string& error,
                                                                     bool resolve) {
  constexpr std::chrono::seconds kLookupRetry{30};
  constexpr std::chrono::minutes kLookupTtl{5};
  constexpr std::chrono::seconds kLookupTimeout{1};
  if (const auto numeric = origin::parse(name)) return std::vector{*numeric};
  const auto now = clock_.now();
  {
    std::lock_guard lock(mutex_);
    const auto it = lookups_.find(name);
    if (it != lookups_.end() &&
        now - it->second.at < (it->second.error.empty() ? Steady::duration(kLookupTtl)
                                                        : Steady::duration(kLookupRetry))) {
      error = it->second.error;
      return it->second.addresses;
    }
  }
  if (!resolve) return std::nullopt;
  // Outside the lock: a slow lookup holds up this heartbeat only.
  Lookup lookup;
  lookup.addresses = origin::resolve(name, kLookupTimeout, lookup.error);
  lookup.at = now;
  error = lookup.error;
  std::lock_guard lock(mutex_);
  if (lookups_.size() > 2 * known_.size() + 16) lookups_.clear();  // names of nodes gone
  lookups_[name] = lookup;
  return lookup.addresses;
}

std::map<std::string, double> NodeKeeper::heartbeat_ages() {
  std::lock_guard lock(mutex_);
  std::map<std::string, double> out;
  const auto now = clock_.now();
  for (const auto& [node, heard] : heard_) out[node] = as_seconds(now - heard.at);
  return out;
}

bool NodeKeeper::collect_late(const NodeMap& nodes, std::vector<std::string>& late,
                              std::vector<std::string>& armed, std::vector<std::string>& silent,
                              std::size_t& heard) {
  const auto now = clock_.now();
  const auto gap = last_tick_ == Steady::time_point{} ? Steady::duration{} : now - last_tick_;
  last_tick_ = now;
  std::lock_guard lock(mutex_);
  // The controller itself stood still (stopped, starved, swapped out):
  // heartbeats that came meanwhile may not be counted yet.
  const auto stall = std::max<Steady::duration>(seconds{2}, config_.heartbeat_timeout / 2);
  if (gap > stall) {
    if (heard_.empty()) {
      // No agent heard: no deadline to start again, so no event (a cluster
      // without node agents would show stalls that changed nothing).
      log::info(
          "heartbeats: the controller stood still for {:.1f} s (no node agent heard: no deadline "
          "to restart)",
          as_seconds(gap));
      return false;
    }
    for (auto& [node, last] : heard_) last.at = now;
    const auto detail = fmt::format(
        "the controller stood still for {:.1f} s: every node's heartbeat deadline starts again",
        as_seconds(gap));
    log::warn("heartbeats: {}", detail);
    store_.add_node_event("", {EventKind::stalled, detail});
    return false;
  }
  // A node back as a new instance (replaced, rebooted): the silence of the
  // old one's agent is not held against it; it is watched again once its
  // own agent is heard (one heard fresh when the new instance came speaks
  // for it already: tick).
  std::erase_if(heard_, [&](const auto& entry) {
    const auto it = nodes.find(entry.first);
    return it != nodes.end() && it->second->slurmd_start_time != 0 &&
           it->second->slurmd_start_time != entry.second.instance;
  });
  // Late: past half the timeout. The crowd guard counts late nodes, so that
  // when every agent falls silent at once (the controller's network) the
  // crowd shows before the first deadline runs out, however the agents'
  // intervals happen to be spread.
  heard = heard_.size();
  const auto armed_after = [&](const Heard& entry) {
    // Not while the node's own beats are fresh (a short timeout), and at
    // the deadline at the latest.
    return std::min<Steady::duration>(
        config_.heartbeat_timeout,
        std::max<Steady::duration>(config_.heartbeat_timeout - arm_lead(config_.heartbeat_timeout),
                                   fresh_for(entry)));
  };
  for (const auto& [node, last] : heard_) {
    if (now - last.at <= config_.heartbeat_timeout / 2) continue;
    const auto it = nodes.find(node);
    if (it == nodes.end() || it->second->fail || it->second->down) continue;  // out already
    late.push_back(node);
    if (now - last.at > armed_after(last)) armed.push_back(node);
    if (now - last.at > config_.heartbeat_timeout) silent.push_back(node);
  }
  return true;
}

std::optional<double> NodeKeeper::silence_of(const std::string& node) {
  std::lock_guard lock(mutex_);
  const auto it = heard_.find(node);
  if (it == heard_.end()) return std::nullopt;
  return as_seconds(clock_.now() - it->second.at);
}

void NodeKeeper::watch_heartbeats(const NodeMap& nodes) {
  if (config_.heartbeat_timeout.count() == 0) return;
  std::vector<std::string> late;
  std::vector<std::string> armed;
  std::vector<std::string> silent;
  std::size_t heard = 0;
  if (!collect_late(nodes, late, armed, silent, heard)) return;
  const auto in = [](const std::vector<std::string>& list) {
    return [&list](const std::string& n) { return std::ranges::find(list, n) != list.end(); };
  };
  const auto is_silent = in(silent);
  const auto is_armed = in(armed);
  late_said_.forget_if([&](const std::string& n) { return !is_silent(n); });
  gate_.settle("heartbeat", {silent.begin(), silent.end()});
  std::erase_if(probed_, [&](const auto& entry) { return !is_armed(entry.first); });
  for (auto it = cross_checking_.begin(); it != cross_checking_.end();) {
    // A mark under way (or in) makes the node FAIL, so no longer silent:
    // it is taken by settle_cross_checks.
    if (is_armed(it->first) || writes_.has("mark " + it->first)) {
      ++it;
      continue;
    }
    forget_peers(it->first, PeerAsker::heartbeats);  // heard again, or out already
    it = cross_checking_.erase(it);
  }
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
  // A direct look at each armed node's slurmd (arm_lead before its
  // deadline), again once it is silent if that look found slurmd
  // answering, then at most once per timeout while it stays silent and
  // answers (each look is an error line in slurmd's log); not at nodes
  // being replaced.
  const auto now = clock_.now();
  const auto all_armed = armed;
  std::erase_if(armed, [&](const std::string& node) {
    if (cross_checking_.contains(node) || store_.node_repair(node)) return true;
    const auto it = probed_.find(node);
    if (it == probed_.end()) return false;
    if (it->second.early && is_silent(node)) return false;
    return now - it->second.at < config_.heartbeat_timeout;
  });
  // One round at a time; a node left out is looked at by the next.
  if (!armed.empty() && !deep_probes_.has(kDeepProbe)) mark_silent(std::move(armed), silent, nodes);
  take_deep_probe(all_armed);
}

void NodeKeeper::mark_silent(std::vector<std::string> armed, const std::vector<std::string>& silent,
                             const NodeMap& nodes) {
  DeepRound round;
  for (const auto& node : armed) {
    const auto& info = *nodes.at(node);
    round.targets.push_back({info.address, info.port});
    probed_[node] = {clock_.now(), std::ranges::find(silent, node) == silent.end()};
  }
  round.silent = std::move(armed);
  // On a thread of its own (1 s at most): taken at a later look.
  deep_probes_.run(kDeepProbe, [this, round = std::move(round)]() mutable {
    round.results = prober_.probe(round.targets, milliseconds{1000}, ProbeDepth::deep);
    return round;
  });
}

void NodeKeeper::take_deep_probe(const std::vector<std::string>& armed) {
  if (auto outcome = deep_probes_.take(kDeepProbe)) {
    const auto round = outcome->get();
    for (std::size_t i = 0; i < round.silent.size(); ++i) {
      const auto& node = round.silent[i];
      const auto silence = silence_of(node);
      if (!silence) continue;  // said goodbye meanwhile
      const auto age = *silence;
      const auto timeout = as_seconds(config_.heartbeat_timeout);
      if (std::ranges::find(armed, node) == armed.end()) continue;  // heard again meanwhile
      if (round.results.at(i) == ProbeResult::unknown) continue;    // the prober's own failure
      if (round.results.at(i) == ProbeResult::answered) {
        // Before the deadline: looked at again once it is silent.
        if (age > timeout && late_said_.say(node))
          store_.add_node_event(
              node, {EventKind::heartbeat_late,
                     fmt::format("no heartbeat from {} for {:.0f} s, but its slurmd answers: not "
                                 "marked (is its agent running?)",
                                 node, age)});
        continue;
      }
      if (const auto it = probed_.find(node); it != probed_.end())
        it->second.early = false;  // not looked at again at the deadline
      // Silent both ways, as seen from here: other nodes' agents look too.
      ask_peers(node, {round.targets[i], {}, ProbeDepth::deep}, PeerAsker::heartbeats);
      cross_checking_[node] = age;
    }
  }
  settle_cross_checks();
}

void NodeKeeper::settle_cross_checks() {
  for (auto it = cross_checking_.begin(); it != cross_checking_.end();) {
    const auto& node = it->first;
    const auto check = cross_checked(node);
    if (check.view == PeerView::pending) {
      ++it;
      continue;
    }
    // The evidence came before the deadline (arm_lead): it stands once the
    // node is still silent then (heard again meanwhile, it is dropped by
    // watch_heartbeats). A mark under way is taken whatever its age now.
    const auto silence = silence_of(node);
    const bool writing = writes_.has("mark " + node);
    if (!silence && !writing) {  // said goodbye meanwhile
      forget_peers(node, PeerAsker::heartbeats);
      it = cross_checking_.erase(it);
      continue;
    }
    const auto age = silence.value_or(it->second);
    if (!writing && age * 1000 <= static_cast<double>(config_.heartbeat_timeout.count())) {
      ++it;
      continue;
    }
    if (check.view == PeerView::disputed) {
      if (late_said_.say(node))
        store_.add_node_event(
            node, {EventKind::heartbeat_late,
                   fmt::format("no heartbeat from {} for {:.0f} s and the controller cannot reach "
                               "its slurmd, but {}: not marked (the controller's route to it is "
                               "the likelier fault)",
                               node, age, check.detail)});
    } else if (!mark_unheard(node, age, check.detail)) {
      ++it;  // tried again at the next look
      continue;
    }
    forget_peers(node, PeerAsker::heartbeats);
    it = cross_checking_.erase(it);
  }
}

bool NodeKeeper::mark_unheard(const std::string& node, double age, const std::string& checked) {
  const auto key = "mark " + node;
  if (!writes_.has(key)) {
    if (slurm_away_) return false;  // tried again at the next look
    const auto reason = fmt::format(
        "Action:Replace heartbeat: no heartbeat for {:.0f} s and slurmd does not answer", age);
    if (!gate_.allow(Gate::Counted::mark, {node})) {
      gate_.would("heartbeat", node,
                  fmt::format("mark {} FAIL: no heartbeat for over heartbeat_timeout={} s and its "
                              "slurmd does not answer ({})",
                              node, config_.heartbeat_timeout.count() / 1000, checked));
      return true;  // looked at again after heartbeat_timeout
    }
    // On a thread of its own: taken at a later look.
    writes_.run(key, [this, node, reason] {
      slurm_.set_node_fail(node, reason);
      return reason;
    });
  }
  auto outcome = writes_.take(key);
  if (!outcome) return false;  // under way: looked at again at the next look
  std::string reason;
  try {
    reason = outcome->get();
  } catch (const std::exception& e) {
    // Said once while it fails the same way (slurmctld away: tried at each look).
    if (errors_said_.say(key, e.what())) log::warn("{}: cannot mark it FAIL: {}", node, e.what());
    gate_.settled(Gate::Counted::mark, {node});  // not done: it counts when it is
    return false;
  }
  errors_said_.forget(key);
  {
    std::lock_guard lock(mutex_);
    heard_.erase(node);  // watched again once its agent is heard again
  }
  probed_.erase(node);
  const auto detail = fmt::format("{} marked FAIL: {} ({})", node, reason, checked);
  log::audit({0, "heartbeat", ""}, name_of(EventKind::marked), detail);
  store_.add_node_event(node, {EventKind::marked, detail});
  return true;
}

}  // namespace ar
