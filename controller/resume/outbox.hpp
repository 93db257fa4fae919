#pragma once
// Calls to slurmctld whose answer no decision waits on (a decided repair's
// line in its job's AdminComment): posted by the engine's tick and run in
// order on a thread of their own, so that a slow or refused one (without
// slurmdbd, slurmctld takes 5 s to refuse an AdminComment update) never
// holds up the tick, and with it every other job's repair and the
// heartbeat watch. Until start(), a post runs at once on the caller's
// thread (the engine's unit tests tick by hand).

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace ar {

class Outbox {
 public:
  // At most this many calls wait; past it the oldest is dropped (said).
  static constexpr std::size_t kMaxQueued = 1024;

  Outbox() = default;
  ~Outbox() { stop(); }
  Outbox(const Outbox&) = delete;
  Outbox& operator=(const Outbox&) = delete;

  // From now on a post runs on the outbox's own thread.
  void start();
  // Ends the thread after the call under way; calls still queued are
  // dropped, and said.
  void stop();
  // `call` (which handles its own errors: one that throws is logged with
  // `what`), in order after those posted before.
  void post(std::string what, std::function<void()> call);
  // Waits until every call posted so far has run (tests).
  void drain();

 private:
  struct Call {
    std::string what;
    std::function<void()> run;
  };
  static void run_one(const Call& call);
  void loop();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Call> queue_;
  bool running_ = false;  // the thread is started
  bool stopping_ = false;
  bool busy_ = false;  // a call is under way on the thread
  std::thread thread_;
};

}  // namespace ar
