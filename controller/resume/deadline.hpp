#pragma once
// When a protected step that is not decided yet must be, whatever else
// fails (slurmctld away, the store full): the engine decides give_up then,
// and the server answers give_up from that moment even if it cannot be
// stored.

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "autoresume/daemon_config.hpp"
#include "clock.hpp"
#include "resume/detail.hpp"  // whole_seconds
#include "store/store.hpp"

namespace ar {

// A step's deadline: `within` of the stored moment `from` (clock.hpp:
// Stamp; a wall clock step moves neither).
struct Deadline {
  Stamp from;
  std::chrono::milliseconds within{0};

  bool past(const Clock& clock) const { return clock.since(from) > within; }
};

// A repair's start plus repair_timeout (plus the longest backoff once the
// job is expanded: the backoff is not part of the repair), or an ended
// step's end plus end_window plus repair_timeout; nothing while the step
// runs or once it is decided.
inline std::optional<Deadline> decide_by(const StoredStep& step, const DaemonConfig& config) {
  if (step.state == StepState::repairing) {
    const auto& started = step.repair.started;
    if (!started) return std::nullopt;
    return Deadline{*started, config.repair_timeout + (step.phase == RepairPhase::expanded
                                                           ? DaemonConfig::kMaxBackoff
                                                           : std::chrono::milliseconds{0})};
  }
  if (step.state == StepState::ended)
    return Deadline{step.ended(), config.end_window + config.repair_timeout};
  return std::nullopt;
}

// The give_up message of a step past decide_by.
inline std::string overdue(const StoredStep& step, const DaemonConfig& config) {
  if (step.state == StepState::ended)
    return fmt::format(
        "no verdict within end_window={} s and repair_timeout={} s of the step's end (slurmctld "
        "or the controller's store failed meanwhile)",
        resume_detail::whole_seconds(config.end_window),
        resume_detail::whole_seconds(config.repair_timeout));
  return fmt::format("the repair did not finish within repair_timeout={} s (it got to '{}')",
                     resume_detail::whole_seconds(config.repair_timeout), name_of(step.phase));
}

}  // namespace ar
