#include "autoresume/keyvalue.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <ctime>
#include <fstream>
#include <sstream>

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

std::string lower(std::string_view text) {
  std::string out(text);
  std::ranges::transform(out, out.begin(),
                         [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

void invalid_value(std::string_view key, std::string_view value, std::string_view expected) {
  throw ConfigError("invalid value " + quoted(value) + " for " + std::string(key) + ": " +
                    std::string(expected));
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
  invalid_value(key, value, "expected 0 or 1");
}

std::uint64_t parse_uint(std::string_view key, std::string_view value, std::uint64_t min,
                         std::uint64_t max) {
  std::uint64_t out = 0;
  const auto* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, out);
  if (value.empty() || ec != std::errc() || ptr != end || out < min || out > max)
    invalid_value(key, value,
                  "expected an integer from " + std::to_string(min) + " to " + std::to_string(max));
  return out;
}

std::string parse_absolute_path(std::string_view key, std::string_view value) {
  if (value.empty() || value.front() != '/') invalid_value(key, value, "expected an absolute path");
  return std::string(value);
}

std::chrono::milliseconds parse_seconds(std::string_view key, std::string_view value,
                                        std::chrono::milliseconds max,
                                        std::chrono::milliseconds min) {
  double seconds = 0;
  const auto* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, seconds);
  const double max_seconds = static_cast<double>(max.count()) / 1000.0;
  const double min_seconds = static_cast<double>(min.count()) / 1000.0;
  if (value.empty() || ec != std::errc() || ptr != end || !std::isfinite(seconds) ||
      seconds < min_seconds || seconds > max_seconds) {
    std::ostringstream range;
    range << "expected seconds from " << min_seconds << " to " << max.count() / 1000;
    invalid_value(key, value, range.str());
  }
  return std::chrono::milliseconds(std::llround(seconds * 1000.0));
}

std::int64_t parse_since(std::string_view key, std::string_view value, std::int64_t now) {
  auto bad = [&](const char* why) {
    return ConfigError(std::string(key) + " '" + std::string(value) + "': " + why +
                       " (use Unix seconds, a UTC time like 2026-11-29T14:05:00Z, or an age "
                       "like 90s, 10m, 2h, 1d)");
  };
  if (value.empty()) throw bad("empty");
  if (std::ranges::all_of(value, [](char c) { return c >= '0' && c <= '9'; }))
    return static_cast<std::int64_t>(parse_uint(key, value, 0, 1ULL << 40));
  const char unit = value.back();
  const std::int64_t scale = unit == 's'   ? 1
                             : unit == 'm' ? 60
                             : unit == 'h' ? 3600
                             : unit == 'd' ? 86400
                                           : 0;
  const auto digits = value.substr(0, value.size() - 1);
  if (scale != 0 && !digits.empty() &&
      std::ranges::all_of(digits, [](char c) { return c >= '0' && c <= '9'; })) {
    if (digits.size() > 9) throw bad("too long ago");
    return std::max<std::int64_t>(
        0, now - static_cast<std::int64_t>(std::stoll(std::string(digits))) * scale);
  }
  std::tm tm{};
  const std::string text(value);
  const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (end == nullptr || (std::string_view(end) != "Z" && std::string_view(end) != ""))
    throw bad("not a time");
  return static_cast<std::int64_t>(timegm(&tm));
}

namespace {

// Where a line's comment starts: a `#` at its start or after a space or a
// tab. A `#` inside a value (`/opt/x#y/replace`) is part of the value.
std::size_t comment_start(std::string_view line) {
  for (std::size_t i = 0; i < line.size(); ++i)
    if (line[i] == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) return i;
  return std::string_view::npos;
}

}  // namespace

std::set<std::string> parse_settings(
    std::string_view text, std::string_view origin,
    const std::function<void(const std::string& key, const std::string& value)>& apply) {
  std::set<std::string> seen;
  std::size_t line_no = 0;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto end = std::min(text.find('\n', start), text.size());
    auto line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    line = trim(line.substr(0, comment_start(line)));
    if (line.empty()) continue;
    try {
      auto [raw_key, value] = split_key_value(line);
      const auto key = lower(raw_key);
      if (!seen.insert(key).second) throw ConfigError("key '" + key + "' is set twice");
      apply(key, value);
    } catch (const ConfigError& e) {
      throw ConfigError(std::string(origin) + ":" + std::to_string(line_no) + ": " + e.what());
    }
  }
  return seen;
}

std::string read_config_file(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw ConfigError("cannot read configuration file '" + file.string() + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace ar
