// The table of a protected step's moves (controller/store/step_moves.hpp),
// and the diagram docs/design.md draws of it.
#include "store/step_moves.hpp"

#include <catch2/catch.hpp>
#include <fstream>
#include <regex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine_rig.hpp"

namespace {

using ar::StepPlace;

// The moves of docs/design.md's "A step's moves" block, as "FROM -> TO".
std::vector<std::string> drawn_moves() {
  std::ifstream in(std::string(AR_DOCS) + "/design.md");
  REQUIRE(in);
  std::vector<std::string> out;
  std::string line;
  bool in_section = false;
  bool in_block = false;
  const std::regex move(R"(^\s*([a-z_/]+) -> ([a-z_/]+)(\s.*)?$)");
  while (std::getline(in, line)) {
    if (line.starts_with("- **A step's moves**")) in_section = true;
    if (!in_section) continue;
    if (line.find("```") != std::string::npos) {
      if (in_block) break;
      in_block = true;
      continue;
    }
    std::smatch m;
    if (in_block && std::regex_match(line, m, move))
      out.push_back(m[1].str() + " -> " + m[2].str());
  }
  return out;
}

}  // namespace

TEST_CASE("the table of a step's moves is the one docs/design.md draws", "[moves]") {
  const auto drawn = drawn_moves();
  REQUIRE_FALSE(drawn.empty());
  std::vector<std::string> table;
  for (const auto& [from, to] : ar::step_moves())
    table.push_back(ar::to_string(from) + " -> " + ar::to_string(to));
  CHECK(drawn == table);
}

TEST_CASE("a step moves only as the table says", "[moves]") {
  Rig rig;
  rig.protect();
  auto step = rig.step();
  // Staying is always allowed; a step never goes back.
  CHECK_NOTHROW(ar::move_to(step, StepState::registered));
  CHECK_THROWS_AS(ar::move_to(step, StepState::repairing, RepairPhase::expanded), std::logic_error);
  ar::move_to(step, StepState::repairing, RepairPhase::detected);
  CHECK_THROWS_WITH(ar::move_to(step, StepState::ended),
                    "step r#0: no move from repairing/detected to ended");
  CHECK_THROWS_AS(ar::move_to(step, StepState::repairing, RepairPhase::replaced),
                  std::logic_error);  // node_out first
  ar::move_to(step, StepState::repairing, RepairPhase::node_out);
  ar::move_to(step, StepState::repairing, RepairPhase::expanded);
  ar::move_to(step, StepState::decided);
  CHECK(step.phase == RepairPhase::expanded);  // kept, as a fact
  CHECK_THROWS_AS(ar::move_to(step, StepState::registered), std::logic_error);
  CHECK_THROWS_AS(ar::move_to(step, StepState::repairing, RepairPhase::detected), std::logic_error);
}

TEST_CASE("what a save may do is what the moves reach", "[moves][store]") {
  const StepPlace registered{StepState::registered, RepairPhase::none};
  const StepPlace ended{StepState::ended, RepairPhase::none};
  const StepPlace expanded{StepState::repairing, RepairPhase::expanded};
  const StepPlace detected{StepState::repairing, RepairPhase::detected};
  CHECK(ar::may_reach(registered, expanded));
  CHECK(ar::may_reach(expanded, detected));
  CHECK_FALSE(ar::may_move(registered, expanded));
  CHECK_FALSE(ar::may_reach(ended, registered));
  CHECK_FALSE(ar::may_reach(expanded, ended));
  // srun said the step ended while the engine held a copy from before: the
  // copy cannot take the stored step back.
  Rig rig;
  rig.protect();
  const auto old = rig.step();
  REQUIRE(rig.store->mark_ended(old, rig.clock.stamp(), {EventKind::ended, "srun says so"}));
  CHECK_THROWS_WITH(rig.store->save(old, std::nullopt),
                    "step r#0: no move from ended (stored) to registered");
  CHECK(rig.step().state == StepState::ended);
}
