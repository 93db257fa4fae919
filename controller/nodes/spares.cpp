// The node keeper's spares (provider=spares): each partition keeps `spares`
// idle nodes drained with reason "spare", which the resume engine takes at
// once for a failed node.

#include <fmt/core.h>

#include <algorithm>

#include "nodes/node_keeper.hpp"

namespace ar {

bool NodeKeeper::is_spare(const slurm::NodeInfo& node) {
  return node.drain && node.reason == kSpareReason && !node.fail && !node.down &&
         !node.not_responding && !node.allocated && !node.completing;
}

std::vector<std::string> NodeKeeper::short_of_spares(const std::string& node,
                                                     const NodeMap& nodes) {
  if (partitions_.empty()) partitions_ = slurm_.partitions();
  std::vector<std::string> out;
  for (const auto& [partition, members] : partitions_) {
    if (std::ranges::find(members, node) == members.end()) continue;
    const auto have = std::ranges::count_if(members, [&](const std::string& m) {
      const auto it = nodes.find(m);
      return it != nodes.end() && is_spare(*it->second);
    });
    if (static_cast<unsigned>(have) < config_.spares) out.push_back(partition);
  }
  return out;
}

void NodeKeeper::keep_spares(const NodeMap& nodes, const std::set<std::string>& protected_nodes) {
  // Partitions change rarely; read them again now and then.
  if (partitions_.empty() || clock_.now() - partitions_read_ > std::chrono::seconds{60}) {
    partitions_ = slurm_.partitions();
    partitions_read_ = clock_.now();
  }
  std::set<std::string> drained;  // this tick's: the node map does not show them yet
  for (const auto& [partition, members] : partitions_) {
    auto have = static_cast<unsigned>(std::ranges::count_if(members, [&](const std::string& m) {
      const auto it = nodes.find(m);
      return drained.contains(m) || (it != nodes.end() && is_spare(*it->second));
    }));
    while (have < config_.spares) {
      const slurm::NodeInfo* pick = nullptr;
      for (const auto& m : members) {
        const auto it = nodes.find(m);
        if (it == nodes.end() || drained.contains(m) || protected_nodes.contains(m) || elsewhere(m))
          continue;
        const auto& n = *it->second;
        if (!n.idle || n.drain || n.fail || n.down || n.not_responding || n.completing) continue;
        if (store_.node_repair(m)) continue;
        pick = &n;
        break;
      }
      if (pick == nullptr) {
        if (short_said_.insert(partition).second)
          store_.add_node_event("",
                                {EventKind::spares_short,
                                 fmt::format("partition {} has {} of {} spares and no idle node "
                                             "to add",
                                             partition, have, config_.spares)});
        break;
      }
      short_said_.erase(partition);
      if (gate_.held()) {
        gate_.would("spare", pick->name,
                    fmt::format("drain {} as a spare of partition {}", pick->name, partition));
        break;
      }
      slurm_.set_node_drain(pick->name, kSpareReason);
      drained.insert(pick->name);
      ++have;
      const auto detail = fmt::format("{} drained as a spare of partition {} ({} of {})",
                                      pick->name, partition, have, config_.spares);
      log::audit({0, "spares", ""}, name_of(EventKind::spare_added), detail);
      store_.add_node_event(pick->name, {EventKind::spare_added, detail});
    }
  }
}

}  // namespace ar
