#pragma once
// Outside calls whose answer the engine's look needs but never waits for
// (a repair's calls to slurmctld, the expand helper's submit, probes; the
// node keeper's marks and probes). The look starts one under a key, each on
// a thread of its own, and takes its outcome at a later look once it is
// ready; meanwhile the look goes on with every other step and node. A
// finished call wakes the engine (`done`, if given). Until start(), a call
// runs at once on the caller's thread (unit tests tick by hand). One thread
// at a time uses it: the engine's (the provisioner's also from the admins'
// commands, under its lock).

#include <chrono>
#include <cstddef>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace ar {

template <typename T>
class Calls {
 public:
  explicit Calls(std::function<void()> done) : done_(std::move(done)) {}
  // Waits for the calls under way (each is bounded by its own timeout).
  ~Calls() {
    for (auto& [key, call] : calls_)
      if (call.thread.joinable()) call.thread.join();
  }
  Calls(const Calls&) = delete;
  Calls& operator=(const Calls&) = delete;

  // From now on a call runs on a thread of its own.
  void start() { async_ = true; }
  // Whether calls run on threads of their own (else at once).
  bool started() const { return async_; }

  // Runs `call` under `key`, where no call is (a call's exception is its
  // outcome).
  void run(const std::string& key, std::function<T()> call) {
    if (calls_.contains(key)) throw std::logic_error("a call under way already: " + key);
    std::promise<T> outcome;
    Call entry{outcome.get_future(), {}};
    if (!async_) {
      settle(outcome, call);
    } else {
      // The engine is woken once the outcome is ready, not before.
      entry.thread =
          std::thread([this, outcome = std::move(outcome), call = std::move(call)]() mutable {
            settle(outcome, call);
            if (done_) done_();
          });
    }
    calls_.emplace(key, std::move(entry));
  }
  // Whether a call under `key` was started and has not been taken.
  bool has(const std::string& key) const { return calls_.contains(key); }
  // The outcome of the call under `key` once it is ready (forgotten here);
  // nothing while it runs, or if none was started.
  std::optional<std::future<T>> take(const std::string& key) {
    const auto it = calls_.find(key);
    if (it == calls_.end() || !ready(it->second.outcome)) return std::nullopt;
    auto outcome = std::move(it->second.outcome);
    if (it->second.thread.joinable()) it->second.thread.join();  // past its outcome already
    calls_.erase(it);
    return outcome;
  }
  // Whether the call under `key` is ready, waiting for it at most `limit`;
  // false if none was started.
  bool ready_within(const std::string& key, std::chrono::milliseconds limit) const {
    const auto it = calls_.find(key);
    return it != calls_.end() && it->second.outcome.wait_for(limit) == std::future_status::ready;
  }
  // The keys of the calls that are ready.
  std::vector<std::string> finished() const {
    std::vector<std::string> out;
    for (const auto& [key, call] : calls_)
      if (ready(call.outcome)) out.push_back(key);
    return out;
  }
  std::size_t size() const { return calls_.size(); }
  // The keys of every call started and not taken.
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    for (const auto& [key, call] : calls_) out.push_back(key);
    return out;
  }
  // Waits until every call is ready, at most `limit` (tests).
  bool wait(std::chrono::milliseconds limit) const {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (const auto& [key, call] : calls_)
      if (call.outcome.wait_until(deadline) != std::future_status::ready) return false;
    return true;
  }

 private:
  struct Call {
    std::future<T> outcome;
    std::thread thread;  // none for a call run at once
  };
  static void settle(std::promise<T>& outcome, std::function<T()>& call) {
    try {
      outcome.set_value(call());
    } catch (...) {
      outcome.set_exception(std::current_exception());
    }
  }
  static bool ready(const std::future<T>& outcome) {
    return outcome.wait_for(std::chrono::seconds{0}) == std::future_status::ready;
  }
  std::function<void()> done_;
  bool async_ = false;
  std::map<std::string, Call> calls_;
};

}  // namespace ar
