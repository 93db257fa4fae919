#include "clock.hpp"

#include <time.h>

#include <fstream>

namespace ar {

Stamp Stamp::plus(std::chrono::milliseconds by) const {
  // The wall time rounds up: a deadline falls due no earlier than asked.
  const auto whole = by.count() >= 0 ? (by.count() + 999) / 1000 : by.count() / 1000;
  return {wall + whole, boot_ms + by.count(), boot_id};
}

std::chrono::milliseconds elapsed(const Stamp& from, const Stamp& to) {
  if (!from.boot_id.empty() && from.boot_id == to.boot_id)
    return std::chrono::milliseconds{to.boot_ms - from.boot_ms};
  return std::chrono::seconds{to.wall - from.wall};
}

std::int64_t SystemClock::boot_ms() const {
  timespec ts{};
  // CLOCK_BOOTTIME cannot fail on Linux >= 2.6.39 with a valid timespec.
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

std::string SystemClock::boot_id() const {
  // The same for the whole life of the process: read once.
  static const std::string id = [] {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string line;
    std::getline(in, line);
    return line;  // empty if unreadable
  }();
  return id;
}

}  // namespace ar
