#pragma once
// What the step daemons said of their tasks' exit (`tasks_exited`): for each
// protected step not yet decided, which of its nodes reported that every one
// of their tasks exited, and whether all with 0. A step every node of which
// reported 0 ended with no node at fault: its verdict, no_fault, need not
// wait for end_window. A step under repair whose surviving nodes all
// reported is gone from them: its relaunch need not wait for slurmctld to
// drop its record.
//
// Kept in memory only (a restarted controller waits end_window, as without
// reports), shared by the server's threads and the engine's: bounded to
// kMaxSteps steps, each to the nodes of its step, and forgotten once the
// step is decided.

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace ar {

class ExitReports {
 public:
  // The most steps kept at once; a report for one more forgets the step
  // whose reports began first (that step then waits end_window).
  static constexpr std::size_t kMaxSteps = 10'000;

  // Records that `node` of `step` (its key: run#attempt) reported, `clean`
  // when all its tasks exited 0; the node's first report stands. True when
  // now every one of `hosts` (the step's nodes) has reported clean.
  bool add(const std::string& step, const std::string& node, bool clean,
           const std::vector<std::string>& hosts);
  // Whether every one of `hosts` reported clean for `step` (false for none).
  bool all_clean(const std::string& step, const std::vector<std::string>& hosts) const;
  // Whether every one of `hosts` reported that its tasks of `step` exited,
  // however they ended (false for none).
  bool all_reported(const std::string& step, const std::vector<std::string>& hosts) const;
  // Whether one of `hosts` reported a task of `step` that did not exit 0.
  bool any_failed(const std::string& step, const std::vector<std::string>& hosts) const;
  void forget(const std::string& step);
  std::size_t steps() const;

 private:
  struct Entry {
    std::uint64_t serial = 0;           // when its first report came: the oldest goes first
    std::map<std::string, bool> nodes;  // node -> clean
  };
  bool all_clean_locked(const Entry& entry, const std::vector<std::string>& hosts) const;

  mutable std::mutex mutex_;
  std::map<std::string, Entry> steps_;
  std::uint64_t next_serial_ = 0;
};

}  // namespace ar
