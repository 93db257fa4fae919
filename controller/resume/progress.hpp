#pragma once
// What the node agents report of the protected steps' progress files
// (autoresume/progress.hpp), and the rule that calls a step hung
// (docs/resume.md, "Hangs and crashes"). The server's threads record each
// heartbeat's reports; the engine reads them at each look. Kept in memory
// only: a restarted controller hears every agent again within its
// interval, and a file's age comes from the node, not from when it was
// heard.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "autoresume/progress.hpp"
#include "autoresume/protocol.hpp"

namespace ar {

class ProgressReports {
 public:
  using Steady = std::chrono::steady_clock;
  // Bounds: steps kept (one more forgets the one heard from longest ago),
  // ranks kept in all, intervals kept per step until the engine takes them.
  static constexpr std::size_t kMaxSteps = 10'000;
  static constexpr std::size_t kMaxRanks = 200'000;
  static constexpr std::size_t kMaxIntervals = 256;
  // A step no agent reported for this long is forgotten.
  static constexpr std::chrono::minutes kForgetAfter{10};
  // Two reports of one rank whose beats are this close are one beat.
  static constexpr std::chrono::milliseconds kSameBeat{100};

  struct Rank {
    std::string node;           // the node whose agent reported it
    Steady::time_point last{};  // its last beat, as the controller's clock has it
    Beat beat;                  // what its file said then
  };
  struct Seen {
    std::map<std::uint32_t, Rank> ranks;
    std::map<std::string, Steady::time_point> reported;  // node -> its agent's last report
    std::optional<std::uint64_t> highest;                // the highest step any rank said
    std::deque<std::chrono::milliseconds> intervals;     // between a rank's beats, not taken yet
  };

  // What `node`'s agent reported at `now` (after the heartbeat was taken).
  void report(const std::string& node, const std::vector<proto::StepProgress>& steps,
              Steady::time_point now);
  // What is known of step job.step; nothing if no agent reported it.
  std::optional<Seen> seen(std::uint32_t job_id, std::uint32_t step_id) const;
  // The intervals between beats recorded since the last call.
  std::vector<std::chrono::milliseconds> take_intervals(std::uint32_t job_id,
                                                        std::uint32_t step_id);

 private:
  using Key = std::pair<std::uint32_t, std::uint32_t>;
  // Forgets a step (its ranks no longer counted); forgets those no agent
  // reported for kForgetAfter.
  void drop(Key key);
  void prune(Steady::time_point now);
  mutable std::mutex mutex_;
  std::map<Key, Seen> steps_;
  std::map<Key, Steady::time_point> heard_;  // when each step was last reported
  std::size_t ranks_ = 0;
};

// What of `seen` is the attempt's own, `since_start` after its start (at
// `now`): a rank whose last beat came before the attempt started is a file
// an earlier step with the same ids left on its node (a requeued job
// numbers its steps from 0 again; a step daemon killed before it removed
// its folder), and is left out, with its step number.
std::optional<ProgressReports::Seen> of_attempt(std::optional<ProgressReports::Seen> seen,
                                                std::chrono::milliseconds since_start,
                                                ProgressReports::Steady::time_point now);

// How a step is found hung: --auto-resume-hang-timeout and the controller's
// settings.
struct HangRule {
  HangTimeout timeout;
  // Until an attempt's first beat (start-up, checkpoint load): only once
  // an earlier attempt of the run beat.
  std::chrono::milliseconds first_beat{30LL * 60 * 1000};
  // `auto`: max(floor, kFactor x the p99 interval between beats seen in the
  // run), once kMinSamples intervals were seen; first_beat before.
  std::chrono::milliseconds floor{60'000};
  static constexpr unsigned kFactor = 3;
  static constexpr std::size_t kMinSamples = 10;
  // A rank counts only while its node's agent reported it this lately
  // (else the node's own watch, heartbeats and Slurm, speaks for it).
  static constexpr std::chrono::seconds kFresh{15};
};

// The timeout `rule` gives with the run's `samples` (intervals between
// beats), for the log and the event.
std::chrono::milliseconds hang_timeout_of(const HangRule& rule,
                                          const std::vector<std::chrono::milliseconds>& samples);

struct Hang {
  std::string detail;                 // for the event and srun: who stopped first, since when
  std::vector<std::string> nodes;     // the nodes of the ranks that stopped first
  std::optional<std::uint64_t> step;  // the highest step the attempt reached
};

// Whether the attempt is hung now: a rank of `hosts` that beat went
// quiet for longer than the timeout (or than the section it announced),
// or, when `run_beat_before`, no rank beat within first_beat of the
// attempt's start (`since_start` ago). A step that never beat is never hung.
std::optional<Hang> hang_of(const std::optional<ProgressReports::Seen>& seen,
                            const std::vector<std::string>& hosts, const HangRule& rule,
                            const std::vector<std::chrono::milliseconds>& samples,
                            bool run_beat_before, std::chrono::milliseconds since_start,
                            ProgressReports::Steady::time_point now);

}  // namespace ar
