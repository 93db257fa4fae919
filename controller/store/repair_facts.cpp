#include "store/repair_facts.hpp"

#include <stdexcept>

namespace ar {

namespace {

using proto::json;

void put_stamp(json& object, const std::string& name, const Stamp& stamp) {
  object[name + "_at"] = stamp.wall;
  object[name + "_boot_ms"] = stamp.boot_ms;
  object[name + "_boot_id"] = stamp.boot_id;
}

// NAME_at with NAME_boot_ms and NAME_boot_id; one stored before the boot
// fields has its wall time only.
std::optional<Stamp> get_stamp(const json& object, const std::string& name) {
  const auto at = object.find(name + "_at");
  if (at == object.end() || !at->is_number_integer()) return std::nullopt;
  Stamp out{at->get<std::int64_t>(), 0, {}};
  const auto ms = object.find(name + "_boot_ms");
  const auto id = object.find(name + "_boot_id");
  if (ms != object.end() && ms->is_number_integer() && id != object.end() && id->is_string()) {
    out.boot_ms = ms->get<std::int64_t>();
    out.boot_id = id->get<std::string>();
  }
  return out;
}

constexpr std::string_view kHelperSince = "helper_since_";

template <typename T>
T field(const json& object, const char* name, T fallback) {
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw std::invalid_argument(std::string("a repair's '") + name + "' is " + it->dump());
  }
}

}  // namespace

std::vector<std::string> failed_nodes(const std::vector<FailedNode>& failed) {
  std::vector<std::string> out;
  out.reserve(failed.size());
  for (const auto& f : failed) out.push_back(f.node);
  return out;
}

std::vector<std::string> RepairFacts::failed_nodes() const { return ar::failed_nodes(failed); }

json to_json(const RepairFacts& facts) {
  json out = json::object();
  if (!facts.failed.empty()) {
    out["failed"] = json::array();
    for (const auto& f : facts.failed)
      out["failed"].push_back({{"node", f.node}, {"why", f.why}, {"instance", f.instance}});
  }
  if (!facts.replacements.empty()) out["replacements"] = facts.replacements;
  if (!facts.helpers.empty()) out["helpers"] = facts.helpers;
  if (!facts.merged.empty()) out["merged"] = facts.merged;
  if (!facts.passed_over.empty()) out["passed_over"] = facts.passed_over;
  if (facts.step_nodes) out["step_nodes"] = *facts.step_nodes;
  if (facts.streak) out["streak"] = *facts.streak;
  if (facts.relaunch) {
    out["relaunch"] = {{"nodelist", facts.relaunch->nodelist},
                       {"num_nodes", facts.relaunch->num_nodes}};
    if (facts.relaunch->step_nodes > 0) out["relaunch"]["step_nodes"] = facts.relaunch->step_nodes;
  }
  if (!facts.hang.empty()) out["hang"] = facts.hang;
  if (facts.beat) out["beat"] = true;
  if (facts.highest_step) out["highest_step"] = *facts.highest_step;
  if (facts.signalled) put_stamp(out, "signalled", *facts.signalled);
  if (facts.started) put_stamp(out, "started", *facts.started);
  if (facts.expanded) put_stamp(out, "expanded", *facts.expanded);
  if (facts.out) put_stamp(out, "out", *facts.out);
  if (facts.old_step_cancelled) put_stamp(out, "old_step_cancelled", *facts.old_step_cancelled);
  for (const auto& [node, since] : facts.helper_since)
    put_stamp(out, std::string(kHelperSince) + node, since);
  return out;
}

RepairFacts repair_facts_from_json(const json& object) {
  if (!object.is_object())
    throw std::invalid_argument("a repair's facts are no JSON object: " + object.dump());
  RepairFacts out;
  for (const auto& f : field(object, "failed", json::array())) {
    if (!f.is_object()) throw std::invalid_argument("a repair's failed node is " + f.dump());
    out.failed.push_back({field(f, "node", std::string()), field(f, "why", std::string()),
                          field<std::int64_t>(f, "instance", 0)});
  }
  out.replacements = field(object, "replacements", std::vector<std::string>{});
  out.helpers = field(object, "helpers", std::map<std::string, std::uint32_t>{});
  out.merged = field(object, "merged", std::vector<std::string>{});
  out.passed_over = field(object, "passed_over", std::vector<std::string>{});
  if (object.contains("step_nodes")) out.step_nodes = field<std::uint32_t>(object, "step_nodes", 0);
  if (object.contains("streak")) out.streak = field<std::uint32_t>(object, "streak", 0);
  if (const auto plan = field(object, "relaunch", json()); plan.is_object())
    out.relaunch = RelaunchPlan{field(plan, "nodelist", std::string()),
                                field<std::uint32_t>(plan, "num_nodes", 0),
                                field<std::uint32_t>(plan, "step_nodes", 0)};
  out.hang = field(object, "hang", std::string());
  out.beat = field(object, "beat", false);
  if (object.contains("highest_step"))
    out.highest_step = field<std::uint64_t>(object, "highest_step", 0);
  out.signalled = get_stamp(object, "signalled");
  out.started = get_stamp(object, "started");
  out.expanded = get_stamp(object, "expanded");
  out.out = get_stamp(object, "out");
  out.old_step_cancelled = get_stamp(object, "old_step_cancelled");
  for (const auto& [key, value] : object.items()) {
    if (!key.starts_with(kHelperSince) || !key.ends_with("_at")) continue;
    const auto name = key.substr(0, key.size() - 3);
    if (const auto since = get_stamp(object, name))
      out.helper_since.emplace(name.substr(kHelperSince.size()), *since);
  }
  return out;
}

}  // namespace ar
