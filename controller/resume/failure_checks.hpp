#pragma once
// The quick checks after a protected step failed (docs/resume.md, "Hangs
// and crashes"): the engine asks a node's agent to run them, the server
// hands the ask over in the node's heartbeat reply and takes the agent's
// answer from a later heartbeat, the engine reads it. Kept in memory only,
// one ask per node at a time (a newer ask replaces an older one), bounded
// to kMaxNodes nodes; each part locks itself.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "autoresume/protocol.hpp"

namespace ar {

class FailureChecks {
 public:
  static constexpr std::size_t kMaxNodes = 100'000;

  // Asks `node`'s agent to run its quick checks within `timeout`; the ask's id.
  std::uint64_t ask(const std::string& node, std::chrono::milliseconds timeout) {
    std::lock_guard lock(mutex_);
    if (!asks_.contains(node) && asks_.size() >= kMaxNodes) asks_.erase(asks_.begin());
    const auto id = ++next_id_;
    asks_[node] = Ask{{id, static_cast<std::uint32_t>(timeout.count())}, std::nullopt};
    return id;
  }
  // What `node`'s agent should run, while no answer came.
  std::optional<proto::CheckAsk> asked(const std::string& node) const {
    std::lock_guard lock(mutex_);
    const auto it = asks_.find(node);
    if (it == asks_.end() || it->second.done) return std::nullopt;
    return it->second.ask;
  }
  // `node`'s agent answers; an answer to an ask that is not the node's
  // latest is dropped.
  void answer(const std::string& node, const proto::CheckDone& done) {
    std::lock_guard lock(mutex_);
    const auto it = asks_.find(node);
    if (it != asks_.end() && it->second.ask.id == done.id && !it->second.done)
      it->second.done = done;
  }
  // The answer to ask `id` of `node`, once in.
  std::optional<proto::CheckDone> outcome(const std::string& node, std::uint64_t id) const {
    std::lock_guard lock(mutex_);
    const auto it = asks_.find(node);
    if (it == asks_.end() || it->second.ask.id != id) return std::nullopt;
    return it->second.done;
  }
  // Step `key` (run#attempt) waits for the checks of `nodes` (a hostlist),
  // for srun's wait message; until checked(key).
  void checking(const std::string& key, const std::string& nodes) {
    std::lock_guard lock(mutex_);
    if (steps_.size() < kMaxNodes) steps_[key] = nodes;
  }
  void checked(const std::string& key) {
    std::lock_guard lock(mutex_);
    steps_.erase(key);
  }
  std::optional<std::string> checking_of(const std::string& key) const {
    std::lock_guard lock(mutex_);
    const auto it = steps_.find(key);
    if (it == steps_.end()) return std::nullopt;
    return it->second;
  }
  // The ask `id` of `node` is over (answered, or given up).
  void forget(const std::string& node, std::uint64_t id) {
    std::lock_guard lock(mutex_);
    const auto it = asks_.find(node);
    if (it != asks_.end() && it->second.ask.id == id) asks_.erase(it);
  }

 private:
  struct Ask {
    proto::CheckAsk ask;
    std::optional<proto::CheckDone> done;
  };
  mutable std::mutex mutex_;
  std::map<std::string, Ask> asks_;
  std::map<std::string, std::string> steps_;
  // From the wall clock's milliseconds at start: an agent takes an ask whose
  // id it ran already for that run (and answers with its old result), so a
  // restarted controller must not hand out its predecessor's ids again.
  std::uint64_t next_id_ =
      static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count());
};

}  // namespace ar
