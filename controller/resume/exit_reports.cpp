#include "resume/exit_reports.hpp"

#include <algorithm>

namespace ar {

bool ExitReports::add(const std::string& step, const std::string& node, bool clean,
                      const std::vector<std::string>& hosts) {
  std::lock_guard lock(mutex_);
  auto it = steps_.find(step);
  if (it == steps_.end()) {
    if (steps_.size() >= kMaxSteps) {
      const auto oldest = std::ranges::min_element(
          steps_, [](const auto& a, const auto& b) { return a.second.serial < b.second.serial; });
      steps_.erase(oldest);
    }
    it = steps_.emplace(step, Entry{next_serial_++, {}}).first;
  }
  it->second.nodes.emplace(node, clean);  // a repeated report changes nothing
  return all_clean_locked(it->second, hosts);
}

bool ExitReports::all_clean(const std::string& step, const std::vector<std::string>& hosts) const {
  std::lock_guard lock(mutex_);
  const auto it = steps_.find(step);
  return it != steps_.end() && all_clean_locked(it->second, hosts);
}

bool ExitReports::all_reported(const std::string& step,
                               const std::vector<std::string>& hosts) const {
  std::lock_guard lock(mutex_);
  const auto it = steps_.find(step);
  return it != steps_.end() && !hosts.empty() &&
         std::ranges::all_of(
             hosts, [&](const std::string& host) { return it->second.nodes.contains(host); });
}

bool ExitReports::any_failed(const std::string& step, const std::vector<std::string>& hosts) const {
  std::lock_guard lock(mutex_);
  const auto it = steps_.find(step);
  if (it == steps_.end()) return false;
  return std::ranges::any_of(hosts, [&](const std::string& host) {
    const auto node = it->second.nodes.find(host);
    return node != it->second.nodes.end() && !node->second;
  });
}

bool ExitReports::all_clean_locked(const Entry& entry,
                                   const std::vector<std::string>& hosts) const {
  return !hosts.empty() && std::ranges::all_of(hosts, [&](const std::string& host) {
    const auto it = entry.nodes.find(host);
    return it != entry.nodes.end() && it->second;
  });
}

void ExitReports::forget(const std::string& step) {
  std::lock_guard lock(mutex_);
  steps_.erase(step);
}

std::size_t ExitReports::steps() const {
  std::lock_guard lock(mutex_);
  return steps_.size();
}

}  // namespace ar
