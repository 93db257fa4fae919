#include "autoresume/endpoint.hpp"

#include <catch2/catch.hpp>

#include "autoresume/keyvalue.hpp"

using Catch::Matchers::Contains;

TEST_CASE("parse_endpoint reads HOST:PORT and [IPv6]:PORT", "[endpoint]") {
  CHECK(ar::parse_endpoint("c", "127.0.0.1:7860") == ar::Endpoint{"127.0.0.1", 7860});
  CHECK(ar::parse_endpoint("c", "ctl.example.org:1") == ar::Endpoint{"ctl.example.org", 1});
  const auto v6 = ar::parse_endpoint("c", "[::1]:65535");
  CHECK(v6 == ar::Endpoint{"::1", 65535});
  CHECK(v6.str() == "[::1]:65535");
  CHECK(ar::Endpoint{"h", 5}.str() == "h:5");
}

TEST_CASE("parse_endpoint rejects bad endpoints, naming key and value", "[endpoint]") {
  for (const auto* bad : {"", "host", ":7860", "host:", "host:0", "host:65536", "host:x",
                          "::1:7860", "[]:1", "a b:1"}) {
    INFO(bad);
    CHECK_THROWS_WITH(ar::parse_endpoint("controller", bad),
                      Contains(std::string("'") + bad + "'") && Contains("controller"));
  }
}
