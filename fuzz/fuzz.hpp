#pragma once
// What the fuzz targets share: the input as text, and how a target reports
// a property that does not hold (an abort, which libFuzzer keeps as a crash
// with the input that caused it).

#include <sanitizer/common_interface_defs.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace ar::fuzz {

inline std::string_view text(const std::uint8_t* data, std::size_t size) {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): libFuzzer's bytes as text
  return {reinterpret_cast<const char*>(data), size};
}

// Reports `what` (also where the sanitizers report, should stderr be
// closed: -close_fd_mask=2) and aborts.
[[noreturn]] inline void finding(std::string_view what) {
  const auto line = "fuzz finding: " + std::string(what);
  std::fprintf(stderr, "%s\n", line.c_str());
  __sanitizer_report_error_summary(line.c_str());
  std::abort();
}

// `input` split on `separator` (the last piece may be empty).
inline std::vector<std::string> split(std::string_view input, char separator) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const auto end = input.find(separator, start);
    out.emplace_back(input.substr(start, end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

}  // namespace ar::fuzz
