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
  // The partitions as keep_spares last read them (none before its first
  // read: no partition is short then).
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

void NodeKeeper::take_spare_drains(std::set<std::string>& drained) {
  for (const auto& key : writes_.keys()) {
    if (!key.starts_with("spare ")) continue;
    const auto node = key.substr(6);
    auto outcome = writes_.take(key);
    if (!outcome) {
      drained.insert(node);  // under way
      continue;
    }
    try {
      const auto detail = outcome->get();
      drained.insert(node);  // the node map may not show it yet
      log::audit({0, "spares", ""}, name_of(EventKind::spare_added), detail);
      store_.add_node_event(node, {EventKind::spare_added, detail});
    } catch (const std::exception& e) {
      log::warn("{}: cannot drain it as a spare: {}", node, e.what());
    }
  }
}

void NodeKeeper::keep_spares(const NodeMap& nodes, const std::set<std::string>& protected_nodes) {
  // Partitions change rarely; read again now and then, on a thread of
  // their own.
  constexpr const char* kRead = "partitions";
  if ((partitions_.empty() || clock_.now() - partitions_read_ > std::chrono::seconds{60}) &&
      !partition_reads_.has(kRead))
    partition_reads_.run(kRead, [this] { return slurm_.partitions(); });
  if (auto read = partition_reads_.take(kRead)) {
    partitions_read_ = clock_.now();  // a failed read is tried again in 60 s
    partitions_ = read->get();
  }
  // Drains under way or done since the last look: the node map does not
  // show them yet.
  std::set<std::string> drained;
  take_spare_drains(drained);
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
        if (short_said_.say(partition))
          store_.add_node_event("",
                                {EventKind::spares_short,
                                 fmt::format("partition {} has {} of {} spares and no idle node "
                                             "to add",
                                             partition, have, config_.spares)});
        break;
      }
      short_said_.forget(partition);
      if (gate_.held()) {
        gate_.would("spare", pick->name,
                    fmt::format("drain {} as a spare of partition {}", pick->name, partition));
        break;
      }
      drained.insert(pick->name);
      ++have;
      // On a thread of its own: its event once it is in.
      writes_.run("spare " + pick->name,
                  [this, name = pick->name,
                   detail = fmt::format("{} drained as a spare of partition {} ({} of {})",
                                        pick->name, partition, have, config_.spares)] {
                    slurm_.set_node_drain(name, kSpareReason);
                    return detail;
                  });
    }
  }
  take_spare_drains(drained);  // at once where calls run on the caller's thread (tests)
}

}  // namespace ar
