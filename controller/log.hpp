#pragma once
// The controller's log: one line per message on stderr, with a UTC time and
// the level, so that a service manager's journal and a test's log read alike.

#include <fmt/chrono.h>
#include <fmt/core.h>

#include <chrono>
#include <cstdio>

namespace ar::log {

template <typename... Args>
void write(const char* level, fmt::format_string<Args...> format, Args&&... args) {
  const auto now = std::chrono::system_clock::now();
  fmt::print(stderr, "{:%Y-%m-%dT%H:%M:%S}Z auto-resumed {}: {}\n",
             std::chrono::floor<std::chrono::seconds>(now), level,
             fmt::format(format, std::forward<Args>(args)...));
  std::fflush(stderr);
}

template <typename... Args>
void info(fmt::format_string<Args...> format, Args&&... args) {
  write("info", format, std::forward<Args>(args)...);
}
template <typename... Args>
void warn(fmt::format_string<Args...> format, Args&&... args) {
  write("warning", format, std::forward<Args>(args)...);
}
template <typename... Args>
void error(fmt::format_string<Args...> format, Args&&... args) {
  write("error", format, std::forward<Args>(args)...);
}

}  // namespace ar::log
