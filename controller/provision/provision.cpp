#include "provision/provision.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include "autoresume/keyvalue.hpp"

namespace ar::provision {

namespace {

template <typename Enum, std::size_t N>
std::string_view name_of(Enum value, const std::array<std::string_view, N>& names) {
  const auto i = static_cast<std::size_t>(value);
  return i < N ? names[i] : "unknown";
}

// The instance comes back in the same slot once terminated.
bool returns(Leave leave) {
  return leave == Leave::replace || leave == Leave::roll || leave == Leave::bootstrap ||
         leave == Leave::register_timeout;
}

// Counts toward the group's count: an instance that stays, or one that
// leaves only to come back.
bool occupies(const Slot& slot) {
  return (slot.phase != SlotPhase::empty && slot.leave == Leave::none) || returns(slot.leave);
}

bool ready(const Slot& slot) {
  return slot.leave == Leave::none &&
         (slot.phase == SlotPhase::waiting || slot.phase == SlotPhase::in_service);
}

template <typename Pred>
unsigned count_slots(const Group& group, Pred pred) {
  return static_cast<unsigned>(std::ranges::count_if(group.slots, pred));
}

Slot& slot_of(Group& group, unsigned index) {
  if (index < 1 || index > group.slots.size())
    throw std::out_of_range("group '" + group.spec.name + "' has no slot " + std::to_string(index));
  return group.slots[index - 1];
}

Event event(EventKind kind, Level level, const Group& group, const Slot* slot, std::string text) {
  return {kind, level, group.spec.name, slot ? group.spec.node(slot->index) : "", std::move(text)};
}

// The plan under construction: every action is also recorded into a copy
// of the cluster, so that later decisions of the same tick see it.
struct Planner {
  Cluster state;
  Millis now;
  const Settings& settings;
  Plan out;

  void act(ActionKind kind, const Group& group, unsigned slot, Leave leave = Leave::none) {
    Action action{kind, group.spec.name, slot, leave};
    record(state, action, now);
    out.actions.push_back(std::move(action));
  }

  // Drains `slot` for `leave`, and terminates it at once when nothing runs
  // there (a creating slot is terminated once its create has ended).
  void leave_slot(const Group& group, const Slot& slot, Leave leave) {
    act(ActionKind::drain, group, slot.index, leave);
    const auto& now_slot = group.slots[slot.index - 1];
    if (now_slot.phase == SlotPhase::draining && !now_slot.busy)
      act(ActionKind::terminate, group, slot.index);
  }

  bool rollback_due(const Group& group) const {
    const auto& op = group.operation;
    return op.min_count > 0 && !op.min_reached && !op.rollback &&
           now >= op.started + settings.min_count_timeout &&
           count_slots(group, ready) < op.min_count;
  }

  void progress_leaving(const Group& group) {
    for (const auto& slot : group.slots) {
      if (slot.leave == Leave::none) continue;
      if (slot.phase == SlotPhase::joining || slot.phase == SlotPhase::waiting ||
          slot.phase == SlotPhase::in_service) {
        leave_slot(group, slot, slot.leave);
      } else if (slot.phase == SlotPhase::draining && !slot.busy && now >= slot.retry_at) {
        act(ActionKind::terminate, group, slot.index);
      }
    }
  }

  void replace_marked(const Group& group) {
    for (const auto& slot : group.slots) {
      if (slot.leave != Leave::none || slot.kept) continue;
      if ((slot.phase == SlotPhase::in_service || slot.phase == SlotPhase::waiting) &&
          slot.replace) {
        leave_slot(group, slot, Leave::replace);
      } else if (slot.phase == SlotPhase::joining &&
                 now >= slot.since + settings.register_timeout) {
        leave_slot(group, slot, Leave::register_timeout);
      }
    }
  }

  void roll_batch(const Group& group) {
    if (group.roll_batch == 0) return;
    const auto active = count_slots(group, [](const Slot& s) {
      return s.roll && (s.leave != Leave::none || s.phase != SlotPhase::in_service);
    });
    std::vector<const Slot*> pending;
    for (const auto& slot : group.slots)
      if (slot.roll && slot.leave == Leave::none && slot.phase == SlotPhase::in_service)
        pending.push_back(&slot);
    std::ranges::stable_sort(pending, {}, [](const Slot* s) { return s->busy; });
    for (std::size_t i = active; i < group.roll_batch && i - active < pending.size(); ++i)
      leave_slot(group, *pending[i - active], Leave::roll);
  }

  // Scale-in order: a cancelled return, unhealthy, not yet released, idle,
  // busy; the highest index first within each; never a kept node.
  static int scale_in_rank(const Slot& slot) {
    if (slot.phase == SlotPhase::empty) return 0;
    if (slot.unhealthy) return 1;
    if (slot.phase != SlotPhase::in_service) return 2;
    return slot.busy ? 4 : 3;
  }

  void scale_in(const Group& group) {
    const auto occupied = count_slots(group, occupies);
    if (occupied <= group.operation.count) return;
    std::vector<const Slot*> victims;
    for (const auto& slot : group.slots)
      if (occupies(slot) && !slot.kept &&
          (slot.leave == Leave::none || slot.phase == SlotPhase::empty))
        victims.push_back(&slot);
    std::ranges::sort(victims, [](const Slot* a, const Slot* b) {
      const auto ra = scale_in_rank(*a);
      const auto rb = scale_in_rank(*b);
      return ra != rb ? ra < rb : a->index > b->index;
    });
    const auto excess = std::min<std::size_t>(occupied - group.operation.count, victims.size());
    const auto why = group.operation.rollback ? Leave::rollback : Leave::scale_in;
    for (std::size_t i = 0; i < excess; ++i) leave_slot(group, *victims[i], why);
  }

  void release(const Group& group) {
    const auto& op = group.operation;
    if (!op.min_reached && count_slots(group, ready) < op.min_count) return;
    const auto waiting = count_slots(group, [](const Slot& s) {
      return s.leave == Leave::none && s.phase == SlotPhase::waiting;
    });
    if (waiting == 0) return;
    if (op.min_count > 0 && !op.min_reached)
      out.events.push_back(event(EventKind::min_count_reached, Level::info, group, nullptr,
                                 std::to_string(count_slots(group, ready)) + " of min_count " +
                                     std::to_string(op.min_count) + " ready: released together"));
    for (const auto& slot : group.slots)
      if (slot.leave == Leave::none && slot.phase == SlotPhase::waiting)
        act(ActionKind::release, group, slot.index);
  }

  bool may_create(const Group& group) const {
    if (!state.slurmctld_up || group.stopped || group.config_failed || now < group.capacity_until)
      return false;
    if (group.spec.type == GroupType::service) return true;
    // Compute groups wait until every service group has one instance in service.
    return std::ranges::all_of(state.groups, [](const Group& g) {
      return g.spec.type != GroupType::service || g.operation.count == 0 ||
             std::ranges::any_of(g.slots, [](const Slot& s) {
               return s.phase == SlotPhase::in_service && s.leave == Leave::none;
             });
    });
  }

  // The slots to create next in `group`: those coming back first, then the
  // lowest empty ones; a slot in backoff waits (no other takes its turn).
  std::vector<unsigned> wanted(const Group& group) const {
    const auto occupied = count_slots(group, occupies);
    std::vector<unsigned> slots;
    for (const auto& slot : group.slots)
      if (slot.phase == SlotPhase::empty && returns(slot.leave)) slots.push_back(slot.index);
    auto missing = group.operation.count > occupied ? group.operation.count - occupied : 0;
    for (const auto& slot : group.slots) {
      if (missing == 0) break;
      if (slot.phase != SlotPhase::empty || slot.leave != Leave::none) continue;
      slots.push_back(slot.index);
      --missing;
    }
    std::erase_if(slots, [&](unsigned i) { return now < group.slots[i - 1].retry_at; });
    return slots;
  }

  void scale_out() {
    unsigned creating = 0;
    for (const auto& g : state.groups)
      creating += count_slots(g, [](const Slot& s) { return s.phase == SlotPhase::creating; });
    auto budget =
        settings.max_parallel_creates > creating ? settings.max_parallel_creates - creating : 0U;
    const auto n = state.groups.size();
    std::vector<std::vector<unsigned>> queues(n);
    for (std::size_t i = 0; i < n; ++i)
      if (may_create(state.groups[i])) queues[i] = wanted(state.groups[i]);
    const auto first = n == 0 ? 0 : state.next_group % n;
    for (std::size_t round = 0; budget > 0; ++round) {
      bool any = false;
      for (std::size_t k = 0; k < n && budget > 0; ++k) {
        const auto i = (first + k) % n;
        if (round >= queues[i].size()) continue;
        act(ActionKind::create, state.groups[i], queues[i][round]);
        --budget;
        any = true;
      }
      if (!any) break;
    }
  }
};

void check_rollback_done(Group& group, std::vector<Event>& events) {
  auto& op = group.operation;
  if (!op.rollback ||
      std::ranges::any_of(group.slots, [](const Slot& s) { return s.leave == Leave::rollback; }))
    return;
  op.rollback = false;
  events.push_back(event(EventKind::rollback_completed, Level::warning, group, nullptr,
                         "back to count " + std::to_string(op.count)));
}

Millis backoff(const Settings& settings, unsigned failures) {
  auto wait = settings.retry_backoff;
  for (unsigned i = 1; i < failures && wait < settings.max_retry_backoff; ++i) wait *= 2;
  return std::min(wait, settings.max_retry_backoff);
}

GroupStatus derive_status(const Group& group) {
  if (group.config_failed || group.stopped) return GroupStatus::failed;
  const auto settled = std::ranges::all_of(group.slots, [](const Slot& s) {
    return s.leave == Leave::none &&
           (s.phase == SlotPhase::empty || s.phase == SlotPhase::in_service);
  });
  const auto serving = count_slots(group, [](const Slot& s) {
    return s.phase == SlotPhase::in_service && s.leave == Leave::none;
  });
  if (settled && serving == group.operation.count) return GroupStatus::in_service;
  if (group.operation.count == 0) return GroupStatus::deleting;
  const auto failing =
      group.capacity_episode ||
      std::ranges::any_of(group.slots, [](const Slot& s) { return s.failures > 0; });
  if (failing && serving < group.operation.count) return GroupStatus::degraded;
  return group.ever_in_service ? GroupStatus::updating : GroupStatus::creating;
}

}  // namespace

SlotCounts count_slots(const Group& group) {
  SlotCounts out;
  for (const auto& slot : group.slots) {
    switch (slot.phase) {
      case SlotPhase::in_service:
        ++out.in_service;
        break;
      case SlotPhase::creating:
      case SlotPhase::joining:
      case SlotPhase::waiting:
        ++out.starting;
        break;
      case SlotPhase::draining:
      case SlotPhase::terminating:
        ++out.leaving;
        break;
      case SlotPhase::empty:
        break;
    }
  }
  return out;
}

std::string_view to_string(SlotPhase phase) {
  static constexpr std::array<std::string_view, 7> kNames = {
      "empty", "creating", "joining", "waiting", "in_service", "draining", "terminating"};
  return name_of(phase, kNames);
}

std::string_view to_string(Leave leave) {
  static constexpr std::array<std::string_view, 7> kNames = {
      "none", "scale_in", "rollback", "replace", "roll", "bootstrap", "register_timeout"};
  return name_of(leave, kNames);
}

std::string_view to_string(GroupStatus status) {
  static constexpr std::array<std::string_view, 6> kNames = {"Creating", "Updating", "InService",
                                                             "Degraded", "Failed",   "Deleting"};
  return name_of(status, kNames);
}

std::string_view to_string(ActionKind kind) {
  static constexpr std::array<std::string_view, 5> kNames = {"create", "drain", "terminate",
                                                             "release", "rollback"};
  return name_of(kind, kNames);
}

std::string_view to_string(EventKind kind) {
  static constexpr std::array<std::string_view, 16> kNames = {
      "operation_started",    "group_status",        "instance_created",   "instance_ready",
      "instance_released",    "instance_terminated", "create_failed",      "create_failing",
      "capacity_unavailable", "lifecycle_failed",    "group_stopped",      "group_failed",
      "min_count_reached",    "rollback_started",    "rollback_completed", "terminate_failed"};
  return name_of(kind, kNames);
}

std::string_view to_string(Level level) {
  static constexpr std::array<std::string_view, 3> kNames = {"info", "warning", "error"};
  return name_of(level, kNames);
}

CreateOutcome create_outcome(int exit_status, bool signalled_or_timed_out) {
  if (signalled_or_timed_out) return CreateOutcome::retryable;
  switch (exit_status) {
    case 0:
      return CreateOutcome::ok;
    case 69:
      return CreateOutcome::capacity;
    case 65:
      return CreateOutcome::bootstrap;
    case 78:
      return CreateOutcome::config;
    default:
      return CreateOutcome::retryable;
  }
}

const Group* find_group(const Cluster& cluster, std::string_view name) {
  const auto it = std::ranges::find(
      cluster.groups, name, [](const Group& g) -> const std::string& { return g.spec.name; });
  return it == cluster.groups.end() ? nullptr : &*it;
}

Group* find_group(Cluster& cluster, std::string_view name) {
  return const_cast<Group*>(find_group(std::as_const(cluster), name));
}

std::string token(const Group& group, const Slot& slot) {
  return group.spec.name + ":" + group.spec.node(slot.index) + ":" + std::to_string(slot.attempt);
}

Group new_group(const GroupSpec& spec) {
  Group group;
  group.spec = spec;
  group.slots.resize(spec.max_count);
  for (unsigned i = 0; i < spec.max_count; ++i) group.slots[i].index = i + 1;
  return group;
}

Event start_operation(Cluster& cluster, Group& group, unsigned count, unsigned min_count,
                      Millis now) {
  const auto& spec = group.spec;
  if (count > spec.max_count)
    throw ConfigError("count " + std::to_string(count) + " is more than max_count " +
                      std::to_string(spec.max_count) + " of group '" + spec.name +
                      "' (raising max_count needs a slurmctld restart)");
  if (min_count > count)
    throw ConfigError("min_count " + std::to_string(min_count) + " is more than count " +
                      std::to_string(count) + " of group '" + spec.name + "'");
  const auto before = group.operation.count;
  group.operation = {cluster.next_operation++, count, min_count, group.stable_count, now};
  group.config_failed = false;
  return event(EventKind::operation_started, Level::info, group, nullptr,
               "operation " + std::to_string(group.operation.id) + ": count " +
                   std::to_string(before) + " -> " + std::to_string(count) +
                   (min_count > 0 ? ", min_count " + std::to_string(min_count) : ""));
}

Plan plan(const Cluster& cluster, Millis now, const Settings& settings) {
  Planner planner{cluster, now, settings, {}};
  auto& groups = planner.state.groups;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto& group = groups[i];
    if (planner.rollback_due(group)) {
      planner.out.events.push_back(
          event(EventKind::rollback_started, Level::warning, group, nullptr,
                std::to_string(count_slots(group, ready)) + " of min_count " +
                    std::to_string(group.operation.min_count) +
                    " ready after the timeout: back to count " +
                    std::to_string(group.operation.previous_count)));
      planner.act(ActionKind::rollback, group, 0);
    }
    planner.progress_leaving(group);
    planner.replace_marked(group);
    planner.scale_in(group);
    planner.release(group);
    planner.roll_batch(group);
  }
  planner.scale_out();
  return std::move(planner.out);
}

void record(Cluster& cluster, const Action& action, Millis now) {
  auto* group = find_group(cluster, action.group);
  if (group == nullptr) throw std::out_of_range("no group '" + action.group + "'");
  if (action.kind == ActionKind::rollback) {
    auto& op = group->operation;
    op.count = op.previous_count;
    op.min_count = 0;
    op.rollback = true;
    for (auto& slot : group->slots)
      if (slot.operation == op.id && slot.leave == Leave::none &&
          (slot.phase == SlotPhase::creating || slot.phase == SlotPhase::joining ||
           slot.phase == SlotPhase::waiting))
        slot.leave = Leave::rollback;
    return;
  }
  auto& slot = slot_of(*group, action.slot);
  switch (action.kind) {
    case ActionKind::create:
      slot.phase = SlotPhase::creating;
      slot.leave = Leave::none;
      ++slot.attempt;
      slot.operation = group->operation.id;
      cluster.next_group = static_cast<unsigned>(group - cluster.groups.data()) + 1;
      break;
    case ActionKind::drain:
      if (slot.phase == SlotPhase::empty) {
        slot.leave = Leave::none;  // a return cancelled
        return;
      }
      slot.leave = action.leave;
      if (slot.phase == SlotPhase::creating) return;  // drained once created
      slot.phase = SlotPhase::draining;
      break;
    case ActionKind::terminate:
      slot.phase = SlotPhase::terminating;
      break;
    case ActionKind::release:
      slot.phase = SlotPhase::in_service;
      slot.roll = false;
      if (group->operation.min_count > 0) group->operation.min_reached = true;
      if (std::ranges::none_of(group->slots, [](const Slot& s) { return s.roll; }))
        group->roll_batch = 0;
      break;
    case ActionKind::rollback:
      break;
  }
  slot.since = now;
}

std::vector<Event> on_created(Cluster& cluster, std::string_view group_name, unsigned index,
                              CreateOutcome outcome, std::string_view detail, Millis now,
                              const Settings& settings) {
  auto* group = find_group(cluster, group_name);
  if (group == nullptr) return {};
  auto& slot = slot_of(*group, index);
  if (slot.phase != SlotPhase::creating) return {};
  std::vector<Event> events;
  const auto asked = slot.since;  // when the create was recorded
  slot.since = now;
  const std::string said = detail.empty() ? "" : ": " + std::string(detail);
  switch (outcome) {
    case CreateOutcome::ok:
      slot.phase = group->spec.type == GroupType::compute ? SlotPhase::joining : SlotPhase::waiting;
      slot.failures = 0;
      group->bootstrap_failures = 0;
      // A create already under way when capacity ran out says nothing of it.
      if (asked >= group->capacity_since) group->capacity_episode = false;
      events.push_back(event(EventKind::instance_created, Level::info, *group, &slot,
                             "attempt " + std::to_string(slot.attempt) + said));
      break;
    case CreateOutcome::retryable:
      slot.phase = SlotPhase::empty;
      ++slot.failures;
      slot.retry_at = now + backoff(settings, slot.failures);
      events.push_back(event(EventKind::create_failed, Level::warning, *group, &slot,
                             "attempt " + std::to_string(slot.attempt) + " failed" + said));
      if (slot.failures == settings.alert_after)
        events.push_back(event(EventKind::create_failing, Level::error, *group, &slot,
                               std::to_string(slot.failures) + " creates failed in a row"));
      break;
    case CreateOutcome::capacity:
      slot.phase = SlotPhase::empty;
      group->capacity_until = now + settings.capacity_backoff;
      if (!group->capacity_episode) group->capacity_since = now;
      if (!group->capacity_episode)
        events.push_back(event(EventKind::capacity_unavailable, Level::warning, *group, &slot,
                               "no capacity; the group waits " +
                                   std::to_string(settings.capacity_backoff.count() / 1000) + " s" +
                                   said));
      group->capacity_episode = true;
      break;
    case CreateOutcome::bootstrap:
      slot.phase = SlotPhase::joining;
      slot.leave = Leave::bootstrap;
      ++group->bootstrap_failures;
      events.push_back(event(EventKind::lifecycle_failed, Level::error, *group, &slot,
                             "the lifecycle script failed" + said));
      if (group->bootstrap_failures >= settings.max_bootstrap_failures && !group->stopped) {
        group->stopped = true;
        events.push_back(event(EventKind::group_stopped, Level::error, *group, nullptr,
                               std::to_string(group->bootstrap_failures) +
                                   " lifecycle failures in a row: no more creates until "
                                   "'auto-resume group retry " +
                                   group->spec.name + "'"));
      }
      break;
    case CreateOutcome::config:
      slot.phase = SlotPhase::empty;
      group->config_failed = true;
      events.push_back(event(EventKind::group_failed, Level::error, *group, &slot,
                             "the provider found the group's configuration wrong" + said));
      break;
  }
  if (slot.phase == SlotPhase::empty && !returns(slot.leave)) slot.leave = Leave::none;
  check_rollback_done(*group, events);
  return events;
}

std::vector<Event> on_registered(Cluster& cluster, std::string_view group_name, unsigned index,
                                 Millis now) {
  auto* group = find_group(cluster, group_name);
  if (group == nullptr) return {};
  auto& slot = slot_of(*group, index);
  if (slot.phase != SlotPhase::joining) return {};
  slot.phase = SlotPhase::waiting;
  slot.since = now;
  return {event(EventKind::instance_ready, Level::info, *group, &slot, "registered")};
}

std::vector<Event> on_terminated(Cluster& cluster, std::string_view group_name, unsigned index,
                                 bool ok, Millis now, const Settings& settings) {
  auto* group = find_group(cluster, group_name);
  if (group == nullptr) return {};
  auto& slot = slot_of(*group, index);
  if (slot.phase != SlotPhase::terminating) return {};
  std::vector<Event> events;
  slot.since = now;
  if (!ok) {
    slot.phase = SlotPhase::draining;  // terminated again after the backoff
    slot.busy = false;
    slot.retry_at = now + settings.retry_backoff;
    events.push_back(event(EventKind::terminate_failed, Level::warning, *group, &slot,
                           "the provider's terminate failed; again in " +
                               std::to_string(settings.retry_backoff.count() / 1000) + " s"));
    return events;
  }
  events.push_back(event(EventKind::instance_terminated, Level::info, *group, &slot,
                         std::string(to_string(slot.leave))));
  slot.phase = SlotPhase::empty;
  slot.busy = slot.unhealthy = slot.replace = false;
  slot.instance_id.clear();
  if (!returns(slot.leave) || group->stopped) slot.leave = Leave::none;
  check_rollback_done(*group, events);
  return events;
}

std::vector<Event> update_status(Cluster& cluster) {
  std::vector<Event> events;
  for (auto& group : cluster.groups) {
    check_rollback_done(group, events);
    const auto status = derive_status(group);
    if (status == GroupStatus::in_service) {
      group.stable_count = group.operation.count;
      group.ever_in_service = true;
    }
    if (status == group.status) continue;
    const auto level = status == GroupStatus::failed     ? Level::error
                       : status == GroupStatus::degraded ? Level::warning
                                                         : Level::info;
    events.push_back(
        event(EventKind::group_status, level, group, nullptr,
              std::string(to_string(group.status)) + " -> " + std::string(to_string(status))));
    group.status = status;
  }
  return events;
}

void retry(Group& group) {
  group.stopped = false;
  group.config_failed = false;
  group.bootstrap_failures = 0;
  group.capacity_until = Millis{0};
  for (auto& slot : group.slots) {
    slot.failures = 0;
    slot.retry_at = Millis{0};
  }
}

void roll(Group& group, unsigned batch) {
  if (batch == 0) throw ConfigError("invalid value '0' for --batch: expected at least 1");
  group.roll_batch = batch;
  for (auto& slot : group.slots)
    if (slot.phase == SlotPhase::in_service && slot.leave == Leave::none) slot.roll = true;
}

}  // namespace ar::provision
