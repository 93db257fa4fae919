#pragma once
// The slurm.conf include file of continuous provisioning (merge mode,
// docs/provisioning.md "The include file"): the groups' NodeName lines, a
// NodeSet per group and the partitions the admin has not defined. The
// admin's slurm.conf stays as it is but for one Include line, added once.
//
// These functions are pure (files come in as text): the provisioner reads
// and writes the files, runs scontrol and the restart command.

#include <cstddef>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "provision/groups.hpp"

namespace ar::include {

// What the admin's slurm.conf and the files it includes declare (the
// include file itself excepted): the names the include must not reuse, and
// the settings it depends on. Keys are matched as Slurm does, any case.
struct AdminConf {
  std::vector<std::string> node_lists;    // each NodeName= (hostlist expressions)
  std::set<std::string> partitions;       // PartitionName=
  std::set<std::string> nodesets;         // NodeSet=
  std::set<std::string> gres_types;       // GresTypes=, lower case
  std::vector<std::string> includes;      // each Include's path, as written
  bool configless = false;                // SlurmctldParameters=enable_configless
  unsigned controllers = 0;               // SlurmctldHost= (ControlMachine, BackupController)
  bool topology_tree = false;             // TopologyPlugin=topology/tree
  std::vector<std::string> gres_lines;    // gres.conf lines (set by the caller)
  std::vector<std::string> switch_nodes;  // topology.conf's Nodes= (set by the caller)
};

// Adds the declarations of one file of slurm.conf's (`text`) to `conf`.
void scan_slurm_conf(std::string_view text, AdminConf& conf);
// The NodeName= values of gres.conf's lines, an empty string for a line
// that names no node (it applies to every node); AutoDetect lines count
// as such a line.
std::vector<std::string> gres_conf_nodes(std::string_view text);
// The Nodes= values of topology.conf.
std::vector<std::string> topology_nodes(std::string_view text);

// Why the slurmds or a backup slurmctld may not read the include file
// (`include`) as slurmctld does, or empty: a file outside slurm.conf's
// folder reaches other hosts only where that path is shared, and configless
// mode sends the slurmds only the files in slurm.conf's folder. Paths as
// the caller resolved them.
std::string sharing_risk(const AdminConf& admin, const std::filesystem::path& slurm_conf,
                         const std::filesystem::path& include);

// A group as the include declares it: NodeName lines for slots
// 1..spec.max_count, and slots 1..members in its NodeSet (and so in its
// partitions). A slot joins the NodeSet only once the controller has
// drained it: a new slot is declared first (a slurmctld restart), drained,
// and then put in the partitions (a reconfigure), so that no job is
// allocated a slot before it has an instance.
struct IncludeGroup {
  GroupSpec spec;
  unsigned members = 0;
};

// The hosts of a hostlist expression (libslurm's parser in the controller).
using Expand = std::function<std::vector<std::string>(const std::string&)>;
// Compresses names into a hostlist expression.
using Compress = std::function<std::string(const std::vector<std::string>&)>;

// Why the include cannot be written for `groups` beside `admin`, naming the
// clash (a node, NodeSet or partition the admin already declares, a GRES
// type GresTypes lacks, gres.conf or topology.conf lacking the group's
// nodes); empty if it can.
std::string check(const std::vector<IncludeGroup>& groups, const AdminConf& admin,
                  const Expand& expand);

// The include file's text for `groups` (service groups get no line):
// partitions the admin defines are left to the admin (their Nodes= should
// name the group's NodeSet). `port_base` per group comes from its spec.
std::string render(const std::vector<IncludeGroup>& groups, const AdminConf& admin,
                   const Compress& compress);

// How a change of the include is applied, the least disruptive way:
// nothing, `scontrol reconfigure` (NodeSet and partition lines), or a
// slurmctld restart (NodeName lines: a reconfigure that adds a node is
// fatal to slurmctld 22.05).
enum class Change { none, reconfigure, restart };
std::string_view to_string(Change change);
Change classify(std::string_view before, std::string_view after);

// The lines that go ("-LINE") and come ("+LINE"), comments left out.
std::vector<std::string> diff(std::string_view before, std::string_view after);

// The first line of every file the controller writes (how it knows its own).
inline constexpr std::string_view kHeader =
    "# Written by auto-resumed (slurm-auto-resume) from its groups_dir: do not edit.";

}  // namespace ar::include
