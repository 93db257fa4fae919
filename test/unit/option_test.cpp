#include "autoresume/option.hpp"

#include <catch2/catch.hpp>

#include "autoresume/keyvalue.hpp"

using Catch::Matchers::Contains;

TEST_CASE("the auto-resume option takes 0 or 1", "[option]") {
  CHECK(ar::parse_auto_resume("1"));
  CHECK_FALSE(ar::parse_auto_resume("0"));
}

TEST_CASE("the auto-resume option rejects other values, naming them", "[option]") {
  for (const auto* bad : {"banana", "2", "", "-1", "10", "1 ", "on", "true"}) {
    INFO(bad);
    CHECK_THROWS_WITH(ar::parse_auto_resume(bad),
                      Contains(std::string("'") + bad + "'") && Contains("--auto-resume"));
  }
  CHECK_THROWS_WITH(ar::parse_auto_resume(nullptr), Contains("requires a value"));
}

TEST_CASE("the option's help text starts with the plugin's tag", "[option]") {
  CHECK(std::string_view(ar::kOptionUsage).starts_with("[auto_resume]"));
  CHECK(std::string_view(ar::kOptionName) == "auto-resume");
}

TEST_CASE("the spares and min-nodes options take a node count", "[option]") {
  CHECK(ar::parse_node_count(ar::kSparesOptionName, "0") == 0);
  CHECK(ar::parse_node_count(ar::kSparesOptionName, "2") == 2);
  CHECK(ar::parse_node_count(ar::kMinNodesOptionName, "1000000") == 1'000'000);
  for (const auto* bad : {"", "-1", "1.5", "two", "1000001", "99999999999999999999", " 2", "2k"}) {
    INFO(bad);
    CHECK_THROWS_WITH(ar::parse_node_count(ar::kSparesOptionName, bad),
                      Contains("--auto-resume-spares") &&
                          Contains(*bad ? std::string("'") + bad + "'" : "requires a value"));
  }
  CHECK_THROWS_WITH(ar::parse_node_count(ar::kMinNodesOptionName, nullptr),
                    Contains("--auto-resume-min-nodes requires a value"));
  CHECK(std::string_view(ar::kSparesUsage).starts_with("[auto_resume]"));
  CHECK(std::string_view(ar::kMinNodesUsage).starts_with("[auto_resume]"));
}

TEST_CASE("a job's spares leave its sruns the other nodes, never none", "[option]") {
  CHECK(ar::nodes_without_spares(5, 1) == 4U);
  CHECK(ar::nodes_without_spares(5, 4) == 1U);
  CHECK_FALSE(ar::nodes_without_spares(5, 5));
  CHECK_FALSE(ar::nodes_without_spares(2, 7));
  CHECK_FALSE(ar::nodes_without_spares(5, 0));
}
