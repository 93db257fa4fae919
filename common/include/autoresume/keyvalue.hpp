#pragma once
// Parsing helpers shared by every `key=value` configuration source: the
// plugstack.conf arguments of the SPANK plugin and the controller's file.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ar {

// Bad configuration or option input. The message names the offending value.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct KeyValue {
  std::string key;
  std::string value;
};

std::string_view trim(std::string_view text);

// ASCII lower case, as keys and names are compared.
std::string lower(std::string_view text);

// Throws the ConfigError of a bad value: "invalid value 'VALUE' for KEY:
// EXPECTED".
[[noreturn]] void invalid_value(std::string_view key, std::string_view value,
                                std::string_view expected);

// Splits "key=value" (whitespace around both sides is dropped). Throws
// ConfigError naming the token when '=' or the key is missing.
KeyValue split_key_value(std::string_view token);

// "0" or "1"; anything else is an error naming key and value.
bool parse_flag(std::string_view key, std::string_view value);

// A decimal integer within [min, max].
std::uint64_t parse_uint(std::string_view key, std::string_view value, std::uint64_t min,
                         std::uint64_t max);

// An absolute path ("/..."); anything else is an error naming key and value.
std::string parse_absolute_path(std::string_view key, std::string_view value);

// A duration in seconds, fractions allowed ("2", "0.5"), from min (by
// default 0.1 s: a shorter one would spin whoever waits on it) to max.
std::chrono::milliseconds parse_seconds(std::string_view key, std::string_view value,
                                        std::chrono::milliseconds max,
                                        std::chrono::milliseconds min = std::chrono::milliseconds{
                                            100});

// A point in time for `--since`: Unix seconds ("1796000000"), a UTC time
// ("2026-11-29T14:05:00Z", the form `auto-resume events` prints), or an age
// back from `now` ("90s", "10m", "2h", "1d"). Returns Unix seconds.
std::int64_t parse_since(std::string_view key, std::string_view value, std::int64_t now);

// Calls `apply(key, value)` for each `key=value` line of a configuration
// file's `text` (keys lower-cased; `#` starts a comment; blank lines are
// skipped). A key set twice, a line without '=', and every ConfigError of
// `apply` become a ConfigError "ORIGIN:LINE: message". Returns the keys set.
std::set<std::string> parse_settings(
    std::string_view text, std::string_view origin,
    const std::function<void(const std::string& key, const std::string& value)>& apply);

// A configuration file's whole text; ConfigError naming it if it cannot be read.
std::string read_config_file(const std::filesystem::path& file);

}  // namespace ar
