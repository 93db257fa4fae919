#include "provision/groups.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <set>

#include "autoresume/keyvalue.hpp"
#include "autoresume/text.hpp"

namespace ar {

namespace {

// The NodeName attributes a group may set, as Slurm spells them. The
// controller owns NodeName, NodeAddr, NodeHostname, Port and State.
constexpr std::array<std::string_view, 14> kNodeAttributes = {
    "Boards",          "CoresPerSocket", "CoreSpecCount", "CPUs",       "CpuSpecList",
    "Features",        "Gres",           "MemSpecLimit",  "RealMemory", "Sockets",
    "SocketsPerBoard", "ThreadsPerCore", "TmpDisk",       "Weight"};
constexpr std::array<std::string_view, 6> kOwnedAttributes = {
    "NodeName", "NodeAddr", "NodeHostname", "Port", "State", "Reason"};

// A Slurm name the controller writes (group, partition, node prefix):
// letters, digits, '_' and '-', starting with a letter.
void check_name(std::string_view key, std::string_view value) {
  if (!is_slurm_name(value, GroupSpec::kMaxNameLength))
    invalid_value(key, value,
                  "expected a name of letters, digits, '_' and '-', starting with a letter, "
                  "at most " +
                      std::to_string(GroupSpec::kMaxNameLength) + " characters");
}

bool value_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
         std::string_view("_.,:-+/()*@%").find(c) != std::string_view::npos;
}

// One "Key=Value" of node_conf, its key as Slurm spells it.
std::string node_attribute(std::string_view token, std::set<std::string>& seen) {
  const auto eq = token.find('=');
  const auto key = lower(token.substr(0, std::min(eq, token.size())));
  const auto same = [&](std::string_view known) { return lower(known) == key; };
  if (const auto* owned = std::ranges::find_if(kOwnedAttributes, same);
      owned != kOwnedAttributes.end())
    invalid_value("node_conf", token, "the controller writes " + std::string(*owned) + " itself");
  const auto* known = std::ranges::find_if(kNodeAttributes, same);
  if (eq == std::string_view::npos || known == kNodeAttributes.end()) {
    std::vector<std::string> names(kNodeAttributes.begin(), kNodeAttributes.end());
    invalid_value("node_conf", token, "expected Key=Value with Key one of " + join(names, ", "));
  }
  const auto value = token.substr(eq + 1);
  if (value.empty() || !std::ranges::all_of(value, value_char))
    invalid_value("node_conf", token,
                  "a value is letters, digits and _.,:-+/()*@% (no blanks, quotes or '#')");
  if (!seen.insert(key).second) invalid_value("node_conf", token, "its key is set twice");
  return std::string(*known) + "=" + std::string(value);
}

std::string parse_node_conf(std::string_view value) {
  if (value.size() > GroupSpec::kMaxNodeConf)
    invalid_value("node_conf", shortened(value, 60),
                  "at most " + std::to_string(GroupSpec::kMaxNodeConf) + " bytes");
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto token : blank_split(value)) out.push_back(node_attribute(token, seen));
  return join(out, " ");
}

std::vector<std::string> parse_partitions(std::string_view value) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= value.size()) {
    const auto end = std::min(value.find(',', start), value.size());
    const auto name = trim(value.substr(start, end - start));
    check_name("partitions", name);
    if (std::ranges::find(out, name) != out.end())
      invalid_value("partitions", name, "a partition is named twice");
    out.emplace_back(name);
    start = end + 1;
  }
  return out;
}

// Every key of a group file, one row each: its name and how its value is
// read. The unknown-key error lists them; docs/provisioning.md's table of
// the keys is checked against that list (groups_test).
struct GroupKey {
  std::string_view name;
  void (*apply)(GroupSpec& group, const std::string& key, const std::string& value);
};
constexpr auto group_keys() {
  using G = GroupSpec;
  using S = const std::string&;
  return std::array{
      GroupKey{"type",
               [](G& g, S key, S value) {
                 if (value == "compute")
                   g.type = GroupType::compute;
                 else if (value == "service")
                   g.type = GroupType::service;
                 else
                   invalid_value(key, value, "expected compute or service");
               }},
      GroupKey{"count",
               [](G& g, S key, S value) {
                 g.count = static_cast<unsigned>(parse_uint(key, value, 0, GroupSpec::kMaxCount));
               }},
      GroupKey{"min_count",
               [](G& g, S key, S value) {
                 g.min_count =
                     static_cast<unsigned>(parse_uint(key, value, 0, GroupSpec::kMaxCount));
               }},
      GroupKey{"max_count",
               [](G& g, S key, S value) {
                 g.max_count =
                     static_cast<unsigned>(parse_uint(key, value, 1, GroupSpec::kMaxCount));
               }},
      GroupKey{"partitions", [](G& g, S, S value) { g.partitions = parse_partitions(value); }},
      GroupKey{"node_conf", [](G& g, S, S value) { g.node_conf = parse_node_conf(value); }},
      GroupKey{"lifecycle_script",
               [](G& g, S key, S value) { g.lifecycle_script = parse_absolute_path(key, value); }},
      GroupKey{"node_prefix",
               [](G& g, S key, S value) {
                 check_name(key, value);
                 g.node_prefix = value;
               }},
      GroupKey{"slot_port_base",
               [](G& g, S key, S value) {
                 g.slot_port_base = static_cast<unsigned>(parse_uint(key, value, 1, 65535));
               }},
  };
}
constexpr auto kGroupKeys = group_keys();

void apply(GroupSpec& group, const std::string& key, const std::string& value) {
  for (const auto& known : kGroupKeys)
    if (known.name == key) return known.apply(group, key, value);
  throw ConfigError("unknown key '" + key + "' (known: " + join(kGroupKeys, ", ", &GroupKey::name) +
                    ")");
}

// The rules between keys, once the whole file is read.
void check_group(const GroupSpec& group, const std::set<std::string>& seen,
                 std::string_view origin) {
  const auto fail = [&](const std::string& why) {
    throw ConfigError(std::string(origin) + ": " + why);
  };
  if (!seen.contains("count")) fail("count is not set (the group's desired number of nodes)");
  if (group.min_count > group.count)
    fail("min_count " + std::to_string(group.min_count) + " is more than count " +
         std::to_string(group.count));
  if (group.count > group.max_count)
    fail("count " + std::to_string(group.count) + " is more than max_count " +
         std::to_string(group.max_count) +
         " (the nodes declared to Slurm; raising it needs a slurmctld restart)");
  if (group.type == GroupType::service && (!group.partitions.empty() || !group.node_conf.empty()))
    fail("a service group runs no slurmd: partitions and node_conf are for compute groups");
  if (group.slot_port_base != 0 && group.slot_port_base + group.max_count - 1 > 65535)
    fail("slot_port_base " + std::to_string(group.slot_port_base) + " and max_count " +
         std::to_string(group.max_count) + " give ports above 65535");
  if (group.type == GroupType::compute && group.partitions.empty())
    fail("partitions is not set (a compute group's nodes must be in a partition)");
}

}  // namespace

std::string_view to_string(GroupType type) {
  return type == GroupType::compute ? "compute" : "service";
}

std::string GroupSpec::node(unsigned index) const { return node_prefix + std::to_string(index); }

GroupSpec parse_group(std::string_view name, std::string_view text, std::string_view origin) {
  GroupSpec group;
  try {
    check_name("the group name", name);
  } catch (const ConfigError& e) {
    throw ConfigError(std::string(origin) + ": " + e.what());
  }
  group.name = name;
  const auto seen = parse_settings(
      text, origin,
      [&](const std::string& key, const std::string& value) { apply(group, key, value); });
  group.max_count_set = seen.contains("max_count");
  if (!group.max_count_set)
    group.max_count = std::min(GroupSpec::kMaxCount, std::max(2 * group.count, 4U));
  if (!seen.contains("node_prefix")) group.node_prefix = group.name + "-";
  check_group(group, seen, origin);
  return group;
}

LoadedGroups load_each_group(const std::filesystem::path& dir) {
  std::error_code error;
  std::filesystem::directory_iterator it(dir, error);
  if (error) throw ConfigError("cannot read groups_dir '" + dir.string() + "': " + error.message());
  LoadedGroups out;
  for (const auto& entry : it) {
    const auto& path = entry.path();
    if (path.extension() != ".conf" || !entry.is_regular_file()) continue;
    const auto name = path.stem().string();
    try {
      out.specs.push_back(parse_group(name, read_config_file(path), path.string()));
    } catch (const ConfigError& e) {
      out.errors[name] = e.what();
    }
  }
  std::ranges::sort(out.specs, {}, &GroupSpec::name);
  // A clash holds both groups: either file may be the one just changed.
  const auto clash = [&](const std::string& a, const std::string& b, const std::string& why) {
    out.errors.emplace(a, why);
    out.errors.emplace(b, why);
  };
  std::map<std::string, std::string> owner;  // node or group name -> group
  for (const auto& group : out.specs) owner.emplace(group.name, group.name);
  for (const auto& group : out.specs) {
    for (const auto& partition : group.partitions)
      if (owner.contains(partition) && owner.at(partition) == partition)
        clash(group.name, partition,
              "partition '" + partition + "' of group '" + group.name +
                  "' is named like a group (NodeSet names and partitions share names)");
    for (unsigned i = 1; i <= group.max_count; ++i) {
      const auto [at, added] = owner.emplace(group.node(i), group.name);
      if (!added)
        clash(group.name, at->second,
              "node '" + at->first + "' of group '" + group.name +
                  "' is already a name of group '" + at->second + "' (change a node_prefix)");
    }
  }
  std::erase_if(out.specs, [&](const GroupSpec& spec) { return out.errors.contains(spec.name); });
  return out;
}

std::string set_group_keys(std::string_view text,
                           const std::map<std::string, std::string>& values) {
  std::string out;
  std::set<std::string> done;
  std::size_t start = 0;
  while (start < text.size()) {
    const auto end = std::min(text.find('\n', start), text.size());
    const auto line = text.substr(start, end - start);
    start = end + 1;
    const auto hash = line.find('#');
    const auto body = line.substr(0, std::min(hash, line.size()));
    const auto eq = body.find('=');
    const auto key = eq == std::string_view::npos ? std::string() : lower(trim(body.substr(0, eq)));
    if (const auto it = values.find(key); it != values.end() && !done.contains(key)) {
      out += std::string(trim(body.substr(0, eq))) + "=" + it->second;
      if (hash != std::string_view::npos) out += "  " + std::string(line.substr(hash));
      done.insert(key);
    } else {
      out += line;
    }
    out += '\n';
  }
  for (const auto& [key, value] : values)
    if (!done.contains(key)) out += key + "=" + value + "\n";
  return out;
}

}  // namespace ar
