#pragma once
// The controller's log: one line per message on stderr, with a UTC time and
// the level, so that a service manager's journal and a test's log read alike.

#include <fmt/chrono.h>
#include <fmt/core.h>
#include <sys/types.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>

#include "autoresume/text.hpp"

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

// Who asked for something root does: the uid, the operation that asked
// ("register": a protected step's repair; "replace": a request to replace
// a node; "mark": a node's FAIL mark; "heartbeat"; "spares") and the run.
struct Asker {
  uid_t uid = 0;
  std::string op;
  std::string run;  // empty but for a protected step's repair
};

// One audit line for an action root takes (a mark, drain, shrink, requeue,
// replacement, provider call), with who asked; text a user chose is
// escaped.
inline void audit(const Asker& asker, std::string_view action, std::string_view detail) {
  write("audit", "uid={} op={} run={} {}: {}", asker.uid, asker.op,
        asker.run.empty() ? std::string("-") : printable(asker.run), action, printable(detail));
}

}  // namespace ar::log
