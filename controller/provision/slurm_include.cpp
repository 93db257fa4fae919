#include "provision/slurm_include.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "autoresume/keyvalue.hpp"
#include "autoresume/text.hpp"

namespace ar::include {

namespace {

// The lines of `text` without comments ('#' to the end) and blanks around;
// empty lines left out.
std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start < text.size()) {
    const auto end = std::min(text.find('\n', start), text.size());
    auto line = text.substr(start, end - start);
    start = end + 1;
    line = line.substr(0, std::min(line.find('#'), line.size()));
    line = trim(line);
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

struct Pair {
  std::string key;  // lower case
  std::string value;
};

Pair pair_of(std::string_view token) {
  const auto eq = token.find('=');
  if (eq == std::string_view::npos) return {lower(token), ""};
  auto value = token.substr(eq + 1);
  if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
      value.back() == value.front())
    value = value.substr(1, value.size() - 2);
  return {lower(token.substr(0, eq)), std::string(value)};
}

std::vector<std::string> split(std::string_view value, char separator) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= value.size()) {
    const auto end = std::min(value.find(separator, start), value.size());
    if (end > start) out.emplace_back(trim(value.substr(start, end - start)));
    start = end + 1;
  }
  return out;
}

bool is_default(std::string_view value) { return lower(value) == "default"; }

// The GRES types of a Gres= value: "gpu:a100:8,nic:1" has gpu and nic.
std::vector<std::string> gres_types(std::string_view gres) {
  std::vector<std::string> out;
  for (const auto& entry : split(gres, ','))
    out.push_back(lower(std::string_view(entry).substr(0, entry.find(':'))));
  return out;
}

std::string node_conf_value(const GroupSpec& spec, std::string_view key) {
  for (const auto token : blank_split(spec.node_conf))
    if (auto pair = pair_of(token); pair.key == key) return pair.value;
  return {};
}

bool is_node_line(std::string_view line) {
  return pair_of(blank_split(line).front()).key == "nodename";
}

// Whether one of `lists` (hostlist expressions; an empty one stands for
// every node) names `node`.
bool covered(const std::vector<std::string>& lists, const std::string& node, const Expand& expand) {
  return std::ranges::any_of(lists, [&](const std::string& list) {
    if (list.empty()) return true;  // gres.conf: a line for every node
    const auto hosts = expand(list);
    return std::ranges::find(hosts, node) != hosts.end();
  });
}

}  // namespace

void scan_slurm_conf(std::string_view text, AdminConf& conf) {
  for (const auto line : lines_of(text)) {
    const auto tokens = blank_split(line);
    if (lower(tokens.front()) == "include") {
      conf.includes.emplace_back(trim(line.substr(tokens.front().size())));
      continue;
    }
    const auto first = pair_of(tokens.front());
    if (first.key == "nodename") {
      if (!is_default(first.value)) conf.node_lists.push_back(first.value);
      continue;
    }
    if (first.key == "partitionname") {
      if (!is_default(first.value)) conf.partitions.insert(first.value);
      continue;
    }
    if (first.key == "nodeset") {
      conf.nodesets.insert(first.value);
      continue;
    }
    for (const auto token : tokens) {
      const auto pair = pair_of(token);
      if (pair.key == "grestypes") {
        for (const auto& type : split(pair.value, ',')) conf.gres_types.insert(lower(type));
      } else if (pair.key == "slurmctldparameters") {
        const auto params = split(pair.value, ',');
        conf.configless = std::ranges::find(params, "enable_configless") != params.end();
      } else if (pair.key == "slurmctldhost" || pair.key == "controlmachine" ||
                 pair.key == "backupcontroller") {
        ++conf.controllers;
      } else if (pair.key == "topologyplugin") {
        conf.topology_tree = pair.value == "topology/tree";
      }
    }
  }
}

std::string sharing_risk(const AdminConf& admin, const std::filesystem::path& slurm_conf,
                         const std::filesystem::path& include) {
  const auto folder = slurm_conf.parent_path();
  if (include.parent_path() == folder) return {};
  const auto backup = admin.controllers > 1 ? ", and so must the backup slurmctld" : "";
  if (admin.configless)
    return fmt::format(
        "{} is outside slurm.conf's folder {}: configless mode sends the slurmds "
        "only the files in that folder{} (move it there)",
        include.string(), folder.string(), backup);
  return fmt::format(
      "{} is outside slurm.conf's folder {} and configless mode is off: every "
      "slurmd host must read it at that path{}, or the nodes disagree on the "
      "node lines",
      include.string(), folder.string(), backup);
}

std::vector<std::string> gres_conf_nodes(std::string_view text) {
  std::vector<std::string> out;
  for (const auto line : lines_of(text)) {
    std::string nodes;
    for (const auto token : blank_split(line))
      if (auto pair = pair_of(token); pair.key == "nodename") nodes = pair.value;
    out.push_back(nodes);
  }
  return out;
}

std::vector<std::string> topology_nodes(std::string_view text) {
  std::vector<std::string> out;
  for (const auto line : lines_of(text))
    for (const auto token : blank_split(line))
      if (auto pair = pair_of(token); pair.key == "nodes") out.push_back(pair.value);
  return out;
}

std::string check(const std::vector<IncludeGroup>& groups, const AdminConf& admin,
                  const Expand& expand) {
  std::map<std::string, std::string> admin_nodes;  // node -> its NodeName= expression
  for (const auto& list : admin.node_lists)
    for (auto& node : expand(list)) admin_nodes.emplace(std::move(node), list);
  for (const auto& [spec, members] : groups) {
    if (spec.type != GroupType::compute) continue;
    const auto& name = spec.name;
    if (admin.nodesets.contains(name))
      return "group '" + name + "': slurm.conf already has NodeSet=" + name;
    if (admin.partitions.contains(name))
      return "group '" + name + "': slurm.conf has a partition of that name (the group's NodeSet)";
    for (unsigned i = 1; i <= spec.max_count; ++i)
      if (const auto it = admin_nodes.find(spec.node(i)); it != admin_nodes.end())
        return "node '" + it->first + "' of group '" + name +
               "' is declared in slurm.conf already (NodeName=" + it->second + ")";
    const auto gres = node_conf_value(spec, "gres");
    if (gres.empty() || spec.max_count == 0) continue;
    for (const auto& type : gres_types(gres))
      if (!admin.gres_types.contains(type))
        return "group '" + name + "': its Gres type '" + type +
               "' is not in slurm.conf's GresTypes (" +
               join({admin.gres_types.begin(), admin.gres_types.end()}, ",") + ")";
    for (const auto& node : {spec.node(1), spec.node(spec.max_count)})
      if (!covered(admin.gres_lines, node, expand))
        return "group '" + name + "' has Gres=" + gres + " but gres.conf has no line for node '" +
               node + "' (a node without one is INVAL)";
  }
  if (admin.topology_tree)
    for (const auto& [spec, members] : groups) {
      if (spec.type != GroupType::compute || spec.max_count == 0) continue;
      for (const auto& node : {spec.node(1), spec.node(spec.max_count)})
        if (!covered(admin.switch_nodes, node, expand))
          return "TopologyPlugin=topology/tree but no switch of topology.conf has node '" + node +
                 "' of group '" + spec.name + "'";
    }
  return {};
}

std::string render(const std::vector<IncludeGroup>& groups, const AdminConf& admin,
                   const Compress& compress) {
  std::string out(kHeader);
  out += "\n# docs/provisioning.md: one NodeName and NodeSet per group, the groups' partitions.\n";
  std::map<std::string, std::vector<std::string>> partitions;  // -> NodeSets in it
  const auto slots = [](const GroupSpec& spec, unsigned n) {
    std::vector<std::string> names;
    names.reserve(n);
    for (unsigned i = 1; i <= n; ++i) names.push_back(spec.node(i));
    return names;
  };
  for (const auto& [spec, members] : groups) {
    if (spec.type != GroupType::compute) continue;
    const auto conf = spec.node_conf.empty() ? std::string() : " " + spec.node_conf;
    if (spec.slot_port_base != 0) {
      for (unsigned i = 1; i <= spec.max_count; ++i)
        out += "NodeName=" + spec.node(i) + conf +
               " Port=" + std::to_string(spec.slot_port_base + i - 1) + " State=CLOUD\n";
    } else if (spec.max_count > 0) {
      out += "NodeName=" + compress(slots(spec, spec.max_count)) + conf + " State=CLOUD\n";
    }
    const auto in = std::min(members, spec.max_count);
    if (in > 0) out += "NodeSet=" + spec.name + " Nodes=" + compress(slots(spec, in)) + "\n";
    for (const auto& partition : spec.partitions) {
      auto& sets = partitions[partition];
      if (in > 0) sets.push_back(spec.name);
    }
  }
  for (const auto& [partition, sets] : partitions) {
    if (admin.partitions.contains(partition)) continue;
    out += "PartitionName=" + partition;
    if (!sets.empty()) out += " Nodes=" + join(sets, ",");
    out += " SuspendTime=INFINITE State=UP\n";
  }
  return out;
}

std::string_view to_string(Change change) {
  switch (change) {
    case Change::none:
      return "none";
    case Change::reconfigure:
      return "reconfigure";
    case Change::restart:
      return "restart";
  }
  return "?";
}

Change classify(std::string_view before, std::string_view after) {
  const auto split_lines = [](std::string_view text) {
    std::pair<std::set<std::string>, std::set<std::string>> out;  // node lines, others
    for (const auto line : lines_of(text))
      (is_node_line(line) ? out.first : out.second).emplace(line);
    return out;
  };
  const auto [nodes_before, others_before] = split_lines(before);
  const auto [nodes_after, others_after] = split_lines(after);
  if (nodes_before != nodes_after) return Change::restart;
  if (others_before != others_after) return Change::reconfigure;
  return Change::none;
}

std::vector<std::string> diff(std::string_view before, std::string_view after) {
  const auto old_lines = lines_of(before);
  const auto new_lines = lines_of(after);
  const std::set<std::string_view> old_set(old_lines.begin(), old_lines.end());
  const std::set<std::string_view> new_set(new_lines.begin(), new_lines.end());
  std::vector<std::string> out;
  for (const auto line : old_lines)
    if (!new_set.contains(line)) out.push_back("-" + std::string(line));
  for (const auto line : new_lines)
    if (!old_set.contains(line)) out.push_back("+" + std::string(line));
  return out;
}

}  // namespace ar::include
