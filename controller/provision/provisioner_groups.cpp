// The group files (groups_dir): read at each tick, a new group's slots
// drained first, a group's new max_count taken once slurmctld has its
// slots; a file in error said once, its group kept as it was.

#include <fmt/core.h>

#include <stdexcept>
#include <system_error>

#include "autoresume/keyvalue.hpp"
#include "autoresume/text.hpp"
#include "files.hpp"
#include "log.hpp"
#include "provision/groups.hpp"
#include "provision/provisioner.hpp"

namespace ar {

namespace {

using provision::SlotPhase;

}  // namespace

std::string Provisioner::reload_groups(bool act) {
  LoadedGroups loaded;
  try {
    loaded = load_own_groups();
    last_groups_error_.clear();
  } catch (const ConfigError& e) {
    // The groups stay as they were until the folder is right again.
    if (last_groups_error_ != e.what()) {
      last_groups_error_ = e.what();
      log::warn("group files: {}", e.what());
      events_.push_back({"group_file_error", "error", "cluster", "", "", e.what()});
    }
    return e.what();
  }
  // A group whose file is in error (or clashes with another's) keeps its
  // last good state until the file is right; the others go on. Said once
  // a group, as the group's event.
  std::vector<std::string> errors;
  for (const auto& [name, why] : loaded.errors) {
    errors.push_back(name + ": " + why);
    if (auto& said = group_errors_[name]; said != why) {
      said = why;
      log::warn("group {}: {}", name, why);
      events_.push_back({"group_file_error", "error", "group", name, "", why});
    }
  }
  std::erase_if(group_errors_,
                [&](const auto& entry) { return !loaded.errors.contains(entry.first); });
  const auto& specs = loaded.specs;
  // Merge mode: the groups whose slots slurmctld has as their files ask.
  const auto declared = merge() ? keep_include(specs, act) : std::set<std::string>();
  for (const auto& spec : specs) {
    auto* found = provision::find_group(cluster_, spec.name);
    if (found == nullptr && merge() && !declared.contains(spec.name))
      continue;  // its slots are not in slurmctld yet (keep_include said why)
    if (found == nullptr) {
      cluster_.groups.push_back(provision::new_group(spec));
      auto& group = cluster_.groups.back();
      add({provision::start_operation(cluster_, group, spec.count, spec.min_count, now())});
      plan_after_now();
      // Write-ahead: no slot may be allocated before it has an instance.
      if (act && spec.type == GroupType::compute)
        for (unsigned i = 1; i <= spec.max_count; ++i) drain_slot(spec.node(i));
      dirty_ = true;
      continue;
    }
    auto& group = *found;
    // In merge mode a new max_count is applied once slurmctld has the slots
    // (keep_include). Otherwise the slots declared to Slurm stay as they
    // are, and node_prefix and type never change: said once. A default
    // max_count (the file sets none) stays what it was when the group came.
    const bool new_max = spec.max_count_set && spec.max_count != group.spec.max_count;
    if (new_max && declared.contains(spec.name)) adopt_slots(group, spec.max_count, act);
    if (spec.node_prefix != group.spec.node_prefix || spec.type != group.spec.type) {
      say_once(group.spec.name + "/slots", spec.name,
               "node_prefix and type cannot change while the group exists: not applied (the "
               "group keeps " +
                   group.spec.node_prefix + " and " + std::string(to_string(group.spec.type)) +
                   ")");
    } else if (new_max && !merge()) {
      say_once(group.spec.name + "/slots", spec.name,
               "max_count changes the slots declared to Slurm: not applied without "
               "slurm_conf_include (the group keeps max_count " +
                   std::to_string(group.spec.max_count) + ")");
    } else {
      said_.forget(group.spec.name + "/slots");
    }
    if (spec.count != group.spec.count || spec.min_count != group.spec.min_count) {
      try {
        add({provision::start_operation(cluster_, group, spec.count, spec.min_count, now())});
        plan_after_now();
        said_.forget(group.spec.name + "/count");
      } catch (const ConfigError& e) {
        say_once(group.spec.name + "/count", spec.name, e.what());
        continue;  // the operation before goes on
      }
      dirty_ = true;
    }
    const auto keep = group.spec;
    group.spec = spec;
    group.spec.max_count = keep.max_count;
    group.spec.node_prefix = keep.node_prefix;
    group.spec.type = keep.type;
  }
  return join(errors, "; ");
}

void Provisioner::adopt_slots(provision::Group& group, unsigned max_count, bool act) {
  const auto before = group.spec.max_count;
  if (max_count < before) {
    for (unsigned i = max_count; i < before; ++i)
      if (group.slots[i].phase != SlotPhase::empty) return;  // keep_include kept them
    for (unsigned i = max_count; i < before; ++i) undrained_.erase(group.spec.node(i + 1));
    group.slots.resize(max_count);
  } else {
    group.slots.resize(max_count);
    for (unsigned i = before; i < max_count; ++i) {
      group.slots[i].index = i + 1;
      // Write-ahead, as for a new group: drained before it is in a partition.
      if (act && group.spec.type == GroupType::compute) drain_slot(group.spec.node(i + 1));
    }
  }
  group.spec.max_count = max_count;
  dirty_ = true;
  add_cluster_event(
      "slots_changed", "info", group.spec.name, "",
      fmt::format("max_count {} -> {}: slurmctld has the group's slots", before, max_count));
}

LoadedGroups Provisioner::load_own_groups() const {
  // Group files say which nodes the controller (root) creates, and it
  // writes their .next and .prev beside them: only from a folder of its own.
  std::error_code missing;
  if (std::filesystem::exists(settings_.groups_dir, missing)) {
    try {
      files::check_own_folder(settings_.groups_dir, "groups_dir");
    } catch (const std::runtime_error& e) {
      throw ConfigError(e.what());
    }
  }
  return load_each_group(settings_.groups_dir);
}

}  // namespace ar
