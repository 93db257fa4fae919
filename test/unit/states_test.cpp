#include "autoresume/states.hpp"

#include <catch2/catch.hpp>
#include <set>
#include <string>

namespace {

// Every value of E named, each name read back as its value.
template <typename E>
void round_trips(E last) {
  std::set<std::string_view> seen;
  for (std::size_t i = 0; i <= static_cast<std::size_t>(last); ++i) {
    const auto value = static_cast<E>(i);
    const auto name = ar::name_of(value);
    INFO("value " << i << " named '" << std::string(name) << "'");
    CHECK(seen.insert(name).second);
    CHECK(ar::parse_name<E>(name) == value);
  }
}

}  // namespace

TEST_CASE("every state has one name and reads back", "[states]") {
  round_trips(ar::StepState::decided);
  round_trips(ar::RepairPhase::expanded);
  round_trips(ar::RepairMode::force);
  round_trips(ar::NodeRepairState::failed);
  CHECK(ar::parse_name<ar::StepState>("decided") == ar::StepState::decided);
  CHECK_FALSE(ar::parse_name<ar::StepState>("Decided"));
  CHECK_FALSE(ar::parse_name<ar::RepairMode>(""));
  CHECK(ar::parse_name<ar::RepairPhase>("") == ar::RepairPhase::none);
}

TEST_CASE("event kinds are named as the store and docs name them", "[states]") {
  CHECK(ar::name_of(ar::EventKind::heartbeat_crowd) == "heartbeat_crowd");
  CHECK(ar::name_of(ar::EventKind::spares_short) == "spares_short");
  // A node back in service and a node joining a step share "replaced".
  CHECK(ar::name_of(ar::EventKind::node_replaced) == "replaced");
  CHECK(ar::name_of(ar::EventKind::replaced) == "replaced");
  CHECK(ar::parse_name<ar::EventKind>("replaced") == ar::EventKind::replaced);
  for (const auto verdict : {ar::Verdict::relaunch, ar::Verdict::requeued, ar::Verdict::give_up,
                             ar::Verdict::cancelled, ar::Verdict::no_fault})
    CHECK(ar::name_of(ar::event_of(verdict)) == ar::to_string(verdict));
}
