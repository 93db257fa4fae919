// auto-resume-healthcheck's configuration file
// (ar::health::parse_health_config), and the GRES string the checker reads
// the node's GPU count from (ar::health::gpu_count_from_gres: the input's
// first line). Bad input must be refused with a ConfigError (the GRES:
// std::invalid_argument), nothing else.

#include "autoresume/health_config.hpp"

#include <stdexcept>

#include "autoresume/health.hpp"
#include "autoresume/keyvalue.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto input = ar::fuzz::text(data, size);
  try {
    (void)ar::health::parse_health_config(input, "healthcheck.conf");
  } catch (const ar::ConfigError&) {
  }
  try {
    (void)ar::health::gpu_count_from_gres(input.substr(0, input.find('\n')));
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
