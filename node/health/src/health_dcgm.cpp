#include "autoresume/health_dcgm.hpp"

#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "health_text.hpp"

namespace ar::health {

namespace {

using nlohmann::json;

constexpr std::string_view kViolated = " has violated policy manager values.";

// `line` after `prefix`, or nothing if it does not start with it.
std::optional<std::string_view> after(std::string_view line, std::string_view prefix) {
  if (!line.starts_with(prefix)) return std::nullopt;
  return text::strip(line.substr(prefix.size()));
}

}  // namespace

std::string_view xid_meaning(unsigned xid) {
  switch (xid) {
    case 13:
      return "Graphics Engine Exception";
    case 31:
      return "GPU memory page fault";
    case 43:
      return "GPU stopped processing";
    case 45:
      return "preemptive cleanup, due to previous errors";
    case 48:
      return "double-bit ECC error";
    case 61:
      return "internal micro-controller breakpoint/warning";
    case 62:
      return "internal micro-controller halt";
    case 63:
      return "ECC page retirement or row remapping recording event";
    case 64:
      return "ECC page retirement or row remapper recording failure";
    case 74:
      return "NVLink error";
    case 79:
      return "GPU has fallen off the bus";
    case 92:
      return "high single-bit ECC error rate";
    case 94:
      return "contained ECC error";
    case 95:
      return "uncontained ECC error";
    case 119:
      return "GSP RPC timeout";
    case 120:
      return "GSP error";
    default:
      return "";
  }
}

bool xid_from_application(unsigned xid) { return xid == 13 || xid == 31 || xid == 43 || xid == 45; }

Result DcgmPolicyListener::violation(std::string what, std::string values) const {
  if (!gpu_.empty()) what += " on GPU " + gpu_;
  if (!values.empty()) what += ": " + values;
  return {"dcgm", Status::fail, std::move(what)};
}

std::optional<Result> DcgmPolicyListener::feed(std::string_view raw) {
  const auto line = text::strip(raw);
  const auto block = block_;
  if (line.empty()) return std::nullopt;
  if (line.starts_with("Listening for violations")) {
    listening_ = true;
    return std::nullopt;
  }
  if (line.starts_with("Error:")) {
    block_ = Block::none;
    return Result{"dcgm", Status::fail, "dcgmi policy: " + std::string(line)};
  }
  if (line.starts_with("Timestamp:")) {
    block_ = Block::none;
    first_.clear();
    return std::nullopt;
  }
  if (auto xid = after(line, "XID error ")) {
    block_ = Block::none;
    const auto number = text::count(xid->substr(0, xid->find(' ')));
    if (!number || *number > 0xffffffffULL) return std::nullopt;
    return xid_result(*xid);
  }
  // The headline of a violation whose values follow.
  if (line == "A double-bit ECC error" + std::string(kViolated)) {
    block_ = Block::dbe;
  } else if (line == "A PCIe replay event" + std::string(kViolated)) {
    block_ = Block::pcie;
  } else if (line == "The maximum number of retired pages" + std::string(kViolated)) {
    block_ = Block::pages;
  } else if (line == "The maximum thermal limit" + std::string(kViolated)) {
    block_ = Block::thermal;
  } else if (line == "The maximum power limit" + std::string(kViolated)) {
    block_ = Block::power;
  } else if (auto counter = after(line, "NVLink Counter ");
             counter && line.ends_with(kViolated) && !line.starts_with("NVLink Counter value")) {
    block_ = Block::nvlink;
    first_ = std::string(counter->substr(0, counter->find(' ')));
  } else if (line == "An unknown error" + std::string(kViolated)) {
    block_ = Block::none;
    return violation("an unknown policy violation", "");
  }
  if (block_ != block) return std::nullopt;
  return block_value(block, line);
}

Result DcgmPolicyListener::xid_result(std::string_view rest) const {
  const auto id = static_cast<unsigned>(*text::count(rest.substr(0, rest.find(' '))));
  auto result = violation("XID " + std::to_string(id), std::string(xid_meaning(id)));
  if (xid_from_application(id)) {
    result.status = Status::pass;
    result.detail += " (an application's error, not the node's)";
  }
  return result;
}

std::optional<Result> DcgmPolicyListener::block_value(Block block, std::string_view line) {
  std::optional<std::string_view> value;
  switch (block) {
    case Block::dbe:
      if ((value = after(line, "DBE error count:"))) {
        block_ = Block::none;
        return violation("double-bit ECC errors", "count " + std::string(*value));
      }
      break;
    case Block::pcie:
      if ((value = after(line, "PCIe replay count:"))) {
        block_ = Block::none;
        return violation("PCIe replays", "count " + std::string(*value));
      }
      break;
    case Block::pages:
      if ((value = after(line, "SBE page retirement count:"))) {
        first_ = std::string(*value);
      } else if ((value = after(line, "DBE page retirement count:"))) {
        block_ = Block::none;
        return violation(
            "retired pages over the limit",
            (first_.empty() ? std::string() : first_ + " SBE, ") + std::string(*value) + " DBE");
      }
      break;
    case Block::thermal:
      if ((value = after(line, "Temperature:"))) {
        block_ = Block::none;
        return violation("temperature over the limit", std::string(*value) + " C");
      }
      break;
    case Block::power:
      if ((value = after(line, "Power:"))) {
        block_ = Block::none;
        return violation("power over the limit", std::string(*value) + " W");
      }
      break;
    case Block::nvlink:
      if ((value = after(line, "NVLink Counter value:"))) {
        block_ = Block::none;
        return violation("NVLink error counter " + first_ + " over the limit",
                         "value " + std::string(*value));
      }
      break;
    case Block::none:
      break;
  }
  return std::nullopt;
}

namespace {

const json* member(const json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::string string_of(const json& object, const char* key) {
  const auto* value = member(object, key);
  if (value == nullptr) return "";
  if (value->is_string()) return value->get<std::string>();
  if (value->is_number_integer()) return std::to_string(value->get<long long>());
  return "";
}

const json& array_of(const json& object, const char* key) {
  static const json empty = json::array();
  const auto* value = member(object, key);
  return value != nullptr && value->is_array() ? *value : empty;
}

const json& object_of(const json& object, const char* key) {
  static const json empty = json::object();
  const auto* value = member(object, key);
  return value != nullptr && value->is_object() ? *value : empty;
}

// dcgmi's output as JSON, or why there is none: its "Error: ..." line, or
// its exit.
std::variant<json, std::string> dcgmi_json(const ToolRun& run, std::string_view what) {
  if (!run.error.empty()) return run.error;
  auto doc = json::parse(run.output, nullptr, false);
  if (!doc.is_discarded() && doc.is_object()) return doc;
  for (const auto line : text::lines(run.output))
    if (line.starts_with("Error:")) return std::string(what) + ": " + std::string(line);
  if (run.status != 0) return text::tool_failure(run, what);
  return std::string(what) + " printed no JSON: " + text::last_line(run.output).substr(0, 100);
}

}  // namespace

Result check_dcgm_health(const ToolRun& run, unsigned expected_gpus) {
  if (auto skip = not_applicable("dcgm", expected_gpus)) return *skip;
  Result result{"dcgm", Status::fail, ""};
  auto parsed = dcgmi_json(run, "dcgmi health -c -j");
  if (auto* why = std::get_if<std::string>(&parsed)) {
    result.detail = *why;
    return result;
  }
  const auto& doc = std::get<json>(parsed);
  const auto& body = object_of(doc, "body");
  const auto overall = string_of(object_of(body, "Overall Health"), "value");
  if (overall.empty()) {
    result.detail = "dcgmi health -c -j printed no Overall Health";
    return result;
  }
  std::vector<std::string> problems;
  for (const auto& [group, entities] : body.items()) {
    if (group == "Overall Health") continue;
    for (const auto& [id, entity] : object_of(entities, "children").items()) {
      const auto& systems =
          object_of(object_of(object_of(entity, "children"), "Errors"), "children");
      for (const auto& [system, state] : systems.items()) {
        const auto health = string_of(state, "value");
        if (health == "Healthy") continue;
        std::vector<std::string> messages;
        for (const auto& part : array_of(state, "overflow"))
          if (part.is_string()) messages.push_back(part.get<std::string>());
        auto problem = group + " " + id + " " + system + ": " + health;
        if (!messages.empty()) problem += ": " + ar::join(messages, " ");
        problems.push_back(std::move(problem));
      }
    }
  }
  if (problems.empty() && overall != "Healthy")
    problems.push_back("DCGM's overall health is " + overall);
  if (!problems.empty()) {
    result.detail = ar::join(problems, "; ");
    return result;
  }
  result.status = Status::pass;
  result.detail = "DCGM health watches: Healthy";
  return result;
}

namespace {

// "GPU 1" for a result of DCGM 4 (entity_group, entity_id) or 3 (gpu_id);
// "" for one that names no entity.
std::string entity_of(const json& result) {
  const auto id = string_of(result, "entity_id");
  if (!id.empty()) {
    const auto group = string_of(result, "entity_group");
    return (group.empty() ? "GPU" : group) + " " + id;
  }
  const auto gpu = string_of(result, "gpu_id");
  return gpu.empty() ? "" : "GPU " + gpu;
}

// A result's warnings, one text (DCGM 3's first tests put the text under
// "warnings" instead of "warning").
std::string warnings_of(const json& result) {
  std::vector<std::string> texts;
  for (const auto& warning : array_of(result, "warnings")) {
    auto message = string_of(warning, "warning");
    if (message.empty()) message = string_of(warning, "warnings");
    message = std::string(text::strip(message));
    if (!message.empty()) texts.push_back(message);
  }
  return ar::join(texts, " ");
}

// The GPUs the diagnostic lists, if it does: DCGM 4's entity_groups, DCGM
// 3's "GPU Device IDs".
std::optional<std::size_t> gpus_diagnosed(const json& doc) {
  if (const auto* groups = member(doc, "entity_groups"); groups != nullptr && groups->is_array()) {
    for (const auto& group : *groups)
      if (string_of(group, "entity_group") == "GPU") return array_of(group, "entities").size();
    return 0;
  }
  if (const auto* ids = member(doc, "GPU Device IDs"); ids != nullptr && ids->is_array())
    return ids->size();
  return std::nullopt;
}

}  // namespace

Result check_dcgm_diag(const ToolRun& run, unsigned expected_gpus) {
  if (auto skip = not_applicable("dcgm-diag", expected_gpus)) return *skip;
  Result result{"dcgm-diag", Status::fail, ""};
  auto parsed = dcgmi_json(run, "dcgmi diag");
  if (auto* why = std::get_if<std::string>(&parsed)) {
    result.detail = *why;
    return result;
  }
  const auto& doc = std::get<json>(parsed);
  const json* root = member(doc, "DCGM Diagnostic");
  if (root == nullptr) root = member(doc, "DCGM GPU Diagnostic");
  if (root == nullptr || !root->is_object()) {
    result.detail = "dcgmi diag printed no \"DCGM Diagnostic\" result";
    return result;
  }
  if (const auto error = string_of(*root, "runtime_error"); !error.empty()) {
    result.detail = "dcgmi diag: " + error;
    return result;
  }
  std::vector<std::string> problems;
  unsigned passed = 0;
  unsigned skipped = 0;
  unsigned tests = 0;
  for (const auto& category : array_of(*root, "test_categories")) {
    for (const auto& test : array_of(category, "tests")) {
      ++tests;
      const auto name = string_of(test, "name");
      bool failed = false;
      bool ran = false;
      for (const auto& entry : array_of(test, "results")) {
        const auto status = string_of(entry, "status");
        if (status == "Pass") ran = true;
        if (status != "Fail") continue;
        failed = true;
        const auto entity = entity_of(entry);
        const auto warnings = warnings_of(entry);
        problems.push_back(name + (entity.empty() ? "" : " on " + entity) + ": " +
                           (warnings.empty() ? "failed" : warnings));
      }
      const auto& summary = object_of(test, "test_summary");
      if (!failed && string_of(summary, "status") == "Fail") {
        failed = true;
        const auto warnings = warnings_of(summary);
        problems.push_back(name + ": " + (warnings.empty() ? "failed" : warnings));
      }
      if (failed) continue;
      if (ran || string_of(summary, "status") == "Pass")
        ++passed;
      else
        ++skipped;
    }
  }
  if (const auto gpus = gpus_diagnosed(doc); gpus && *gpus < expected_gpus)
    problems.insert(problems.begin(), std::to_string(*gpus) + " GPUs diagnosed, " +
                                          std::to_string(expected_gpus) + " configured");
  if (tests == 0) problems.push_back("dcgmi diag ran no tests");
  if (!problems.empty()) {
    result.detail = ar::join(problems, "; ");
    return result;
  }
  result.status = Status::pass;
  result.detail = std::to_string(passed) + " tests passed, " + std::to_string(skipped) + " skipped";
  const auto& metadata = object_of(doc, "metadata");
  auto version = string_of(metadata, "version");
  if (version.empty()) version = string_of(doc, "version");
  auto driver = string_of(metadata, "Driver Version Detected");
  if (driver.empty()) driver = string_of(doc, "Driver Version Detected");
  if (!version.empty() && !driver.empty())
    result.detail += " (DCGM " + version + ", driver " + driver + ")";
  return result;
}

}  // namespace ar::health
