#pragma once
// Time, injected: the controller's logic asks a Clock for the monotonic
// time (deadlines, ages), the wall time (Unix seconds, kept in the store and
// shown) and the machine's boot time, so that tests advance time instead of
// sleeping.
//
// A duration that must survive a restart of the controller is measured from
// a stored Stamp: wall time plus CLOCK_BOOTTIME and the boot's id. Within
// one boot the boot time counts (a step of the wall clock, by an admin or
// NTP, moves nothing); across a reboot only the wall time is left.

#include <chrono>
#include <cstdint>
#include <string>

namespace ar {

// A moment as stored.
struct Stamp {
  std::int64_t wall = 0;     // Unix seconds
  std::int64_t boot_ms = 0;  // CLOCK_BOOTTIME, milliseconds
  std::string boot_id;       // the boot's id; empty: not known (then the wall time counts)

  // The moment `by` later (a deadline stored as the moment it falls due).
  Stamp plus(std::chrono::milliseconds by) const;
  bool operator==(const Stamp&) const = default;
};

// The time from `from` to `to` (negative if `to` is earlier): their boot
// times' difference when both are of the same boot, else their wall times'.
std::chrono::milliseconds elapsed(const Stamp& from, const Stamp& to);

class Clock {
 public:
  using Steady = std::chrono::steady_clock;

  virtual ~Clock() = default;
  // Monotonic: for deadlines and ages that need not survive a restart.
  virtual Steady::time_point now() const = 0;
  // Wall time in Unix seconds: for what is stored and shown.
  virtual std::int64_t unix_now() const = 0;
  // CLOCK_BOOTTIME in milliseconds (monotonic, counts suspended time too).
  virtual std::int64_t boot_ms() const = 0;
  // This boot's id (/proc/sys/kernel/random/boot_id); empty if unreadable.
  virtual std::string boot_id() const = 0;

  // Now, to be stored.
  Stamp stamp() const { return {unix_now(), boot_ms(), boot_id()}; }
  // The time since `then` (negative while `then` is ahead: a deadline not due).
  std::chrono::milliseconds since(const Stamp& then) const { return elapsed(then, stamp()); }
};

// The machine's clocks.
class SystemClock final : public Clock {
 public:
  Steady::time_point now() const override { return Steady::now(); }
  std::int64_t unix_now() const override {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  std::int64_t boot_ms() const override;
  std::string boot_id() const override;
};

// The machine's clocks, shared.
inline const Clock& system_clock() {
  static const SystemClock clock;
  return clock;
}

}  // namespace ar
