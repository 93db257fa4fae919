#pragma once
// Notifications (notify_command): each give_up and requeued event runs the
// admin's program the way slurmctld runs MailProg, as
// `PROGRAM -s SUBJECT USER` (so that mail(1) itself will do), the event's
// detail on stdin, its facts in AUTO_RESUME_* variables, within kTimeout.
// One call at a time, on a thread of its own: the store hands the events
// over and never waits for a call.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "store/store.hpp"

namespace ar {

class Notifier {
 public:
  static constexpr std::size_t kMaxQueued = 1000;  // more are dropped (logged)
  static constexpr std::chrono::seconds kTimeout{60};

  explicit Notifier(std::filesystem::path program);
  // Waits for the call in flight (killed if it is still running); what is
  // still queued is dropped, with a log line.
  ~Notifier();
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  // Whether events of `kind` are notified.
  static bool notified(std::string_view kind);
  // Queues `event`'s notification if its kind is notified; never waits.
  void post(const Event& event);

  struct Call {
    std::vector<std::string> argv;
    std::vector<std::string> environment;  // the whole environment
    std::string input;                     // stdin
  };
  // The call for `event`, its owner named `user` (the uid if unknown).
  static Call call_for(const std::filesystem::path& program, const Event& event,
                       const std::string& user);

 private:
  void run();

  std::filesystem::path program_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Event> queue_;
  bool stopping_ = false;
  bool calling_ = false;
  // Set at destruction: the call under way stops (and only it).
  std::atomic<bool> stop_call_{false};
  std::size_t dropped_ = 0;
  std::thread thread_;
};

// The user name of `uid` from the passwd database, else the uid.
std::string user_name(uid_t uid);

}  // namespace ar
