// The provisioner's writes to slurmctld: each node's queue (write,
// take_writes), its drains, the write-ahead drain of empty slots, and the
// POWER_UP and POWER_DOWN writes.

#include <exception>
#include <vector>

#include "log.hpp"
#include "provision/provisioner.hpp"

namespace ar {

void Provisioner::write(const std::string& key, std::string what, std::function<void()> call,
                        std::function<void()> then, bool again) {
  auto& queue = queued_[key];
  queue.push_back({std::move(what), std::move(call), std::move(then), again, {}});
  if (queue.size() == 1) start_write(key);
}

void Provisioner::start_write(const std::string& key) {
  // At most kMaxWrites at once (a new group drains all its slots): the
  // others wait in their queues, started as those under way return.
  if (writes_.started() && writes_.size() >= kMaxWrites) return;
  try {
    writes_.run(key, [call = queued_.at(key).front().call] {
      call();
      return true;
    });
  } catch (const std::exception& e) {
    log::warn("{}: cannot start its write to slurmctld now ({}): tried again at the next tick", key,
              e.what());
    return;
  }
  if (!writes_.started()) take_write(key);  // it ran at once
}

void Provisioner::take_write(const std::string& key) {
  auto outcome = writes_.take(key);
  if (!outcome) return;
  auto& queue = queued_.at(key);
  bool ok = true;
  try {
    outcome->get();
    write_failed_.erase(key + ": " + queue.front().what);
  } catch (const std::exception& e) {
    ok = false;
    auto& failed = queue.front();
    const auto now = clock_.now();
    if (failed.again) {
      if (failed.first_failed == Clock::Steady::time_point{}) failed.first_failed = now;
      if (now - failed.first_failed < kWriteRetryFor) {
        if (write_failed_.insert(key + ": " + failed.what).second)
          log::info("{}: {}: {}: made again until slurmctld takes it (for {} s at most)", key,
                    failed.what, e.what(), kWriteRetryFor.count());
        return;  // still first in its queue: take_writes starts it again
      }
    }
    if (key == kSlurmctld)  // an event too: the admin's include file waits for it
      say_once("include/write", "",
               std::string("the include file's reconfigure: ") + e.what() +
                   " (tried again at the next tick)");
    else if (failed.again)
      log::warn("{}: {}: {}: given up after {} s of tries", key, failed.what, e.what(),
                kWriteRetryFor.count());
    else if (write_failed_.insert(key + ": " + failed.what).second)
      log::warn("{}: {}: {}", key, failed.what, e.what());
  }
  auto done = std::move(queue.front());
  queue.pop_front();
  if (queue.empty()) {
    queued_.erase(key);
  } else {
    start_write(key);
  }
  if (!ok || !done.then) return;
  try {
    done.then();
  } catch (const std::exception& e) {
    log::warn("{}: after {}: {}", key, done.what, e.what());
  }
}

void Provisioner::take_writes() {
  for (const auto& key : writes_.finished()) take_write(key);
  // Queues that wait for room (kMaxWrites), whose start failed, or whose
  // write failed and is made again. (Their keys first: a write that runs at
  // once, without threads, may end its queue.)
  std::vector<std::string> waiting;
  for (const auto& entry : queued_)
    if (!writes_.has(entry.first)) waiting.push_back(entry.first);
  for (const auto& key : waiting) {
    if (writes_.size() >= kMaxWrites) break;
    if (queued_.contains(key) && !writes_.has(key)) start_write(key);
  }
}

void Provisioner::drain(const std::string& node, const std::string& why,
                        std::function<void()> then) {
  write(
      node, "drain (" + why + ")",
      [this, node, reason = kReasonPrefix + why] { slurm_.set_node_drain(node, reason); },
      std::move(then));
}

void Provisioner::drain_slot(const std::string& node) {
  undrained_.insert(node);
  if (writing(node)) return;  // this drain, or a write before it
  drain(node, "empty slot", [this, node] { undrained_.erase(node); });
}

std::function<void()> Provisioner::on_work(const std::string& name,
                                           std::function<void(Work&)> change) {
  return [this, name, change = std::move(change)] {
    if (const auto w = work_.find(name); w != work_.end()) change(w->second);
  };
}

void Provisioner::power_up_call(const std::string& name) {
  // One write: no POWER_UP unless the drain is in.
  write(name, "drain (provisioning) and POWER_UP", [this, name] {
    // Not std::string(kReasonPrefix) + "...": GCC 12 at -O2 finds a false
    // -Warray-bounds in that once this is in a file of its own.
    slurm_.set_node_drain(name, kReasonPrefix + std::string("provisioning"));
    slurm_.power_up(name);
  });
}

void Provisioner::power_down_call(const std::string& name, bool force) {
  if (force)
    write(name, "POWER_DOWN_FORCE", [this, name] { slurm_.power_down_force(name); });
  else
    write(name, "POWER_DOWN_ASAP", [this, name] { slurm_.power_down_asap(name); });
}

}  // namespace ar
