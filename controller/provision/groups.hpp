#pragma once
// Node groups for continuous provisioning: the desired state of each group,
// one file per group in `groups_dir` (NAME.conf, the project's `key=value`
// style). docs/provisioning.md lists the keys.

#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ar {

// `compute` groups run slurmd and get NodeName lines; `service` groups are
// hosts that run no slurmd (login nodes and the like): provisioned, metered
// and reconciled, but never declared to Slurm.
enum class GroupType { compute, service };
std::string_view to_string(GroupType type);

struct GroupSpec {
  static constexpr unsigned kMaxCount = 10'000;       // slots of one group
  static constexpr std::size_t kMaxNameLength = 40;   // group name, node prefix
  static constexpr std::size_t kMaxNodeConf = 1'000;  // node_conf's bytes

  std::string name;  // from the file's name: NAME.conf
  GroupType type = GroupType::compute;
  unsigned count = 0;
  unsigned min_count = 0;  // 0: new nodes are never held back
  // The slots declared to Slurm (its NodeName lines): scaling within it
  // needs no slurmctld restart. Default: twice `count`, at least 4.
  unsigned max_count = 0;
  // Whether the file sets max_count. A default max_count is fixed when the
  // controller first sees the group: a later count change keeps its slots.
  bool max_count_set = false;
  std::vector<std::string> partitions;  // compute groups only
  // Slurm NodeName attributes, as written ("CPUs=8 Gres=gpu:8"); the
  // controller writes NodeName, NodeAddr, NodeHostname, Port and State.
  std::string node_conf;
  std::string lifecycle_script;  // an absolute path, or empty
  std::string node_prefix;       // default NAME + "-"
  // Several slurmds on one host (Slurm's multiple-slurmd mode, as the local
  // cluster): slot i listens on Port slot_port_base + i - 1. 0: the
  // cluster's SlurmdPort, no Port= written.
  unsigned slot_port_base = 0;

  // The node name of slot `index` (1..max_count): node_prefix + index.
  std::string node(unsigned index) const;
  bool operator==(const GroupSpec&) const = default;
};

// The group `name` from its file's `text`; errors are ConfigError
// "ORIGIN:LINE: ..." naming the value, or "ORIGIN: ..." for a rule between
// two keys (min_count above count, count above max_count).
GroupSpec parse_group(std::string_view name, std::string_view text, std::string_view origin);

// The group files of a folder, each on its own: the groups that read well,
// and for each group that did not, why (its file's error, or a clash with
// another group, which holds both).
struct LoadedGroups {
  std::vector<GroupSpec> specs;               // sorted by name
  std::map<std::string, std::string> errors;  // group name -> why
};

// Every NAME.conf in `dir` (other files are ignored). Refuses two groups
// that would give the same node name, and a partition named like a group
// (both become Slurm names in one namespace: NodeSet): both groups of a
// clash are in `errors`. ConfigError when the folder cannot be read.
LoadedGroups load_each_group(const std::filesystem::path& dir);

// `text` (a group file) with `values` set: each key's line rewritten in
// place (its comment kept), keys the file lacks appended. Used by
// `auto-resume group set`, so that the file stays the one desired state.
std::string set_group_keys(std::string_view text, const std::map<std::string, std::string>& values);

}  // namespace ar
