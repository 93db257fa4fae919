// The provisioner's construction and its tick: the slots observed in the
// nodes read, the plan recorded then applied (or, held back, only said).
// Its other parts are in provisioner_*.cpp, one concern a file.

#include "provision/provisioner.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <exception>
#include <set>
#include <utility>

#include "log.hpp"

namespace ar {

namespace {

using provision::SlotPhase;

// A mark that asks for the node's replacement (as the node keeper reads them).
bool marked_for_replacement(const slurm::NodeInfo& node) {
  return (node.fail || node.down) &&
         (node.reason.starts_with("Action:Replace") || node.reason.starts_with("auto-resume:"));
}

}  // namespace

Provisioner::Provisioner(Store& store, const DaemonConfig& config, slurm::SlurmApi& slurm,
                         const Clock& clock, CommandRunner& runner, Gate* gate)
    : store_(store),
      config_(config),
      settings_(config.provision),
      slurm_(slurm),
      clock_(clock),
      runner_(runner),
      gate_(gate) {
  plan_settings_.max_parallel_creates = settings_.max_parallel_creates;
  plan_settings_.retry_backoff = settings_.create_backoff;
  plan_settings_.alert_after = settings_.create_alert_after;
  plan_settings_.capacity_backoff = settings_.capacity_backoff;
  plan_settings_.max_bootstrap_failures = settings_.max_bootstrap_failures;
  plan_settings_.min_count_timeout = settings_.min_count_timeout;
  plan_settings_.register_timeout = config.register_timeout;
  if (const auto stored = store_.provision_state())
    cluster_ = provision::cluster_from_json(*stored);
  for (auto& record : store_.instance_records())
    if (record.terminated == 0) open_.emplace(record.token, std::move(record));
}

Provisioner::~Provisioner() {
  if (!work_.empty() || listing_ || !orphan_calls_.empty() || !abandoned_.empty() || restarting_)
    runner_.cancel_all();
  if (restarting_) restart_call_.wait();
  for (auto& [node, work] : work_)
    if (work.calling) work.call.wait();
  if (listing_) list_call_.wait();
  for (auto& [key, call] : orphan_calls_) call.wait();
  for (auto& [key, hung] : abandoned_) hung.call.wait();
}

provision::Millis Provisioner::now() const { return Millis{clock_.unix_now() * 1000}; }

provision::Cluster Provisioner::state() const {
  std::lock_guard lock(mutex_);
  return cluster_;
}

std::size_t Provisioner::provider_calls_running() const {
  std::lock_guard lock(mutex_);
  const auto running = [](const auto& call) {
    return call.valid() && call.wait_for(std::chrono::seconds{0}) != std::future_status::ready;
  };
  std::size_t n = listing_ && running(list_call_) ? 1U : 0U;
  for (const auto& [node, work] : work_) n += work.calling && running(work.call) ? 1U : 0U;
  for (const auto& [key, call] : orphan_calls_) n += running(call) ? 1U : 0U;
  for (const auto& [token, abandoned] : abandoned_) n += running(abandoned.call) ? 1U : 0U;
  return n;
}

bool Provisioner::owns(const std::string& node) const {
  std::lock_guard lock(mutex_);
  for (const auto& group : cluster_.groups) {
    const auto& prefix = group.spec.node_prefix;
    if (!node.starts_with(prefix) || node.size() == prefix.size()) continue;
    const auto number = std::string_view(node).substr(prefix.size());
    if (number.front() == '0' ||
        !std::ranges::all_of(number, [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    if (number.size() <= 5 && std::stoul(std::string(number)) <= group.spec.max_count) return true;
  }
  return false;
}

void Provisioner::observe_slot(provision::Group& group, provision::Slot& slot,
                               const slurm::NodeInfo* node) {
  const bool compute = group.spec.type == GroupType::compute;
  const auto name = group.spec.node(slot.index);
  switch (slot.phase) {
    case SlotPhase::empty:
      // Powered up for an instance that did not come (a failed create), or
      // by someone else (Slurm for a job, had the drain gone): it goes back
      // down, drained.
      if (const auto it = work_.find(name); it != work_.end()) {
        if (powered_down(name, node, it->second)) work_.erase(it);
      } else if (compute && node != nullptr && node->cloud && node->powering_down) {
        // Powering down with no step of ours in flight (the controller
        // restarted meanwhile): Slurm cleared the drain, set it again.
        drain(name, "empty slot", [this, name] {
          auto& work = work_[name];
          work.stage = Stage::hide;
          work.since = now();
        });
      } else if (compute && node != nullptr && node->cloud) {
        drain(name, "empty slot", [this, name] { power_down(name, true); });
      }
      return;
    case SlotPhase::creating:
      launch(group, slot, node);
      return;
    case SlotPhase::joining:
      if (compute && node != nullptr && !node->powering_up && node->slurmd_start_time > 0 &&
          !node->not_responding) {
        add(provision::on_registered(cluster_, group.spec.name, slot.index, now()));
        drain(name, "ready, held until released");
        dirty_ = true;
      }
      return;
    case SlotPhase::terminating:
      leave(group, slot, node);
      return;
    default:
      break;
  }
  if (!compute) return;
  slot.busy = node != nullptr && (node->allocated || node->completing);
  slot.unhealthy = node == nullptr || node->down || node->fail || node->not_responding;
  slot.replace = node != nullptr && marked_for_replacement(*node);
  slot.kept = slot.phase == SlotPhase::in_service && node != nullptr && node->drain &&
              !slot.replace && !node->reason.starts_with(kReasonPrefix);
}

void Provisioner::observe(const NodeMap& nodes) {
  for (auto& group : cluster_.groups) {
    for (auto& slot : group.slots) {
      const auto name = group.spec.node(slot.index);
      if (writing(name)) continue;  // its stage waits for its write
      const auto it = nodes.find(name);
      try {
        observe_slot(group, slot, it == nodes.end() ? nullptr : it->second);
      } catch (const std::exception& e) {
        log::warn("{}: {}", name, e.what());  // tried again at the next tick
      }
    }
  }
}

void Provisioner::say_held() {
  // Held back: nothing changes in Slurm, at the provider or in the store
  // (provider calls in flight wait). The group files are read into a copy
  // (a new group's slots are not drained: that waits too) and what the
  // plan would start is said once.
  auto held = cluster_;
  std::swap(held, cluster_);
  const auto events = events_.size();
  const auto saying = said_;
  reload_groups(false);
  cluster_.slurmctld_up = true;
  const auto plan = provision::plan(cluster_, now(), plan_settings_);
  std::swap(held, cluster_);
  events_.resize(events);
  said_ = saying;
  std::set<std::string> subjects;
  for (const auto& action : plan.actions) {
    const auto subject = action.slot == 0 ? action.group : group_node(held, action);
    subjects.insert(subject);
    gate_->would(
        "provision", subject,
        fmt::format("{} {} (group {})", provision::to_string(action.kind), subject, action.group));
  }
  gate_->settle("provision", subjects);
}

std::string Provisioner::group_node(const provision::Cluster& cluster,
                                    const provision::Action& action) {
  const auto* group = provision::find_group(cluster, action.group);
  return group != nullptr ? group->spec.node(action.slot)
                          : action.group + "#" + std::to_string(action.slot);
}

void Provisioner::execute(const provision::Action& action) {
  auto& group = *provision::find_group(cluster_, action.group);
  if (action.kind == provision::ActionKind::rollback) return;
  auto& slot = group.slots.at(action.slot - 1);
  const auto name = group.spec.node(slot.index);
  const bool compute = group.spec.type == GroupType::compute;
  switch (action.kind) {
    case provision::ActionKind::create:
      meter(group, slot, [](InstanceRecord&) {});
      break;
    case provision::ActionKind::drain:
      // An idle slot's terminate is recorded in the same plan: drained too.
      if (compute && (slot.phase == SlotPhase::draining || slot.phase == SlotPhase::terminating))
        drain(name, std::string(provision::to_string(action.leave)));
      break;
    case provision::ActionKind::release: {
      auto in_service = [this, group_name = group.spec.name, index = slot.index] {
        meter_slot(group_name, index, [&](InstanceRecord& r) { r.in_service = clock_.unix_now(); });
      };
      if (compute)
        write(
            name, "resume", [this, name] { slurm_.resume_node(name); }, std::move(in_service),
            true);
      else
        in_service();
      break;
    }
    default:
      break;
  }
}

void Provisioner::tick(const NodeMap& nodes, bool repairing,
                       Clock::Steady::time_point nodes_read_at) {
  std::lock_guard lock(mutex_);
  repairing_ = repairing;
  if (!restart_done()) return;  // slurmctld restarts for the include file
  if (gate_ != nullptr && gate_->held()) {
    say_held();  // the writes' outcomes wait too: what follows them changes things
    return;
  }
  take_writes();
  for (const auto& node : std::vector<std::string>(undrained_.begin(), undrained_.end()))
    drain_slot(node);
  reload_groups();
  if (plan_after_) {
    if (nodes_read_at < *plan_after_) {
      save();
      return;  // planned at a look whose read began after the operation did
    }
    plan_after_.reset();
  }
  cluster_.slurmctld_up = true;  // the nodes were just loaded from it
  observe(nodes);
  const auto plan = provision::plan(cluster_, now(), plan_settings_);
  for (const auto& action : plan.actions) provision::record(cluster_, action, now());
  add(plan.events);
  dirty_ = dirty_ || !plan.actions.empty();
  save();  // write-ahead: recorded before any is carried out
  for (const auto& action : plan.actions) {
    try {
      execute(action);
    } catch (const std::exception& e) {
      log::warn("group {}: {} {}: {}", action.group, provision::to_string(action.kind), action.slot,
                e.what());
    }
  }
  add(provision::update_status(cluster_));
  reap_abandoned();
  if (settings_.orphan_timeout.count() > 0 || !orphan_calls_.empty()) sweep_orphans();
  save();
}

}  // namespace ar
