#pragma once
// What the engine's two sources (engine.cpp: the loop and fault detection;
// repair.cpp: the repair phases) share. Private to resume/.

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "autoresume/text.hpp"  // join
#include "clock.hpp"
#include "store/step_moves.hpp"
#include "store/store.hpp"

namespace ar::resume_detail {

using std::chrono::milliseconds;
using std::chrono::seconds;

inline std::int64_t whole_seconds(milliseconds ms) { return (ms.count() + 999) / 1000; }

inline bool contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// What slurmctld refused while the engine marked nodes, for a message: ""
// or " (...)".
inline std::string notes_text(const std::vector<std::string>& notes) {
  return notes.empty() ? "" : " (" + join(notes, ", ") + ")";
}

// The key of a step's expand helper's submit for `node` (Engine::submits_).
inline std::string submit_key(const StoredStep& step, const std::string& node) {
  return fmt::format("step {}: the helper for {}", step.key(), node);
}

// The start of the keys of the calls a step made in its state and phase
// as it is now (Engine's writes_, merges_, checks_): a call's outcome is
// wanted only while its step is still there (drop_unwanted).
inline std::string call_prefix(const StoredStep& step) {
  return fmt::format(
      "step {} ({}): ", step.key(),
      step.state == StepState::repairing ? name_of(step.phase) : name_of(step.state));
}

// The key of the call `what` that a step makes where it is now.
inline std::string call_key(const StoredStep& step, std::string_view what) {
  return call_prefix(step) + std::string(what);
}

// The call that looks at the helper job for `node`, and merges it (Engine::merges_).
inline std::string merge_key(const StoredStep& step, const std::string& node) {
  return call_key(step, "merge " + node);
}

// The call that takes a running step's failed spares out of its job.
inline constexpr std::string_view kSparesOut = "spares out";

// Thrown when a step was decided elsewhere (cancelled by its srun) while
// the engine worked on it: nothing to report.
struct DecidedMeanwhile {};

// Thrown when the look's read of Slurm does not cover a step (its job, or
// whether slurmctld lists it): the step waits for the next look's read.
struct NotRead {};

// How long a relaunch waits for the old step to leave the nodes. Its tasks
// are gone within a second of the SIGKILL, and each node's step daemon
// says so (tasks_exited): once every surviving node did, the relaunch goes
// ahead, its --overlap allowing for the record. (From 7 nodes on, Slurm
// 22.05's step daemons send the step's end up a tree: the daemons above a
// dead node wait 60 s for it, and the record stays as long.) Without those
// reports, a record slurmctld still lists after the grace is cancelled
// again, once per grace, and its nodes are asked whether they still run
// it: a record a slurmctld restarted since the cancel recovered outlives
// every cancel, with no slurmstepd left, and is not waited for. While a
// node runs it (or cannot tell), the wait goes on until kOldStepGone after
// the merge; then the relaunch goes ahead. One whose first node died stays
// for minutes: the relaunch does not wait past the grace for it.
inline constexpr seconds kOldStepGrace{5};
inline constexpr seconds kOldStepGone{60};
// How long a registered step may be missing from Slurm, its srun silent as
// long, before it is over.
inline constexpr seconds kLostStepGrace{15};
// How long a helper allocation may stay pending before another node is chosen.
inline constexpr seconds kHelperPatience{30};

// How long since `since` (a repair's fact, stored with it), which is set
// to now on the wait's first call (`first`): a wait that survives a restart
// of the controller and is not moved by a step of the wall clock. For the
// helper's patience: waited_since(repair.helper_since[node], first, clock)
// >= kHelperPatience.
inline milliseconds waited_since(Stamp& since, bool first, const Clock& clock) {
  if (first) {
    since = clock.stamp();
    return milliseconds{0};
  }
  return clock.since(since);
}

}  // namespace ar::resume_detail
