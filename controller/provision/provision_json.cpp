#include <stdexcept>

#include "provision/provision.hpp"

namespace ar::provision {

namespace {

using nlohmann::json;

json spec_json(const GroupSpec& spec) {
  return {{"name", spec.name},
          {"type", std::string(to_string(spec.type))},
          {"count", spec.count},
          {"min_count", spec.min_count},
          {"max_count", spec.max_count},
          {"max_count_set", spec.max_count_set},
          {"partitions", spec.partitions},
          {"node_conf", spec.node_conf},
          {"lifecycle_script", spec.lifecycle_script},
          {"node_prefix", spec.node_prefix},
          {"slot_port_base", spec.slot_port_base}};
}

GroupSpec spec_from(const json& j) {
  GroupSpec spec;
  spec.name = j.at("name").get<std::string>();
  spec.type =
      j.at("type").get<std::string>() == "service" ? GroupType::service : GroupType::compute;
  spec.count = j.at("count").get<unsigned>();
  spec.min_count = j.at("min_count").get<unsigned>();
  spec.max_count = j.at("max_count").get<unsigned>();
  spec.max_count_set = j.value("max_count_set", false);
  spec.partitions = j.at("partitions").get<std::vector<std::string>>();
  spec.node_conf = j.at("node_conf").get<std::string>();
  spec.lifecycle_script = j.at("lifecycle_script").get<std::string>();
  spec.node_prefix = j.at("node_prefix").get<std::string>();
  spec.slot_port_base = j.value("slot_port_base", 0U);
  if (spec.max_count > GroupSpec::kMaxCount)
    throw std::invalid_argument("group '" + spec.name + "' has max_count " +
                                std::to_string(spec.max_count));
  return spec;
}

// Only slots that are not plain empty ones are kept.
bool worth_keeping(const Slot& slot) {
  return slot.phase != SlotPhase::empty || slot.leave != Leave::none || slot.attempt > 0 ||
         slot.roll;
}

json slot_json(const Slot& s) {
  return {{"index", s.index},
          {"phase", static_cast<int>(s.phase)},
          {"leave", static_cast<int>(s.leave)},
          {"attempt", s.attempt},
          {"operation", s.operation},
          {"since", s.since.count()},
          {"failures", s.failures},
          {"retry_at", s.retry_at.count()},
          {"roll", s.roll},
          {"instance_id", s.instance_id}};
}

template <typename Enum>
Enum enum_from(const json& j, const char* key, int last) {
  const auto value = j.at(key).get<int>();
  if (value < 0 || value > last)
    throw std::invalid_argument(std::string("bad ") + key + " " + std::to_string(value));
  return static_cast<Enum>(value);
}

void slot_from(const json& j, Group& group) {
  const auto index = j.at("index").get<unsigned>();
  if (index < 1 || index > group.slots.size())
    throw std::invalid_argument("group '" + group.spec.name + "' has no slot " +
                                std::to_string(index));
  auto& s = group.slots[index - 1];
  s.phase = enum_from<SlotPhase>(j, "phase", static_cast<int>(SlotPhase::terminating));
  s.leave = enum_from<Leave>(j, "leave", static_cast<int>(Leave::register_timeout));
  s.attempt = j.at("attempt").get<unsigned>();
  s.operation = j.at("operation").get<std::uint64_t>();
  s.since = Millis{j.at("since").get<std::int64_t>()};
  s.failures = j.at("failures").get<unsigned>();
  s.retry_at = Millis{j.at("retry_at").get<std::int64_t>()};
  s.roll = j.at("roll").get<bool>();
  s.instance_id = j.at("instance_id").get<std::string>();
}

json operation_json(const Operation& op) {
  return {{"id", op.id},
          {"count", op.count},
          {"min_count", op.min_count},
          {"previous_count", op.previous_count},
          {"started", op.started.count()},
          {"min_reached", op.min_reached},
          {"rollback", op.rollback}};
}

Operation operation_from(const json& j) {
  return {j.at("id").get<std::uint64_t>(),
          j.at("count").get<unsigned>(),
          j.at("min_count").get<unsigned>(),
          j.at("previous_count").get<unsigned>(),
          Millis{j.at("started").get<std::int64_t>()},
          j.at("min_reached").get<bool>(),
          j.at("rollback").get<bool>()};
}

}  // namespace

nlohmann::json to_json(const Cluster& cluster) {
  json groups = json::array();
  for (const auto& g : cluster.groups) {
    json slots = json::array();
    for (const auto& s : g.slots)
      if (worth_keeping(s)) slots.push_back(slot_json(s));
    groups.push_back({{"spec", spec_json(g.spec)},
                      {"operation", operation_json(g.operation)},
                      {"stable_count", g.stable_count},
                      {"ever_in_service", g.ever_in_service},
                      {"status", static_cast<int>(g.status)},
                      {"capacity_until", g.capacity_until.count()},
                      {"capacity_episode", g.capacity_episode},
                      {"capacity_since", g.capacity_since.count()},
                      {"bootstrap_failures", g.bootstrap_failures},
                      {"stopped", g.stopped},
                      {"config_failed", g.config_failed},
                      {"roll_batch", g.roll_batch},
                      {"slots", slots}});
  }
  return {{"groups", groups},
          {"next_group", cluster.next_group},
          {"next_operation", cluster.next_operation}};
}

Cluster cluster_from_json(const nlohmann::json& state) {
  try {
    Cluster cluster;
    cluster.next_group = state.at("next_group").get<unsigned>();
    cluster.next_operation = state.at("next_operation").get<std::uint64_t>();
    for (const auto& j : state.at("groups")) {
      auto group = new_group(spec_from(j.at("spec")));
      group.operation = operation_from(j.at("operation"));
      group.stable_count = j.at("stable_count").get<unsigned>();
      group.ever_in_service = j.at("ever_in_service").get<bool>();
      group.status = enum_from<GroupStatus>(j, "status", static_cast<int>(GroupStatus::deleting));
      group.capacity_until = Millis{j.at("capacity_until").get<std::int64_t>()};
      group.capacity_episode = j.at("capacity_episode").get<bool>();
      group.capacity_since = Millis{j.at("capacity_since").get<std::int64_t>()};
      group.bootstrap_failures = j.at("bootstrap_failures").get<unsigned>();
      group.stopped = j.at("stopped").get<bool>();
      group.config_failed = j.at("config_failed").get<bool>();
      group.roll_batch = j.at("roll_batch").get<unsigned>();
      for (const auto& s : j.at("slots")) slot_from(s, group);
      cluster.groups.push_back(std::move(group));
    }
    return cluster;
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(std::string("the provisioning state cannot be read: ") + e.what());
  }
}

}  // namespace ar::provision
