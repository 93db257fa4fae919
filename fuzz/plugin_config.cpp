// What the SPANK plugin parses: its plugstack.conf arguments (one per line
// of the input; ar::parse_plugin_config), the value of srun's
// --auto-resume option (ar::parse_auto_resume) and the relaunch marker a
// relaunched srun finds in its environment (ar::RelaunchMarker::decode).
// Bad input must be refused with a ConfigError (or no marker), nothing
// else; a marker decoded must encode to a text that decodes the same.

#include "autoresume/plugin_config.hpp"

#include "autoresume/keyvalue.hpp"
#include "autoresume/option.hpp"
#include "autoresume/resume.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto input = ar::fuzz::text(data, size);
  const auto args = ar::fuzz::split(input, '\n');
  try {
    const auto config = ar::parse_plugin_config(args);
    if (config.connect_timeout.count() <= 0)
      ar::fuzz::finding("connect_timeout of " + std::to_string(config.connect_timeout.count()) +
                        " ms");
  } catch (const ar::ConfigError&) {
  }
  for (const auto& arg : args) {
    try {
      (void)ar::parse_auto_resume(arg.c_str());
    } catch (const ar::ConfigError&) {
    }
    const auto marker = ar::RelaunchMarker::decode(arg);
    if (!marker) continue;
    const auto again = ar::RelaunchMarker::decode(marker->encode());
    if (!again || again->run_id != marker->run_id || again->attempt != marker->attempt ||
        again->own_master_port != marker->own_master_port)
      ar::fuzz::finding("relaunch marker '" + arg + "' encodes as '" + marker->encode() +
                        "', which decodes otherwise");
  }
  return 0;
}
