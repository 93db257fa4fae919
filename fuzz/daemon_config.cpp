// The controller's configuration file (ar::parse_daemon_config). Bad input
// must be refused with a ConfigError, nothing else; a configuration
// accepted must be rendered (`auto-resumed --check-config`) as a file that
// parses back to the same configuration, and its warnings
// (ar::config_warnings) can be computed.

#include "autoresume/daemon_config.hpp"

#include "autoresume/keyvalue.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ar::DaemonConfig config;
  try {
    config = ar::parse_daemon_config(ar::fuzz::text(data, size), "auto-resumed.conf");
  } catch (const ar::ConfigError&) {
    return 0;
  }
  ar::config_warnings(config);
  const auto once = ar::render(config);
  std::string twice;
  try {
    twice = ar::render(ar::parse_daemon_config(once, "rendered"));
  } catch (const ar::ConfigError& e) {
    ar::fuzz::finding("the rendered configuration does not parse: " + std::string(e.what()) + "\n" +
                      once);
  }
  if (once != twice) ar::fuzz::finding("rendered\n" + once + "came back as\n" + twice);
  return 0;
}
