#pragma once
// Text helpers the health checks share (private to ar_health).

#include <algorithm>
#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "autoresume/health.hpp"
#include "autoresume/keyvalue.hpp"
#include "autoresume/text.hpp"

namespace ar::health::text {

// `line` without a trailing "\r" or "\n" and without blanks around it.
inline std::string_view strip(std::string_view line) { return ar::trim(line); }

// The lines of `output`, stripped.
inline std::vector<std::string_view> lines(std::string_view output) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start < output.size()) {
    const auto end = std::min(output.find('\n', start), output.size());
    out.push_back(strip(output.substr(start, end - start)));
    start = end + 1;
  }
  return out;
}

// The last line of `output` that is not blank ("" if none).
inline std::string last_line(std::string_view output) {
  const auto all = lines(output);
  for (auto it = all.rbegin(); it != all.rend(); ++it)
    if (!it->empty()) return std::string(*it);
  return "";
}

// A whole decimal count ("42"); nothing for anything else.
inline std::optional<unsigned long long> count(std::string_view value) {
  value = strip(value);
  unsigned long long n = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size()) return std::nullopt;
  return n;
}

// Why `run` of `what` (e.g. "dcgmi health -c -j") went wrong, from the
// runner's error or the exit status and the output's last line.
inline std::string tool_failure(const ToolRun& run, std::string_view what) {
  if (!run.error.empty()) return run.error;
  std::string out = std::string(what) + " exited " + std::to_string(run.status);
  const auto last = last_line(run.output);
  return last.empty() ? out + " and printed nothing" : out + ": " + last;
}

}  // namespace ar::health::text
