#include "autoresume/progress.hpp"

#include <array>
#include <charconv>
#include <cstring>
#include <vector>

#include "autoresume/keyvalue.hpp"
#include "autoresume/text.hpp"

namespace ar {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Decimal digits only, no sign, within `max`.
template <typename T>
std::optional<T> parse_digits(std::string_view text, T max) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  T value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value > max) return std::nullopt;
  if (text.size() > 1 && text[0] == '0') return std::nullopt;  // one spelling per number
  return value;
}

bool section_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

// NAME:SECONDS into `beat`; false if it is not that.
bool parse_section(std::string_view word, Beat& beat) {
  const auto colon = word.find(':');
  if (colon == 0 || colon == std::string_view::npos || colon > kMaxSectionName) return false;
  const auto name = word.substr(0, colon);
  for (const char c : name)
    if (!section_name_char(c)) return false;
  const auto seconds = parse_digits<std::uint32_t>(word.substr(colon + 1), kMaxSectionSeconds);
  if (!seconds || *seconds == 0) return false;
  beat.section = std::string(name);
  beat.section_s = *seconds;
  return true;
}

constexpr std::array<std::pair<const char*, int>, 12> kSignals{{{"HUP", 1},
                                                                {"INT", 2},
                                                                {"QUIT", 3},
                                                                {"ILL", 4},
                                                                {"TRAP", 5},
                                                                {"ABRT", 6},
                                                                {"BUS", 7},
                                                                {"FPE", 8},
                                                                {"USR1", 10},
                                                                {"SEGV", 11},
                                                                {"USR2", 12},
                                                                {"TERM", 15}}};

}  // namespace

std::optional<Beat> parse_beat(std::string_view text) {
  if (text.size() > kMaxBeatBytes) return std::nullopt;
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    const auto start = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > start) words.push_back(text.substr(start, i - start));
  }
  Beat beat;
  if (words.size() > 2) return std::nullopt;
  std::size_t next = 0;
  if (next < words.size() && words[next].find(':') == std::string_view::npos) {
    const auto step = parse_digits<std::uint64_t>(words[next], (std::uint64_t{1} << 63) - 1);
    if (!step) return std::nullopt;
    beat.step = *step;
    ++next;
  }
  if (next < words.size() && !parse_section(words[next++], beat)) return std::nullopt;
  if (next != words.size()) return std::nullopt;
  return beat;
}

std::string progress_step_name(std::uint32_t job_id, std::uint32_t step_id) {
  return std::to_string(job_id) + "." + std::to_string(step_id);
}

std::string progress_step_dir(const std::string& base, const std::string& node,
                              std::uint32_t job_id, std::uint32_t step_id) {
  return base + "/" + node + "/" + progress_step_name(job_id, step_id);
}

std::optional<std::pair<std::uint32_t, std::uint32_t>> parse_progress_step_name(
    std::string_view name) {
  const auto dot = name.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const auto job = parse_digits<std::uint32_t>(name.substr(0, dot), 0xffffffffU);
  const auto step = parse_digits<std::uint32_t>(name.substr(dot + 1), 0xffffffffU);
  if (!job || !step) return std::nullopt;
  return std::pair{*job, *step};
}

std::optional<std::uint32_t> parse_rank_name(std::string_view name) {
  return parse_digits<std::uint32_t>(name, 0xffffffffU);
}

HangTimeout parse_hang_timeout(const char* value) {
  if (value == nullptr || *value == '\0')
    throw ConfigError(std::string("--") + kHangTimeoutOptionName +
                      " requires a value: seconds or auto");
  const std::string_view text(value);
  if (text == "auto") return {0, true};
  const auto seconds = parse_digits<std::uint32_t>(text, kMaxSectionSeconds);
  if (!seconds)
    throw ConfigError(std::string("invalid --") + kHangTimeoutOptionName + " value '" +
                      printable(text) + "': expected seconds from 0 (off) to " +
                      std::to_string(kMaxSectionSeconds) + ", or auto");
  return {*seconds, false};
}

std::string hang_timeout_text(const HangTimeout& timeout) {
  if (timeout.automatic) return "auto";
  return timeout.seconds == 0 ? "off" : std::to_string(timeout.seconds) + " s";
}

int parse_hang_signal(const char* value) {
  if (value == nullptr || *value == '\0')
    throw ConfigError(std::string("--") + kHangSignalOptionName +
                      " requires a value: a signal such as USR1");
  std::string_view text(value);
  if (const auto number = parse_digits<int>(text, 64); number && *number > 0) return *number;
  if (text.starts_with("SIG")) text.remove_prefix(3);
  for (const auto& [name, number] : kSignals)
    if (text == name) return number;
  throw ConfigError(std::string("invalid --") + kHangSignalOptionName + " value '" +
                    printable(value) +
                    "': expected a signal name (USR1, USR2, QUIT, TERM, ...) or number 1-64");
}

std::string signal_text(int signal) {
  for (const auto& [name, number] : kSignals)
    if (number == signal) return name;
  return std::to_string(signal);
}

}  // namespace ar
