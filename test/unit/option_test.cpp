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
