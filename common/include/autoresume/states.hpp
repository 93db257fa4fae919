#pragma once
// The controller's states and event kinds, each an enum with one name table:
// the names are what the store keeps, the wire shows (protocol.hpp) and the
// docs list. Slurm-free, like the rest of common/.

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

#include "autoresume/resume.hpp"

namespace ar {

// Where a protected step stands: `registered` while it runs, `ended` once
// its srun reported the end and waits for a verdict, `repairing` while a
// node fault is handled, `decided` once its verdict holds the answer.
enum class StepState { registered, ended, repairing, decided };

// How far a repair got (resumed from there after a restart): `detected`
// (the policy checks), `node_out` (FAIL mark, shrink, old step cancelled),
// `replaced` (replacement nodes chosen), `expanded` (merged into the job).
enum class RepairPhase { none, detected, node_out, replaced, expanded };

// How an admin's replacement treats the jobs on the node: `wait` lets them
// finish, `now` moves protected steps off it at once, `force` then kills
// the rest (the `replace` request's mode).
enum class RepairMode { wait, now, force };

// Where the replacement of a node stands: `waiting` for the jobs on it to
// end, `replacing` while the provider works (or waits to be asked again),
// `returning` until its new instance has registered, `failed` once the
// provider gave up (the node stays out; an admin takes over).
enum class NodeRepairState { waiting, replacing, returning, failed };

// What an event records (docs/resume.md and docs/nodes.md list them). A
// step's `replaced` (a node joins it) and a node's (back in service) share
// their name; parse_name gives the step's.
enum class EventKind {
  // a step's life
  registered,
  ended,
  detected,
  node_out,
  spare_taken,
  replaced,
  replaced_all,
  expand_helper,
  expand_retry,
  merged,
  expanded,
  error,
  hung,          // its tasks stopped beating (progress.hpp)
  hang_signal,   // the hang signal sent to its tasks
  checked,       // its nodes' quick checks after it failed: none failed
  check_failed,  // ... a node failed one (a fault: the step is repaired)
  step_refused,  // a registration past a cap on the store's growth (store.hpp)
  step_reused,   // a relaunch got an earlier attempt's step id (slurmctld lost it)
  // its verdicts
  relaunch,
  requeued,
  give_up,
  cancelled,
  no_fault,
  // a node's replacement
  replace_requested,
  waiting,
  forced,
  jobs_gone,
  provider,
  provider_done,
  provider_failed,
  replace_failed,
  replace_dropped,
  node_replaced,
  // heartbeats and spares
  marked,
  stalled,
  heartbeat_crowd,
  heartbeat_late,
  no_provider,
  spare_added,
  spares_short,
  // the resume engine's probes
  probe_crowd,
  probe_disputed,
  // evidence before action (docs/resume.md)
  suspected,
  suspect_cleared,
  suspect_crowd,
  // guard rails (docs/guard.md)
  would,
  paused,
  unpaused,
  breaker_tripped,
  actions_resumed,
  // slurmctld itself (docs/design.md, "Who waits where")
  slurm_slow,  // no answer for the node list within kSlowRead, or a refusal
  slurm_back,  // it answers again
};

namespace name_tables {
// Each table lists the names in the enum's order.
template <typename E>
struct Table;
template <>
struct Table<StepState> {
  static constexpr std::array<std::string_view, 4> value{"registered", "ended", "repairing",
                                                         "decided"};
};
template <>
struct Table<RepairPhase> {
  static constexpr std::array<std::string_view, 5> value{"", "detected", "node_out", "replaced",
                                                         "expanded"};
};
template <>
struct Table<RepairMode> {
  static constexpr std::array<std::string_view, 3> value{"wait", "now", "force"};
};
template <>
struct Table<NodeRepairState> {
  static constexpr std::array<std::string_view, 4> value{"waiting", "replacing", "returning",
                                                         "failed"};
};
template <>
struct Table<EventKind> {
  static constexpr std::array<std::string_view, 52> value{"registered",
                                                          "ended",
                                                          "detected",
                                                          "node_out",
                                                          "spare_taken",
                                                          "replaced",
                                                          "replaced_all",
                                                          "expand_helper",
                                                          "expand_retry",
                                                          "merged",
                                                          "expanded",
                                                          "error",
                                                          "hung",
                                                          "hang_signal",
                                                          "checked",
                                                          "check_failed",
                                                          "step_refused",
                                                          "step_reused",
                                                          "relaunch",
                                                          "requeued",
                                                          "give_up",
                                                          "cancelled",
                                                          "no_fault",
                                                          "replace_requested",
                                                          "waiting",
                                                          "forced",
                                                          "jobs_gone",
                                                          "provider",
                                                          "provider_done",
                                                          "provider_failed",
                                                          "replace_failed",
                                                          "replace_dropped",
                                                          "replaced",
                                                          "marked",
                                                          "stalled",
                                                          "heartbeat_crowd",
                                                          "heartbeat_late",
                                                          "no_provider",
                                                          "spare_added",
                                                          "spares_short",
                                                          "probe_crowd",
                                                          "probe_disputed",
                                                          "suspected",
                                                          "suspect_cleared",
                                                          "suspect_crowd",
                                                          "would",
                                                          "paused",
                                                          "unpaused",
                                                          "breaker_tripped",
                                                          "actions_resumed",
                                                          "slurm_slow",
                                                          "slurm_back"};
};

// A table per enum, as long as the enum.
static_assert(Table<StepState>::value.size() == static_cast<std::size_t>(StepState::decided) + 1);
static_assert(Table<RepairPhase>::value.size() ==
              static_cast<std::size_t>(RepairPhase::expanded) + 1);
static_assert(Table<RepairMode>::value.size() == static_cast<std::size_t>(RepairMode::force) + 1);
static_assert(Table<NodeRepairState>::value.size() ==
              static_cast<std::size_t>(NodeRepairState::failed) + 1);
static_assert(Table<EventKind>::value.size() ==
              static_cast<std::size_t>(EventKind::slurm_back) + 1);
}  // namespace name_tables

template <typename E>
constexpr std::string_view name_of(E value) {
  return name_tables::Table<E>::value.at(static_cast<std::size_t>(value));
}

// The value a name stands for; nothing for a name the table does not have.
template <typename E>
constexpr std::optional<E> parse_name(std::string_view text) {
  const auto& table = name_tables::Table<E>::value;
  for (std::size_t i = 0; i < table.size(); ++i)
    if (table[i] == text) return static_cast<E>(i);
  return std::nullopt;
}

// A verdict's event.
constexpr EventKind event_of(Verdict verdict) {
  switch (verdict) {
    case Verdict::relaunch:
      return EventKind::relaunch;
    case Verdict::requeued:
      return EventKind::requeued;
    case Verdict::give_up:
      return EventKind::give_up;
    case Verdict::no_fault:
      return EventKind::no_fault;
    default:
      return EventKind::cancelled;
  }
}

}  // namespace ar
