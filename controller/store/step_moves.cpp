#include "store/step_moves.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <stdexcept>

namespace ar {

namespace {

constexpr StepPlace kRegistered{StepState::registered, RepairPhase::none};
constexpr StepPlace kEnded{StepState::ended, RepairPhase::none};
constexpr StepPlace kDecided{StepState::decided, RepairPhase::none};
constexpr StepPlace repairing(RepairPhase phase) { return {StepState::repairing, phase}; }

}  // namespace

StepPlace place_of(const StoredStep& step) {
  return {step.state, step.state == StepState::repairing ? step.phase : RepairPhase::none};
}

std::string to_string(const StepPlace& place) {
  if (place.state != StepState::repairing) return std::string(name_of(place.state));
  return fmt::format("{}/{}", name_of(place.state), name_of(place.phase));
}

const std::vector<std::pair<StepPlace, StepPlace>>& step_moves() {
  using enum RepairPhase;
  static const std::vector<std::pair<StepPlace, StepPlace>> moves{
      // srun says the step ended (the server).
      {kRegistered, kEnded},
      // A node of the step at fault.
      {kRegistered, repairing(detected)},
      {kEnded, repairing(detected)},
      // The policy allows a repair: the failed nodes leave the job.
      {repairing(detected), repairing(node_out)},
      // Replacements chosen; or the job's own nodes are enough.
      {repairing(node_out), repairing(replaced)},
      {repairing(node_out), repairing(expanded)},
      // Merged into the job.
      {repairing(replaced), repairing(expanded)},
      // A chosen replacement given up (its helper waited too long, Slurm
      // refused it, or it failed before it joined): another is chosen.
      {repairing(replaced), repairing(node_out)},
      {repairing(expanded), repairing(node_out)},
      // Another node of the job failed meanwhile, or a slurmctld restarted
      // from an older state has the failed node in the job again.
      {repairing(node_out), repairing(detected)},
      {repairing(replaced), repairing(detected)},
      {repairing(expanded), repairing(detected)},
      // A slurmctld restarted from an older state lost a merge.
      {repairing(expanded), repairing(replaced)},
      // Verdicts: from anywhere not decided yet.
      {kRegistered, kDecided},
      {kEnded, kDecided},
      {repairing(detected), kDecided},
      {repairing(node_out), kDecided},
      {repairing(replaced), kDecided},
      {repairing(expanded), kDecided},
  };
  return moves;
}

bool may_move(const StepPlace& from, const StepPlace& to) {
  if (from == to) return true;
  return std::ranges::find(step_moves(), std::pair{from, to}) != step_moves().end();
}

bool may_reach(const StepPlace& from, const StepPlace& to) {
  std::vector<StepPlace> seen{from};
  for (std::size_t i = 0; i < seen.size(); ++i) {
    if (seen[i] == to) return true;
    for (const auto& [a, b] : step_moves())
      if (a == seen[i] && std::ranges::find(seen, b) == seen.end()) seen.push_back(b);
  }
  return false;
}

void move_to(StoredStep& step, StepState state, RepairPhase phase) {
  const auto from = place_of(step);
  const StepPlace to{state, state == StepState::repairing ? phase : RepairPhase::none};
  if (!may_move(from, to))
    throw std::logic_error(
        fmt::format("step {}: no move from {} to {}", step.key(), to_string(from), to_string(to)));
  step.state = state;
  if (state == StepState::repairing) step.phase = phase;
}

}  // namespace ar
