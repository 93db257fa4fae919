#pragma once
// The controller's log: one line per message on stderr, with a UTC time and
// the level, so that a service manager's journal and a test's log read alike.

#include <fmt/chrono.h>
#include <fmt/core.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
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

// A key=value field's value as logfmt writes it: bare when it has no
// blank, quote or '=' (and "-" when empty), else in double quotes with
// quotes and backslashes escaped; control characters escaped either way.
inline std::string field(std::string_view value) {
  if (value.empty()) return "-";
  const auto text = printable(value);
  if (text.find_first_of(" \t\"=\\") == std::string::npos) return text;
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// One audit line for an action root takes (a mark, drain, shrink, requeue,
// replacement, provider call), with who asked; each field as logfmt writes
// it (field), so that text a user chose can neither be mistaken for another
// field nor start another line.
inline void audit(const Asker& asker, std::string_view action, std::string_view detail) {
  write("audit", "uid={} op={} run={} {}: {}", asker.uid, field(asker.op), field(asker.run),
        field(action), printable(detail));
}

// One line per event recorded (`auto-resume events`), its facts as
// key=value fields that journald and Loki can filter on:
//   ... auto-resumed event: kind=relaunch level=info job=12 run=12.0-ca7a2a4a node=- group=-
//   uid=1000 detail="..."
inline void event(std::string_view kind, std::string_view level, std::uint32_t job,
                  std::string_view run, std::string_view node, std::string_view group,
                  std::int64_t uid, std::string_view detail) {
  write("event", "kind={} level={} job={} run={} node={} group={} uid={} detail={}", field(kind),
        field(level), job, field(run), field(node), field(group), uid, field(detail));
}

}  // namespace ar::log
