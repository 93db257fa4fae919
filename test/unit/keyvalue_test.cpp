#include "autoresume/keyvalue.hpp"

#include <catch2/catch.hpp>

using namespace std::chrono_literals;
using Catch::Matchers::Contains;

TEST_CASE("split_key_value trims and splits at the first '='", "[keyvalue]") {
  const auto kv = ar::split_key_value("  key = a=b ");
  CHECK(kv.key == "key");
  CHECK(kv.value == "a=b");
  CHECK(ar::split_key_value("empty=").value.empty());
}

TEST_CASE("split_key_value names a token without key or '='", "[keyvalue]") {
  CHECK_THROWS_WITH(ar::split_key_value("novalue"), Contains("'novalue'"));
  CHECK_THROWS_WITH(ar::split_key_value("=1"), Contains("missing key") && Contains("'=1'"));
}

TEST_CASE("parse_flag takes exactly 0 or 1", "[keyvalue]") {
  CHECK_FALSE(ar::parse_flag("k", "0"));
  CHECK(ar::parse_flag("k", "1"));
  for (const auto* bad : {"", "2", "yes", "true", " 1", "01"})
    CHECK_THROWS_WITH(ar::parse_flag("k", bad),
                      Contains(std::string("'") + bad + "'") && Contains("for k"));
}

TEST_CASE("parse_uint checks syntax and range", "[keyvalue]") {
  CHECK(ar::parse_uint("n", "0", 0, 5) == 0);
  CHECK(ar::parse_uint("n", "5", 0, 5) == 5);
  for (const auto* bad : {"", "6", "-1", "1.5", "3x", "x", "99999999999999999999999"})
    CHECK_THROWS_WITH(ar::parse_uint("n", bad, 0, 5),
                      Contains(std::string("'") + bad + "'") && Contains("from 0 to 5"));
}

TEST_CASE("parse_seconds takes fractions from the minimum up to the maximum", "[keyvalue]") {
  CHECK(ar::parse_seconds("t", "2", 60s) == 2000ms);
  CHECK(ar::parse_seconds("t", "0.25", 60s) == 250ms);
  CHECK(ar::parse_seconds("t", "0.1", 60s) == 100ms);
  CHECK(ar::parse_seconds("t", "60", 60s) == 60000ms);
  CHECK(ar::parse_seconds("t", "1", 60s, 1s) == 1000ms);
  CHECK_THROWS_WITH(ar::parse_seconds("t", "0.0001", 60s),
                    Contains("invalid value '0.0001' for t: expected seconds from 0.1 to 60"));
  CHECK_THROWS_WITH(ar::parse_seconds("t", "0.5", 60s, 1s),
                    Contains("expected seconds from 1 to 60"));
  for (const auto* bad : {"", "0", "-1", "61", "1s", "nan", "inf", "abc"})
    CHECK_THROWS_WITH(ar::parse_seconds("t", bad, 60s),
                      Contains(std::string("'") + bad + "'") && Contains("for t"));
}

TEST_CASE("trim drops surrounding whitespace only", "[keyvalue]") {
  CHECK(ar::trim(" \t a b \r\n") == "a b");
  CHECK(ar::trim("   ").empty());
}

TEST_CASE("parse_absolute_path takes only absolute paths", "[keyvalue]") {
  CHECK(ar::parse_absolute_path("p", "/a/b") == "/a/b");
  for (const auto* bad : {"", "a/b", "./a", "~/a"})
    CHECK_THROWS_WITH(ar::parse_absolute_path("p", bad),
                      Contains(std::string("'") + bad + "'") && Contains("for p"));
}

TEST_CASE("parse_since takes Unix seconds, a UTC time or an age", "[keyvalue]") {
  constexpr std::int64_t now = 1'800'000'000;
  CHECK(ar::parse_since("--since", "1796000000", now) == 1'796'000'000);
  CHECK(ar::parse_since("--since", "2026-11-29T14:05:00Z", now) == 1'795'961'100);
  CHECK(ar::parse_since("--since", "2026-11-29T14:05:00", now) == 1'795'961'100);
  CHECK(ar::parse_since("--since", "90s", now) == now - 90);
  CHECK(ar::parse_since("--since", "10m", now) == now - 600);
  CHECK(ar::parse_since("--since", "2h", now) == now - 7200);
  CHECK(ar::parse_since("--since", "1d", now) == now - 86400);
  CHECK(ar::parse_since("--since", "999999999d", 1000) == 0);  // not before the epoch
  for (const char* bad :
       {"", "yesterday", "10x", "m", "-5m", "2026-11-29", "2026-11-29T14:05:00+01"})
    CHECK_THROWS_WITH(ar::parse_since("--since", bad, now),
                      Catch::Contains(std::string("--since '") + bad + "'"));
}
