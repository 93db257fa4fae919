#include "notify.hpp"

#include <pwd.h>

#include "autoresume/process.hpp"
#include "autoresume/text.hpp"
#include "log.hpp"
#include "nodes/provider.hpp"

namespace ar {

std::string user_name(uid_t uid) {
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr)
    return found->pw_name;
  return std::to_string(uid);
}

Notifier::Notifier(std::filesystem::path program)
    : program_(std::move(program)), thread_([this] { run(); }) {}

Notifier::~Notifier() {
  std::size_t left = 0;
  bool calling = false;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    left = queue_.size();
    queue_.clear();
    calling = calling_;
  }
  wake_.notify_all();
  if (calling) stop_call_ = true;  // the controller stops: so does the call
  thread_.join();
  if (left > 0)
    log::warn("notify_command: {} notifications not sent: the controller stopped", left);
}

bool Notifier::notified(std::string_view kind) { return kind == "give_up" || kind == "requeued"; }

void Notifier::post(const Event& event) {
  if (!notified(event.kind)) return;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    if (queue_.size() >= kMaxQueued) {
      ++dropped_;
      return;
    }
    queue_.push_back(event);
  }
  wake_.notify_one();
}

Notifier::Call Notifier::call_for(const std::filesystem::path& program, const Event& event,
                                  const std::string& user) {
  const auto detail = printable(shortened(event.detail, Store::kMaxDetailBytes));
  Call call;
  call.argv = {program.string(), "-s",
               "auto-resume: job " + std::to_string(event.job_id) + " " + event.kind +
                   (event.run_id.empty() ? "" : " (run " + printable(event.run_id) + ")"),
               user};
  call.environment = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                      "AUTO_RESUME_EVENT=" + event.kind,
                      "AUTO_RESUME_JOB_ID=" + std::to_string(event.job_id),
                      "AUTO_RESUME_RUN=" + printable(event.run_id),
                      "AUTO_RESUME_UID=" + std::to_string(event.uid),
                      "AUTO_RESUME_USER=" + user,
                      "AUTO_RESUME_DETAIL=" + detail};
  call.input = detail + "\n";
  return call;
}

void Notifier::run() {
  for (;;) {
    Event event;
    std::size_t dropped = 0;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      event = std::move(queue_.front());
      queue_.pop_front();
      dropped = std::exchange(dropped_, 0);
      calling_ = true;
    }
    if (dropped > 0)
      log::warn("notify_command: {} notifications dropped: more than {} were waiting", dropped,
                kMaxQueued);
    const auto call = call_for(program_, event, user_name(static_cast<uid_t>(event.uid)));
    CommandOptions options;
    options.environment = call.environment;
    options.input = call.input;
    options.stop = &stop_call_;
    const auto result = run_command(call.argv, kTimeout, options);
    if (result.status == 0) {
      log::info("notify_command: job {} {}: notified {}", event.job_id, event.kind,
                call.argv.back());
    } else {
      log::warn("notify_command: job {} {}: {}; output: {}", event.job_id, event.kind,
                !result.error.empty()
                    ? result.error
                    : program_.string() + " exited " + std::to_string(result.status),
                printable(output_tail(result.output)));
    }
    std::lock_guard lock(mutex_);
    calling_ = false;
  }
}

}  // namespace ar
