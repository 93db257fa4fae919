#pragma once
// When each protected step's srun last asked for its verdict (`verdict`):
// recorded by the server's threads, read by the engine. An srun that asks is
// alive and its step not over, whatever slurmctld lists: one SIGKILLed comes
// back from its last saved state, which lacks a step started since (Slurm
// 22.05 does not save its state for a new step).
//
// Kept in memory only (a restarted controller hears each srun again within
// a second), bounded to kMaxSteps steps.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace ar {

class VerdictAsks {
 public:
  using Steady = std::chrono::steady_clock;
  // The most steps kept at once; one more forgets the one heard from last
  // longest ago.
  static constexpr std::size_t kMaxSteps = 10'000;

  // `step` (its key: run#attempt) asked at `when`.
  void asked(const std::string& step, Steady::time_point when) {
    std::lock_guard lock(mutex_);
    if (!last_.contains(step) && last_.size() >= kMaxSteps)
      last_.erase(std::min_element(last_.begin(), last_.end(), [](const auto& a, const auto& b) {
        return a.second < b.second;
      }));
    last_[step] = when;
  }
  // When `step` last asked; nothing if it has not since this controller
  // started (or since it was forgotten).
  std::optional<Steady::time_point> last(const std::string& step) const {
    std::lock_guard lock(mutex_);
    const auto it = last_.find(step);
    if (it == last_.end()) return std::nullopt;
    return it->second;
  }
  void forget(const std::string& step) {
    std::lock_guard lock(mutex_);
    last_.erase(step);
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, Steady::time_point> last_;
};

}  // namespace ar
