// What the provisioner keeps for the store: its events (add,
// add_cluster_event, say_once), each instance's metering (meter,
// meter_slot), and their save with the state.

#include "log.hpp"
#include "provision/provisioner.hpp"

namespace ar {

void Provisioner::add(const std::vector<provision::Event>& events) {
  for (const auto& e : events) {
    const std::string level(provision::to_string(e.level));
    log::info("group {}{}{}: {}: {}", e.group, e.node.empty() ? "" : " node ", e.node,
              provision::to_string(e.kind), e.text);
    events_.push_back({std::string(provision::to_string(e.kind)), level,
                       e.node.empty() ? "group" : "instance", e.group, e.node, e.text});
  }
}

void Provisioner::meter(const provision::Group& group, const provision::Slot& slot,
                        const std::function<void(InstanceRecord&)>& change) {
  const auto token = provision::token(group, slot);
  auto [it, added] = open_.try_emplace(token);
  auto& record = it->second;
  if (added) {
    record.token = token;
    record.group = group.spec.name;
    record.node = group.spec.node(slot.index);
    record.operation = slot.operation;
    record.requested = clock_.unix_now();
  }
  change(record);
  changed_records_.push_back(record);
  if (record.terminated != 0) open_.erase(it);
}

void Provisioner::save() {
  if (!dirty_ && events_.empty() && changed_records_.empty()) return;
  store_.save_provision(provision::to_json(cluster_), events_, changed_records_);
  events_.clear();
  changed_records_.clear();
  dirty_ = false;
}

void Provisioner::say_once(const std::string& key, const std::string& group,
                           const std::string& text) {
  if (said_.say(key, text)) {
    log::warn("group {}: {}", group, text);
    events_.push_back({"group_config", "error", "group", group, "", text});
  }
}

void Provisioner::meter_slot(const std::string& name, unsigned index,
                             const std::function<void(InstanceRecord&)>& change) {
  auto* group = provision::find_group(cluster_, name);
  if (group == nullptr || index == 0 || index > group->slots.size()) return;
  meter(*group, group->slots[index - 1], change);
}

void Provisioner::add_cluster_event(const std::string& kind, const std::string& level,
                                    const std::string& group, const std::string& node,
                                    const std::string& text) {
  log::warn("{}{}{}: {}: {}", group.empty() ? "" : "group " + group, node.empty() ? "" : " node ",
            node, kind, text);
  events_.push_back({kind, level, node.empty() ? "cluster" : "instance", group, node, text});
}

}  // namespace ar
