#include "autoresume/keyvalue.hpp"

#include <charconv>
#include <cmath>

namespace ar {

namespace {
constexpr std::string_view kSpace = " \t\r\n";

std::string quoted(std::string_view text) { return "'" + std::string(text) + "'"; }
}  // namespace

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(kSpace);
  return text.substr(first, last - first + 1);
}

KeyValue split_key_value(std::string_view token) {
  const auto eq = token.find('=');
  if (eq == std::string_view::npos) throw ConfigError("expected key=value, got " + quoted(token));
  const auto key = trim(token.substr(0, eq));
  if (key.empty()) throw ConfigError("missing key before '=' in " + quoted(token));
  return {std::string(key), std::string(trim(token.substr(eq + 1)))};
}

bool parse_flag(std::string_view key, std::string_view value) {
  if (value == "0") return false;
  if (value == "1") return true;
  throw ConfigError("invalid value " + quoted(value) + " for " + std::string(key) +
                    ": expected 0 or 1");
}

std::uint64_t parse_uint(std::string_view key, std::string_view value, std::uint64_t min,
                         std::uint64_t max) {
  std::uint64_t out = 0;
  const auto* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, out);
  if (value.empty() || ec != std::errc() || ptr != end || out < min || out > max)
    throw ConfigError("invalid value " + quoted(value) + " for " + std::string(key) +
                      ": expected an integer from " + std::to_string(min) + " to " +
                      std::to_string(max));
  return out;
}

std::string parse_absolute_path(std::string_view key, std::string_view value) {
  if (value.empty() || value.front() != '/')
    throw ConfigError("invalid value " + quoted(value) + " for " + std::string(key) +
                      ": expected an absolute path");
  return std::string(value);
}

std::chrono::milliseconds parse_seconds(std::string_view key, std::string_view value,
                                        std::chrono::milliseconds max) {
  double seconds = 0;
  const auto* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, seconds);
  const double max_seconds = static_cast<double>(max.count()) / 1000.0;
  if (value.empty() || ec != std::errc() || ptr != end || !std::isfinite(seconds) || seconds <= 0 ||
      seconds > max_seconds)
    throw ConfigError("invalid value " + quoted(value) + " for " + std::string(key) +
                      ": expected seconds greater than 0 and at most " +
                      std::to_string(max.count() / 1000));
  const auto ms = std::llround(seconds * 1000.0);
  return std::chrono::milliseconds(ms < 1 ? 1 : ms);
}

}  // namespace ar
