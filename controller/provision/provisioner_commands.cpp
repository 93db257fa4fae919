// The admins' commands (group set, apply, retry, roll) and the lifecycle
// logs' paths, asked from server threads: each under the lock, an event
// naming the uid saved before the answer.

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <system_error>

#include "autoresume/keyvalue.hpp"
#include "autoresume/text.hpp"
#include "log.hpp"
#include "provision/groups.hpp"
#include "provision/provisioner.hpp"
#include "provision/provisioner_detail.hpp"

namespace ar {

using namespace provisioner_detail;  // NOLINT: the provisioner's own helpers

provision::Group& Provisioner::known_group(const std::string& name) {
  auto* group = provision::find_group(cluster_, name);
  if (group == nullptr)
    throw std::invalid_argument("no group '" + name + "' is known (its file: " +
                                (settings_.groups_dir / (name + ".conf")).string() + ")");
  return *group;
}

std::string Provisioner::set_group(const std::string& name, std::optional<unsigned> count,
                                   std::optional<unsigned> min_count, uid_t uid) {
  const auto path = settings_.groups_dir / (name + ".conf");
  // Read, changed and written under the lock: two group sets at once both land.
  std::lock_guard lock(mutex_);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::invalid_argument("no group '" + name + "': cannot read " + path.string() + ": " +
                                std::error_code(errno, std::generic_category()).message());
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::map<std::string, std::string> values;
  if (count) values["count"] = std::to_string(*count);
  if (min_count) values["min_count"] = std::to_string(*min_count);
  const auto changed = set_group_keys(text, values);
  GroupSpec spec;
  try {
    spec = parse_group(name, changed, path.string());
  } catch (const ConfigError& e) {
    throw std::invalid_argument(e.what());
  }
  // The slots declared to Slurm stay: a count beyond them is refused here,
  // not found wrong at the next tick.
  if (const auto* group = provision::find_group(cluster_, name);
      group != nullptr && spec.count > group->spec.max_count)
    throw std::invalid_argument("count " + std::to_string(spec.count) + " is more than max_count " +
                                std::to_string(group->spec.max_count) + " of group '" + name +
                                "' (the slots declared to Slurm)");
  try {
    write_text(path, changed);  // the admin's file keeps its mode and owner
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string("cannot replace the group's file: ") + e.what());
  }
  std::string what;
  for (const auto& [key, value] : values) what += (what.empty() ? "" : " ") + key + "=" + value;
  events_.push_back({"group_set", "info", "group", name, "",
                     fmt::format("{} set by uid {} in {}", what, uid, path.string())});
  std::string message = fmt::format("group {}: {} written to {}", name, what, path.string());
  if (held()) {
    message += "; the controller holds back now (auto-resume status): the change waits";
  } else {
    const auto errors = reload_groups();
    if (const auto own = group_errors_.find(name); own != group_errors_.end()) {
      // Its change cannot be applied (a clash with another group): the file
      // goes back to what it was, and the request fails.
      const auto why = own->second;
      try {
        write_text(path, text);
      } catch (const std::exception& e) {
        log::warn("group {}: cannot put {} back: {}", name, path.string(), e.what());
      }
      reload_groups();
      save();
      throw std::invalid_argument(fmt::format("group {}: {} not applied ({} left as it was): {}",
                                              name, what, path.string(), why));
    }
    if (const auto* group = provision::find_group(cluster_, name); group != nullptr)
      message += fmt::format("; operation {} (count {}, min_count {})", group->operation.id,
                             group->operation.count, group->operation.min_count);
    if (!errors.empty())
      message +=
          "; other group files are in error (those groups keep their last good state): " + errors;
  }
  dirty_ = true;
  save();
  return message;
}

std::string Provisioner::apply_groups(uid_t uid) {
  std::lock_guard lock(mutex_);
  if (held()) throw std::invalid_argument("the controller holds back now (auto-resume status)");
  std::map<std::string, std::uint64_t> before;
  for (const auto& group : cluster_.groups) before[group.spec.name] = group.operation.id;
  const auto errors = reload_groups();
  if (!last_groups_error_.empty()) {
    save();
    throw std::invalid_argument("the group files cannot be read (nothing changed): " + errors);
  }
  std::vector<std::string> started;
  for (const auto& group : cluster_.groups)
    if (before[group.spec.name] != group.operation.id)
      started.push_back(fmt::format("{} (operation {}, count {})", group.spec.name,
                                    group.operation.id, group.operation.count));
  const auto message =
      started.empty() ? fmt::format("{} group(s) read: nothing changed", cluster_.groups.size())
                      : "operations started: " + join(started, ", ");
  events_.push_back({"group_apply", "info", "cluster", "", "",
                     fmt::format("group files read at the request of uid {}: {}", uid, message)});
  save();
  // The groups that read well are applied; those in error fail the request.
  if (!errors.empty())
    throw std::invalid_argument(fmt::format(
        "{}; group files in error (those groups keep their last good state): {}", message, errors));
  return message;
}

std::string Provisioner::retry_group(const std::string& name, uid_t uid) {
  std::lock_guard lock(mutex_);
  auto& group = known_group(name);
  std::vector<std::string> what;
  if (group.stopped)
    what.push_back(fmt::format("stopped after {} lifecycle failures", group.bootstrap_failures));
  if (group.config_failed) what.push_back("failed by a configuration error (78)");
  if (group.capacity_until > now()) what.push_back("waiting for capacity");
  if (std::ranges::any_of(group.slots, [&](const auto& slot) { return slot.retry_at > now(); }))
    what.push_back("creates backing off");
  provision::retry(group);
  const auto message =
      what.empty() ? fmt::format("group {} was neither stopped nor waiting: nothing to retry", name)
                   : fmt::format("group {} creates again (it was {})", name, join(what, ", "));
  return asked("group_retry", name, message, uid);
}

std::string Provisioner::asked(const char* kind, const std::string& group,
                               const std::string& message, uid_t uid) {
  events_.push_back(
      {kind, "info", "group", group, "", fmt::format("{} (asked by uid {})", message, uid)});
  plan_after_now();  // planned on nodes read from now on
  dirty_ = true;
  save();
  return message;
}

std::string Provisioner::roll_group(const std::string& name, unsigned batch, uid_t uid) {
  std::lock_guard lock(mutex_);
  auto& group = known_group(name);
  if (batch == 0 || batch > GroupSpec::kMaxCount)
    throw std::invalid_argument("invalid batch " + std::to_string(batch) + ": expected 1-" +
                                std::to_string(GroupSpec::kMaxCount));
  provision::roll(group, batch);
  const auto rolling = std::ranges::count_if(group.slots, [](const auto& s) { return s.roll; });
  const auto message =
      rolling == 0 ? fmt::format("group {} has no instance in service: nothing to replace", name)
                   : fmt::format(
                         "group {}: {} instance(s) to replace, {} at a time (idle first; "
                         "each drained, its jobs end first)",
                         name, rolling, batch);
  return asked("roll_started", name, message, uid);
}

std::optional<std::string> Provisioner::lifecycle_log(const std::string& node) const {
  std::lock_guard lock(mutex_);
  for (const auto& group : cluster_.groups)
    for (const auto& slot : group.slots)
      if (group.spec.node(slot.index) == node)
        return slot.attempt == 0 ? std::string() : log_file(group, slot);
  return std::nullopt;
}

}  // namespace ar
