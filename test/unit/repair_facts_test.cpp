// A repair's facts (controller/store/repair_facts.hpp): a struct in the
// controller, one JSON object in the store, with the keys an older
// controller wrote.
#include "store/repair_facts.hpp"

#include <catch2/catch.hpp>
#include <stdexcept>

namespace {

using ar::proto::json;

}  // namespace

TEST_CASE("a repair's facts go to the store's JSON and back unchanged", "[store][repair]") {
  ar::RepairFacts facts;
  facts.failed = {{"node3", "it is DOWN", 1700}, {"node4", "its agent is silent", 0}};
  facts.replacements = {"node5", "node6"};
  facts.helpers = {{"node5", 5000}};
  facts.merged = {"node6"};
  facts.passed_over = {"node7"};
  facts.step_nodes = 3;
  facts.streak = 2;
  facts.relaunch = ar::RelaunchPlan{"node[1-2,5-6]", 4, 3};
  facts.started = ar::Stamp{1'800'000'000, 12'000, "boot-a"};
  facts.expanded = ar::Stamp{1'800'000'010, 22'000, "boot-a"};
  facts.out = ar::Stamp{1'800'000'002, 14'000, "boot-a"};
  facts.old_step_cancelled = ar::Stamp{1'800'000'011, 23'000, "boot-a"};
  facts.helper_since = {{"node5", ar::Stamp{1'800'000'005, 17'000, "boot-a"}},
                        {"gpu_at_1", ar::Stamp{1'800'000'006, 18'000, "boot-a"}}};
  const auto object = ar::to_json(facts);
  CHECK(object["failed"][0] == json{{"node", "node3"}, {"why", "it is DOWN"}, {"instance", 1700}});
  CHECK(object["helper_since_node5_at"] == 1'800'000'005);
  CHECK(object["relaunch"] ==
        json{{"nodelist", "node[1-2,5-6]"}, {"num_nodes", 4}, {"step_nodes", 3}});
  CHECK(ar::repair_facts_from_json(json::parse(object.dump())) == facts);
  CHECK(ar::to_json(ar::RepairFacts{}) == json::object());
  CHECK(ar::repair_facts_from_json(json::object()) == ar::RepairFacts{});
}

TEST_CASE("a repair stored by an older controller reads back", "[store][repair]") {
  // Wall times only (before the boot fields), an unused "restarted", a
  // relaunch with no step_nodes.
  const auto old = json::parse(R"({
    "failed": [{"node": "node3", "why": "it is DOWN", "instance": 17}],
    "replacements": ["node5"], "restarted": {}, "helpers": {"node5": 5000},
    "merged": ["node5"], "started_at": 1700000000, "expanded_at": 1700000030,
    "relaunch": {"nodelist": "node[1-2,4-5]", "num_nodes": 4}})");
  const auto facts = ar::repair_facts_from_json(old);
  CHECK(facts.failed_nodes() == std::vector<std::string>{"node3"});
  CHECK(facts.helpers.at("node5") == 5000);
  CHECK(facts.started == ar::Stamp{1'700'000'000, 0, ""});
  CHECK(facts.expanded == ar::Stamp{1'700'000'030, 0, ""});
  CHECK(facts.relaunch == ar::RelaunchPlan{"node[1-2,4-5]", 4, 0});
  CHECK_FALSE(facts.step_nodes);
  CHECK_FALSE(facts.streak);
}

TEST_CASE("a repair's field of the wrong type is named", "[store][repair]") {
  CHECK_THROWS_WITH(ar::repair_facts_from_json(json{{"helpers", {{"node5", "x"}}}}),
                    Catch::Contains("a repair's 'helpers' is {\"node5\":\"x\"}"));
  CHECK_THROWS_WITH(ar::repair_facts_from_json(json{{"failed", {1}}}),
                    Catch::Contains("a repair's failed node is 1"));
  CHECK_THROWS_AS(ar::repair_facts_from_json(json::array()), std::invalid_argument);
}
