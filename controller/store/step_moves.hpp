#pragma once
// Where a protected step may go from where it is: the one table of its
// moves, and the one function that moves it (the engine's repair phases,
// its verdicts, and the server's end and give_up alike). A move the table
// does not hold is a bug: it throws instead of storing a step in a place no
// code expects. docs/design.md ("A step's moves") draws the same table; a
// unit test holds the two to each other.
//
// A place is a step's state, with its repair's phase while it repairs:
// `registered`, `ended`, `repairing/PHASE`, `decided` (a decided step keeps
// the phase its repair had reached, as a fact, not a place).

#include <string>
#include <utility>
#include <vector>

#include "autoresume/states.hpp"
#include "store/store.hpp"

namespace ar {

struct StepPlace {
  StepState state = StepState::registered;
  RepairPhase phase = RepairPhase::none;  // repairing only
  friend bool operator==(const StepPlace&, const StepPlace&) = default;
};

// The step's place now.
StepPlace place_of(const StoredStep& step);
// "registered", "repairing/node_out", ...
std::string to_string(const StepPlace& place);

// Every move a step may make, in the order docs/design.md lists them.
const std::vector<std::pair<StepPlace, StepPlace>>& step_moves();
// Whether `from` -> `to` is one of them (staying where it is always is).
bool may_move(const StepPlace& from, const StepPlace& to);
// Whether `to` is reached from `from` by moves of the table (what a save
// over a stored row may do: the engine saves a repair's copy once per
// phase, not once per move; a copy older than the row cannot take it back).
bool may_reach(const StepPlace& from, const StepPlace& to);

// Moves `step` to `state` (with `phase` when it is repairing; a decided step
// keeps its phase). Throws std::logic_error naming both places when the
// table holds no such move.
void move_to(StoredStep& step, StepState state, RepairPhase phase = RepairPhase::none);

}  // namespace ar
