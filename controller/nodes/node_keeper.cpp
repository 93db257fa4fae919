// The node keeper's replacements: nodes marked for replacement are found,
// wait for their jobs, are replaced by the provider and return to service
// (node_keeper.hpp has the whole flow). Heartbeats are in heartbeats.cpp,
// spares in spares.cpp.

#include "nodes/node_keeper.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <stdexcept>

#include "autoresume/text.hpp"
#include "log.hpp"
#include "nodes/provider.hpp"

namespace ar {

namespace {

using std::chrono::duration_cast;
using std::chrono::seconds;

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
// How long a returned node's old mark is told from a new one (old_mark).
constexpr seconds kReturnedMemory{600};

const char* reason_of(RepairMode mode) {
  switch (mode) {
    case RepairMode::wait:
      return kWaitReason;
    case RepairMode::now:
      return kNowReason;
    case RepairMode::force:
      return kForceReason;
  }
  return kWaitReason;
}

const char* effect_of(RepairMode mode) {
  switch (mode) {
    case RepairMode::wait:
      return "running jobs finish first";
    case RepairMode::now:
      return "protected steps on it are resumed elsewhere now, other jobs finish";
    case RepairMode::force:
      return "protected steps on it are resumed elsewhere, other jobs are killed";
  }
  return "";
}

// What the next step of a replacement would do, for a `would` event.
std::string held_step(const NodeRepair& repair, const slurm::NodeInfo& node,
                      const DaemonConfig& config) {
  const auto provider = to_string(config.provider);
  switch (repair.state) {
    case NodeRepairState::waiting:
      if (repair.mode == RepairMode::force && !node.down)
        return fmt::format("set {} DOWN (its jobs are killed) and have the {} provider replace it",
                           repair.node, provider);
      return fmt::format("have the {} provider replace {} once no job runs on it", provider,
                         repair.node);
    case NodeRepairState::replacing:
      return fmt::format("ask the {} provider to replace {}", provider, repair.node);
    case NodeRepairState::returning:
      return fmt::format("put {} back in service once its new instance has registered",
                         repair.node);
    case NodeRepairState::failed:
      break;
  }
  return "";
}

}  // namespace

NodeKeeper::NodeKeeper(Store& store, const DaemonConfig& config, slurm::SlurmApi& slurm,
                       const Clock& clock, Prober& prober, CommandRunner& runner,
                       OwnedElsewhere owned_elsewhere)
    : owned_elsewhere_(std::move(owned_elsewhere)),
      store_(store),
      config_(config),
      slurm_(slurm),
      clock_(clock),
      prober_(prober),
      runner_(runner),
      gate_(store, config, clock),
      binds_(origin::bind_map(config.heartbeat_bind)) {}

NodeKeeper::~NodeKeeper() {
  // Provider calls in flight are stopped (a restarted controller makes them
  // again): shutting down must not wait for provider_timeout.
  if (!calls_.empty() || !orphans_.empty()) runner_.cancel_all();
  for (auto& [node, call] : calls_)
    if (call.valid()) call.wait();
  for (auto& call : orphans_)
    if (call.valid()) call.wait();
}

std::string NodeKeeper::request_replace(const std::string& node, RepairMode mode, uid_t requester) {
  const char* reason = reason_of(mode);
  const auto info = slurm_.load_node(node);
  if (!info) throw std::invalid_argument("slurmctld does not know node '" + node + "'");
  // A replacement under way goes on; one that failed may be asked again.
  if (const auto current = store_.node_repair(node);
      current && current->state != NodeRepairState::failed)
    return fmt::format("{} is being replaced already ({}, requested as '{}')", node,
                       name_of(current->state), name_of(current->mode));
  if (!can_replace(config_))
    throw std::invalid_argument(fmt::format(
        "provider={} cannot replace nodes (set local_restart_command or use provider=command)",
        to_string(config_.provider)));
  if (const auto why = gate_.held()) {
    const auto what = fmt::format("mark {} FAIL ({}) and have the {} provider replace it", node,
                                  reason, to_string(config_.provider));
    gate_.would("replace", node, what);
    throw ActionsHeld(
        fmt::format("{}: would {}; nothing was done ({})", *why, what, held_advice(*why)));
  }
  // The mark first: the engine finds the mode in the reason if it looks
  // before the record below is written, and never sees a waiting record on
  // an unmarked node.
  slurm_.set_node_fail(node, reason);
  NodeRepair repair;
  repair.node = node;
  repair.reason = reason;
  repair.mode = mode;
  repair.instance = info->slurmd_start_time;
  repair.set_started(clock_.stamp());
  repair.requested_by = requester;
  const auto what = effect_of(mode);
  const EventSpec event{EventKind::replace_requested,
                        fmt::format("{} marked FAIL ({}): {}", node, reason, what)};
  log::audit(asker_of(repair), name_of(event.kind), event.detail);
  if (const auto current = store_.node_repair(node);
      current && current->state == NodeRepairState::failed)
    store_.save_node_repair(repair, event);  // asked again after a failure
  else
    store_.add_node_repair(repair, event);  // unless the engine recorded it meanwhile
  return fmt::format("{} marked FAIL with reason '{}': {}, then the {} provider replaces it", node,
                     reason, what, to_string(config_.provider));
}

void NodeKeeper::tick(const NodeMap& nodes, const std::set<std::string>& protected_nodes,
                      bool slurm_away, Steady::time_point nodes_read_at) {
  slurm_away_ = slurm_away;
  nodes_read_at_ = nodes_read_at;
  stale_for_repair_ = false;
  gate_.set_cluster_size(nodes.size());
  {
    std::lock_guard lock(mutex_);
    known_.clear();
    for (const auto& [name, node] : nodes)
      known_[name] = {node->address, node->hostname, node->slurmd_start_time};
    looked_ = true;
    // A node's new slurmd instance (slurmd restarted, the host rebooted)
    // seen while its agent's last heartbeat is fresh: that agent lives on
    // the host of the new instance, and speaks for it from now on (its
    // silence then counts against it). An agent silent since before the
    // new instance says nothing of it (life_of, collect_late).
    const auto now = clock_.now();
    for (auto& [name, heard] : heard_) {
      const auto it = known_.find(name);
      if (it != known_.end() && it->second.instance != 0 && it->second.instance != heard.instance &&
          now - heard.at <= fresh_for(heard))
        heard.instance = it->second.instance;
    }
  }
  // Each part on its own: one that fails (slurmctld refusing a change) must
  // not hold up the others, nor the resume engine after them.
  // Each said once while it fails the same way (the tick comes twice a
  // second), and once when it works again.
  auto guarded = [this](const char* what, const auto& part) {
    try {
      part();
      if (errors_said_.forget(what)) log::info("{}: working again", what);
    } catch (const std::exception& e) {
      if (errors_said_.say(what, e.what())) log::warn("{}: {}", what, e.what());
    }
  };
  guarded("heartbeats", [&] { watch_heartbeats(nodes); });
  // Provider calls of replacements that were dropped meanwhile.
  std::erase_if(orphans_, [](std::future<std::string>& call) {
    return call.wait_for(seconds{0}) == std::future_status::ready;
  });
  if (slurm_away) return;  // replacing_ as the last look left it
  guarded("replacements", [&] { find_new(nodes); });
  if (config_.provider == ProviderKind::spares)
    guarded("spares", [&] { keep_spares(nodes, protected_nodes); });
  replacing_ = !calls_.empty();
  guarded("writes", [&] { drop_unwanted_writes(); });
  for (auto& repair : store_.node_repairs()) {
    // A replacement asked for after the node list was read (an admin's
    // `replace`) waits for a list read after it: a job started on the node
    // just before would be missed.
    if (clock_.now() - clock_.since(repair.started()) > nodes_read_at_) {
      stale_for_repair_ = true;
      continue;
    }
    try {
      advance(repair, nodes, protected_nodes);
      replacing_ = replacing_ || repair.state == NodeRepairState::replacing ||
                   repair.state == NodeRepairState::returning;
      errors_said_.forget("replacement of " + repair.node);
    } catch (const std::exception& e) {
      // Asked again at the next tick; said once while it persists, also
      // when the store cannot take it.
      if (repair.detail != e.what() &&
          errors_said_.say("replacement of " + repair.node, e.what())) {
        repair.detail = e.what();
        try {
          save(repair, EventKind::error, e.what());
        } catch (const std::exception& unstored) {
          log::warn("{}: {} (not stored: {})", repair.node, e.what(), unstored.what());
        }
      }
    }
  }
}

bool NodeKeeper::old_mark(const std::string& name, const slurm::NodeInfo& node) {
  const auto back = returned_.find(name);
  if (back == returned_.end()) return false;
  auto& was = back->second;
  // Another instance since, or a replacement asked for again (an admin's
  // `replace`): nothing of the return is left to tell apart.
  if (node.slurmd_start_time != was.instance || store_.node_repair(name)) {
    returned_.erase(back);
    return false;
  }
  if (!wants_replacement(node)) return false;  // in service
  // A mark set after the replacement began is a new one (the same check
  // failing again on the new instance, an admin's mark): replaced again.
  // One whose time slurmctld does not say counts as new.
  if (node.reason != was.reason || node.reason_time == 0 || node.reason_time > was.marked_by) {
    returned_.erase(back);
    return false;
  }
  // The old mark: a read from before the resume took, or a slurmctld
  // restarted from state it saved before it. Resumed once more (on a
  // thread of its own; taken by drop_unwanted_writes) on a read after the
  // last resume, until slurmctld keeps it.
  if (nodes_read_at_ <= was.at || writes_.has("again " + name)) return true;
  log::info(
      "{}: slurmctld shows the mark its replacement ended ({}) on the new instance again: "
      "resuming it once more",
      name, node.reason);
  writes_.run("again " + name, [this, name, spare = was.spare] {
    slurm_.resume_node(name);
    if (spare) slurm_.set_node_drain(name, kSpareReason);
    return std::string();
  });
  return true;
}

void NodeKeeper::find_new(const NodeMap& nodes) {
  for (auto back = returned_.begin(); back != returned_.end();)
    back = !nodes.contains(back->first) || clock_.now() - back->second.at > kReturnedMemory
               ? returned_.erase(back)
               : std::next(back);
  for (const auto& [name, node] : nodes) {
    if (old_mark(name, *node)) continue;
    if (!wants_replacement(*node) || elsewhere(name)) {
      no_provider_said_.forget(name);
      continue;
    }
    if (store_.node_repair(name)) continue;
    if (!can_replace(config_)) {
      if (no_provider_said_.say(name))
        store_.add_node_event(
            name, {EventKind::no_provider,
                   fmt::format("{} is marked for replacement ({}), but provider={} cannot replace "
                               "nodes; it stays out",
                               name, node->reason, to_string(config_.provider))});
      continue;
    }
    const auto mode = node->down || node->reason == kForceReason ? RepairMode::force
                      : node->reason == kWaitReason              ? RepairMode::wait
                                                                 : RepairMode::now;
    NodeRepair repair;
    repair.node = name;
    repair.reason = node->reason;
    repair.mode = mode;
    repair.instance = node->slurmd_start_time;
    repair.set_started(clock_.stamp());
    const EventSpec event{
        EventKind::replace_requested,
        fmt::format("{} is {} ({}): the {} provider replaces it once no job runs on it", name,
                    node->down ? "DOWN" : "FAIL", node->reason, to_string(config_.provider))};
    if (store_.add_node_repair(repair, event))
      log::audit(asker_of(repair), name_of(event.kind), event.detail);
  }
}

void NodeKeeper::drop(const std::string& node, const std::string& why) {
  // A replacement dropped while its provider call runs: the call is left
  // to end by itself (its future polled, never waited for here).
  if (const auto call = calls_.find(node); call != calls_.end()) {
    orphans_.push_back(std::move(call->second));
    calls_.erase(call);
  }
  if (const auto repair = store_.node_repair(node))
    log::audit(asker_of(*repair), name_of(EventKind::replace_dropped), why);
  store_.remove_node_repair(node, {EventKind::replace_dropped, why});
}

void NodeKeeper::advance(NodeRepair& repair, const NodeMap& nodes,
                         const std::set<std::string>& protected_nodes) {
  const auto& name = repair.node;
  const auto it = nodes.find(name);
  if (it == nodes.end()) {
    drop(name, name + " is no longer in slurm.conf");
    return;
  }
  const auto& node = *it->second;
  // A node that is in service again (an admin resumed it; a slurmd came
  // back with ReturnToService=2) is not replaced: not while the replacement
  // waits, failed, or waits to ask the provider again. A record younger than
  // a few seconds may be newer than the node list, so it waits a little.
  const bool in_service = !node.fail && !node.down;
  const bool between_calls = repair.state == NodeRepairState::replacing && !calls_.contains(name);
  if (in_service && clock_.since(repair.started()) >= kFreshRecord &&
      (repair.state == NodeRepairState::waiting || repair.state == NodeRepairState::failed ||
       between_calls)) {
    drop(name, fmt::format("{} was put back in service {}", name,
                           repair.state == NodeRepairState::failed ? "after its replacement failed"
                                                                   : "before it was replaced"));
    return;
  }
  if (repair.state != NodeRepairState::failed && gate_.held()) {
    gate_.would("replace", name, held_step(repair, node, config_));
    return;
  }
  switch (repair.state) {
    case NodeRepairState::failed:
      return;  // an admin's now
    case NodeRepairState::waiting:
      if (advance_waiting(repair, node, protected_nodes)) return;
      [[fallthrough]];  // no job left: the provider is asked in this same look
    case NodeRepairState::replacing:
      if (advance_replacing(repair)) return;
      break;
    case NodeRepairState::returning:
      if (advance_returning(repair, node, nodes)) return;
      break;
  }
  retry_or_fail(repair);
}

bool NodeKeeper::advance_waiting(NodeRepair& repair, const slurm::NodeInfo& node,
                                 const std::set<std::string>& protected_nodes) {
  const auto& name = repair.node;
  const auto down = "down " + name;
  if (writes_.has(down) || (repair.mode == RepairMode::force && !node.down)) {
    if (!writes_.has(down) && protected_nodes.contains(name) &&
        clock_.since(repair.started()) < kForceGrace)
      return true;
    // On a thread of its own: the event once it is in.
    if (!written(down, [this, name, reason = repair.reason] {
          slurm_.set_node_down(name, reason);
          return std::string();
        }))
      return true;
    save(repair, EventKind::forced,
         fmt::format("{} set DOWN: the jobs left on it are killed", name));
    return true;
  }
  if (node.allocated || node.completing) {
    if (repair.detail != "jobs") {
      repair.detail = "jobs";
      save(repair, EventKind::waiting, fmt::format("waiting for the jobs on {} to end", name));
    }
    return true;
  }
  repair.state = NodeRepairState::replacing;
  repair.detail.clear();
  repair.set_next(clock_.stamp());
  save(repair, EventKind::jobs_gone, fmt::format("no job runs on {}: replacing it", name));
  return false;
}

bool NodeKeeper::advance_replacing(NodeRepair& repair) {
  const auto& name = repair.node;
  auto call = calls_.find(name);
  if (call == calls_.end()) {
    if (clock_.since(repair.next()).count() < 0) return true;
    if (repair.attempts >= static_cast<std::int64_t>(config_.provider_retries)) {
      // Its last call was cut short by a restart of the controller.
      if (repair.detail.empty()) repair.detail = "the controller restarted during the last try";
      return false;
    }
    // A replacement counts once, at its first call (gate.hpp).
    if (repair.attempts == 0 && !gate_.allow(Gate::Counted::replacement, {name})) {
      gate_.would("replace", name, held_step(repair, {}, config_));
      return true;
    }
    ++repair.attempts;
    repair.called_at = clock_.unix_now();
    save(repair, EventKind::provider,
         fmt::format("asking the {} provider to replace {} (try {} of {})",
                     to_string(config_.provider), name, repair.attempts, config_.provider_retries));
    // On a thread of its own: a slow provider must not hold up detection.
    calls_.emplace(name, std::async(std::launch::async,
                                    [this, name] { return replace_node(config_, runner_, name); }));
    return true;
  }
  if (call->second.wait_for(seconds{0}) != std::future_status::ready) return true;
  const auto error = call->second.get();
  calls_.erase(call);
  if (!error.empty()) {
    repair.detail = error;
    return false;
  }
  repair.state = NodeRepairState::returning;
  repair.detail.clear();
  // The new instance must register within register_timeout.
  repair.set_next(clock_.stamp().plus(config_.register_timeout));
  save(repair, EventKind::provider_done,
       fmt::format("the provider replaced {}; waiting for its new instance to register", name));
  return true;
}

bool NodeKeeper::advance_returning(NodeRepair& repair, const slurm::NodeInfo& node,
                                   const NodeMap& nodes) {
  const auto& name = repair.node;
  const auto key = "return " + name;
  if (writes_.has(key)) return returned(repair, key, node.slurmd_start_time);
  // The new instance: a slurmd started since the provider's call (not one
  // that restarted by itself before it) and answering slurmctld.
  if (node.slurmd_start_time == repair.instance || node.slurmd_start_time < repair.called_at ||
      node.not_responding) {
    if (clock_.since(repair.next()).count() < 0) return true;
    repair.detail = fmt::format("{} did not register again within register_timeout={} s", name,
                                config_.register_timeout.count() / 1000);
    return false;
  }
  const auto short_of = config_.provider == ProviderKind::spares ? short_of_spares(name, nodes)
                                                                 : std::vector<std::string>{};
  // Only the replacement's own mark is lifted: an admin's drain set
  // meanwhile (other reason) stays, and so does the node. One with no mark
  // left at all was returned to service by Slurm itself (ReturnToService=2:
  // the new slurmd's registration cleared DOWN and its reason).
  const bool by_slurm = !node.fail && !node.down && !node.drain && node.reason.empty();
  const bool ours = by_slurm || node.reason == repair.reason || wants_replacement(node);
  const auto detail = fmt::format(
      "{} is back in service: a new instance (slurmd started at {}) replaced "
      "the old one{}{}",
      name, node.slurmd_start_time,
      !ours      ? ", left as an admin set it meanwhile (" + node.reason + ")"
      : by_slurm ? "; Slurm had returned it to service when it registered"
                 : "",
      ours && !short_of.empty() ? ", kept as a spare of " + join(short_of, ",") : "");
  // On a thread of its own: the event once it is in.
  writes_.run(key, [this, name, detail, resume = ours && (node.fail || node.down || node.drain),
                    spare = ours && !short_of.empty()] {
    if (resume) slurm_.resume_node(name);
    if (spare) slurm_.set_node_drain(name, kSpareReason);
    return detail;
  });
  if (ours && !short_of.empty()) returning_spares_.insert(name);
  return returned(repair, key, node.slurmd_start_time);
}

bool NodeKeeper::returned(NodeRepair& repair, const std::string& key, std::int64_t instance) {
  const auto& name = repair.node;
  const auto detail = written(key, nullptr);
  if (!detail) return true;  // under way
  returned_[name] = {instance, repair.reason, repair.started().wall, clock_.now(),
                     returning_spares_.erase(name) > 0};
  const EventSpec event{EventKind::node_replaced, *detail};
  log::audit(asker_of(repair), name_of(event.kind), event.detail);
  store_.remove_node_repair(name, event);
  // A replacement that succeeded no longer counts toward the breaker.
  if (repair.attempts > 0) gate_.settled(Gate::Counted::replacement, {name});
  return true;
}

std::optional<std::string> NodeKeeper::written(const std::string& key,
                                               std::function<std::string()> write) {
  if (!writes_.has(key)) writes_.run(key, std::move(write));
  auto outcome = writes_.take(key);
  if (!outcome) return std::nullopt;
  return outcome->get();
}

void NodeKeeper::drop_unwanted_writes() {
  for (const auto& key : writes_.finished()) {
    const auto space = key.find(' ');
    const auto what = key.substr(0, space);
    const auto node = key.substr(space + 1);
    // A spare's drain is taken by keep_spares; a mark while its node is
    // cross-checked; the others while the node's replacement goes on.
    if (what == "again") {
      try {
        writes_.take(key)->get();
        log::info("{}: resumed once more", node);
      } catch (const std::exception& e) {
        log::warn("{}: resuming it once more failed (tried again at a later look): {}", node,
                  e.what());
      }
      // A read before this answer may still show the old mark.
      if (const auto back = returned_.find(node); back != returned_.end())
        back->second.at = clock_.now();
      continue;
    }
    if (what == "spare" || (what == "mark" && cross_checking_.contains(node)) ||
        ((what == "down" || what == "return") && store_.node_repair(node)))
      continue;
    try {
      writes_.take(key)->get();
      log::info("{}: no longer wanted (its node moved on meanwhile)", key);
    } catch (const std::exception& e) {
      log::info("{}: no longer wanted (its node moved on meanwhile): {}", key, e.what());
    }
  }
}

void NodeKeeper::retry_or_fail(NodeRepair& repair) {
  const auto& name = repair.node;
  if (repair.attempts >= static_cast<std::int64_t>(config_.provider_retries)) {
    repair.state = NodeRepairState::failed;
    log::error("{}: replacement failed after {} tries: {}", name, repair.attempts, repair.detail);
    save(repair, EventKind::replace_failed,
         fmt::format("the replacement of {} failed after {} tries; the node stays out for an "
                     "admin: {}",
                     name, repair.attempts, repair.detail));
    return;
  }
  auto delay = duration_cast<seconds>(config_.provider_backoff);
  for (std::int64_t i = 1; i < repair.attempts && delay < seconds{600}; ++i) delay *= 2;
  repair.state = NodeRepairState::replacing;
  delay = std::min(delay, seconds{600});
  repair.set_next(clock_.stamp().plus(delay));
  save(repair, EventKind::provider_failed,
       fmt::format("replacing {} failed (try {} of {}; again in {} s): {}", name, repair.attempts,
                   config_.provider_retries, delay.count(), repair.detail));
}

void NodeKeeper::save(NodeRepair& repair, EventKind kind, const std::string& detail) {
  store_.save_node_repair(repair, {kind, detail});
  log::audit(asker_of(repair), name_of(kind), fmt::format("{}: {}", repair.node, detail));
}

log::Asker NodeKeeper::asker_of(const NodeRepair& repair) {
  // An admin's `replace`, or the node's own mark (a health check, a
  // heartbeat, scontrol): the mark's reason says which.
  if (repair.requested_by >= 0) return {static_cast<uid_t>(repair.requested_by), "replace", ""};
  return {0, "mark", ""};
}

}  // namespace ar
