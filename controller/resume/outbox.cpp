#include "resume/outbox.hpp"

#include <exception>
#include <utility>

#include "log.hpp"

namespace ar {

void Outbox::start() {
  std::lock_guard lock(mutex_);
  if (running_) return;
  running_ = true;
  stopping_ = false;
  thread_ = std::thread([this] { loop(); });
}

void Outbox::stop() {
  {
    std::lock_guard lock(mutex_);
    if (!running_) return;
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mutex_);
  if (!queue_.empty())
    log::warn("stopping: {} call(s) to slurmctld not made (the first: {})", queue_.size(),
              queue_.front().what);
  queue_.clear();
  running_ = false;
}

void Outbox::post(std::string what, std::function<void()> call) {
  Call posted{std::move(what), std::move(call)};
  {
    std::unique_lock lock(mutex_);
    if (running_) {
      if (queue_.size() >= kMaxQueued) {
        log::warn("slurmctld is slow: {} calls wait; dropped: {}", queue_.size(),
                  queue_.front().what);
        queue_.pop_front();
      }
      queue_.push_back(std::move(posted));
      lock.unlock();
      changed_.notify_all();
      return;
    }
  }
  run_one(posted);
}

void Outbox::drain() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return !running_ || (queue_.empty() && !busy_); });
}

void Outbox::run_one(const Call& call) {
  try {
    call.run();
  } catch (const std::exception& e) {
    log::warn("{}: {}", call.what, e.what());
  }
}

void Outbox::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) break;
    auto call = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    run_one(call);
    lock.lock();
    busy_ = false;
    changed_.notify_all();
  }
  busy_ = false;
  changed_.notify_all();
}

}  // namespace ar
