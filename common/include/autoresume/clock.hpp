#pragma once
// Time, injected: the controller's logic asks a Clock for the monotonic
// time (deadlines, ages) and the wall time (Unix seconds, kept in the store),
// so that tests advance time instead of sleeping.

#include <chrono>
#include <cstdint>

namespace ar {

class Clock {
 public:
  using Steady = std::chrono::steady_clock;

  virtual ~Clock() = default;
  // Monotonic: for deadlines and ages.
  virtual Steady::time_point now() const = 0;
  // Wall time in Unix seconds: for what is stored and shown.
  virtual std::int64_t unix_now() const = 0;
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
};

// The machine's clocks, shared.
inline const Clock& system_clock() {
  static const SystemClock clock;
  return clock;
}

}  // namespace ar
