#pragma once
// Parsing helpers shared by every `key=value` configuration source: the
// plugstack.conf arguments of the SPANK plugin and the controller's file.

#include <chrono>
#include <cstdint>
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

// A positive duration in seconds, fractions allowed ("2", "0.5"), at most max.
std::chrono::milliseconds parse_seconds(std::string_view key, std::string_view value,
                                        std::chrono::milliseconds max);

}  // namespace ar
