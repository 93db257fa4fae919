// The key=value parser every configuration source shares
// (ar::parse_settings) and its value parsers: each line's value goes to the
// parser its key names ("seconds=1.5", "endpoint=host:7860", "since=2h",
// ...; other keys only count). Bad input must be refused with a
// ConfigError, nothing else; a value accepted must lie within the range
// asked for, and an endpoint must read back from its own text.

#include "autoresume/keyvalue.hpp"

#include "autoresume/endpoint.hpp"
#include "fuzz.hpp"

namespace {

using namespace std::chrono_literals;

void parse_value(const std::string& key, const std::string& value) {
  if (key == "flag") {
    (void)ar::parse_flag(key, value);
  } else if (key == "uint") {
    const auto n = ar::parse_uint(key, value, 1, 65535);
    if (n < 1 || n > 65535) ar::fuzz::finding("parse_uint: " + value + " out of range");
  } else if (key == "path") {
    if (ar::parse_absolute_path(key, value).front() != '/')
      ar::fuzz::finding("parse_absolute_path: " + value);
  } else if (key == "seconds") {
    const auto ms = ar::parse_seconds(key, value, 60s);
    if (ms < 100ms || ms > 60s) ar::fuzz::finding("parse_seconds: " + value + " out of range");
  } else if (key == "since") {
    (void)ar::parse_since(key, value, 1'796'000'000);
  } else if (key == "endpoint") {
    const auto endpoint = ar::parse_endpoint(key, value);
    if (ar::parse_endpoint(key, endpoint.str()) != endpoint)
      ar::fuzz::finding("parse_endpoint: '" + value + "' does not read back from " +
                        endpoint.str());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto input = ar::fuzz::text(data, size);
  try {
    ar::parse_settings(input, "fuzz.conf", parse_value);
  } catch (const ar::ConfigError&) {
  }
  // Each line on its own too, as plugstack.conf arguments come.
  for (const auto& line : ar::fuzz::split(input, '\n')) {
    try {
      const auto [key, value] = ar::split_key_value(line);
      parse_value(key, value);
    } catch (const ar::ConfigError&) {
    }
  }
  return 0;
}
