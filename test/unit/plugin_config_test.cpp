#include "autoresume/plugin_config.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "autoresume/keyvalue.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using Args = std::vector<std::string>;

TEST_CASE("plugstack arguments default sanely", "[plugin_config]") {
  const auto config = ar::parse_plugin_config(Args{});
  CHECK(config.controller == ar::Endpoint{"127.0.0.1", ar::kDefaultPort});
  CHECK_FALSE(config.required);
  CHECK(config.connect_timeout == 2s);
  CHECK(config.verdict_timeout == 2700s);
  CHECK(config.unreachable_timeout == 60s);
}

TEST_CASE("plugstack arguments parse into the typed config", "[plugin_config]") {
  const auto config =
      ar::parse_plugin_config(Args{"controller=ctl:9000", "required=1", "connect_timeout=0.5"});
  CHECK(config.controller == ar::Endpoint{"ctl", 9000});
  CHECK(config.required);
  CHECK(config.connect_timeout == 500ms);
}

TEST_CASE("srun's wait for a verdict has limits the plugstack line sets", "[plugin_config]") {
  const auto config =
      ar::parse_plugin_config(Args{"verdict_timeout=1200", "unreachable_timeout=2.5"});
  CHECK(config.verdict_timeout == 1200s);
  CHECK(config.unreachable_timeout == 2500ms);
  CHECK(ar::parse_plugin_config(Args{"verdict_timeout=86400"}).verdict_timeout == 86400s);
  CHECK(ar::parse_plugin_config(Args{"unreachable_timeout=1"}).unreachable_timeout == 1s);
  for (const auto* bad : {"0", "0.5", "86401", "-1", "ten", "", "inf", "nan"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH(ar::parse_plugin_config(Args{std::string("verdict_timeout=") + bad}),
                      Contains(std::string("'") + bad + "'") && Contains("verdict_timeout") &&
                          Contains("from 1 to 86400"));
  }
  for (const auto* bad : {"0", "3601", "1m"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH(ar::parse_plugin_config(Args{std::string("unreachable_timeout=") + bad}),
                      Contains(std::string("'") + bad + "'") && Contains("unreachable_timeout") &&
                          Contains("from 1 to 3600"));
  }
}

TEST_CASE("a later plugstack argument overrides an earlier one", "[plugin_config]") {
  CHECK_FALSE(ar::parse_plugin_config(Args{"required=1", "required=0"}).required);
}

TEST_CASE("bad plugstack arguments are errors naming them", "[plugin_config]") {
  CHECK_THROWS_WITH(ar::parse_plugin_config(Args{"socket=/run/x"}),
                    Contains("unknown") && Contains("'socket'") && Contains("controller"));
  CHECK_THROWS_WITH(ar::parse_plugin_config(Args{"required=yes"}),
                    Contains("'yes'") && Contains("required"));
  CHECK_THROWS_WITH(ar::parse_plugin_config(Args{"controller=nohost"}), Contains("'nohost'"));
  CHECK_THROWS_WITH(ar::parse_plugin_config(Args{"connect_timeout=0"}),
                    Contains("'0'") && Contains("connect_timeout"));
  CHECK_THROWS_WITH(ar::parse_plugin_config(Args{"required"}), Contains("'required'"));
  CHECK_THROWS_WITH(ar::parse_plugin_config(Args{"munge_socket=run/m"}),
                    Contains("'run/m'") && Contains("absolute"));
}

TEST_CASE("controller_uid sets whose credential the client believes", "[plugin_config]") {
  CHECK(ar::parse_plugin_config(std::vector<std::string>{}).controller_uid == 0);
  const std::vector<std::string> args{"controller_uid=64030", "controller=h:1"};
  const auto config = ar::parse_plugin_config(args);
  CHECK(config.controller_uid == 64030);
  CHECK(ar::client_options(config).controller_uid == 64030);
  CHECK(ar::client_options(config).endpoint == ar::Endpoint{"h", 1});
  const std::vector<std::string> bad{"controller_uid=root"};
  CHECK_THROWS_WITH(ar::parse_plugin_config(bad), Catch::Matchers::Contains("controller_uid") &&
                                                      Catch::Matchers::Contains("'root'"));
}
