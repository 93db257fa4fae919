// The nodes' ops: heartbeat (with its progress, peer probes and quick
// checks), replace and nodes.
#include <algorithm>
#include <cctype>
#include <string>

#include "autoresume/protocol.hpp"
#include "protocol_detail.hpp"

namespace ar::proto {

using namespace detail;  // NOLINT: the protocol's own helpers

// heartbeat

json HeartbeatRequest::to_json() const {
  json body{{"node", node}};
  if (stopping) body["stopping"] = true;
  if (interval_ms != 0) body["interval_ms"] = interval_ms;
  if (!peers.empty()) {
    body["peers"] = json::object();
    for (const auto& [name, result] : peers) body["peers"][name] = std::string(to_string(result));
  }
  if (!progress.empty()) {
    body["progress"] = json::array();
    for (const auto& step : progress) {
      json ranks = json::array();
      for (const auto& r : step.ranks) {
        json item{{"rank", r.rank}, {"age_ms", r.age_ms}};
        if (r.beat.step) item["step"] = *r.beat.step;
        if (!r.beat.section.empty()) {
          item["section"] = r.beat.section;
          item["section_s"] = r.beat.section_s;
        }
        ranks.push_back(std::move(item));
      }
      body["progress"].push_back(
          {{"job_id", step.job_id}, {"step_id", step.step_id}, {"ranks", std::move(ranks)}});
    }
  }
  if (checked)
    body["checked"] = {
        {"id", checked->id}, {"passed", checked->passed}, {"detail", checked->detail}};
  return body;
}

namespace {

// One rank of a heartbeat's "progress".
RankProgress rank_progress(const json& item) {
  if (!item.is_object()) bad("'progress': a rank must be an object");
  RankProgress r{get_u32(item, "rank"), get_u32(item, "age_ms"), {}};
  if (item.contains("step")) {
    const auto& step = item["step"];
    if (!step.is_number_unsigned() || step.get<std::uint64_t>() > (std::uint64_t{1} << 63) - 1)
      bad("'progress': rank " + std::to_string(r.rank) + "'s 'step' must be 0 to 2^63-1");
    r.beat.step = step.get<std::uint64_t>();
  }
  if (item.contains("section")) {
    const auto name = get_string(item, "section", kMaxSectionName);
    const auto seconds = get_u32(item, "section_s");
    if (!parse_beat(name + ":" + std::to_string(seconds)))
      bad("'progress': rank " + std::to_string(r.rank) + "'s section '" + name + "' of " +
          std::to_string(seconds) + " s is not a section (1-" + std::to_string(kMaxSectionName) +
          " letters, digits, '_', '.', '-'; 1-" + std::to_string(kMaxSectionSeconds) + " s)");
    r.beat.section = name;
    r.beat.section_s = seconds;
  }
  return r;
}

}  // namespace

HeartbeatRequest HeartbeatRequest::from_json(const json& body) {
  HeartbeatRequest request{get_node_name(body, "node"), get_bool(body, "stopping", false), {}};
  request.interval_ms = get_u32(body, "interval_ms", 0);
  if (body.contains("interval_ms") &&
      (request.interval_ms < kMinHeartbeatInterval || request.interval_ms > kMaxHeartbeatInterval))
    bad("'interval_ms' is " + std::to_string(request.interval_ms) + ": expected " +
        std::to_string(kMinHeartbeatInterval) + " to " + std::to_string(kMaxHeartbeatInterval) +
        " (milliseconds between heartbeats)");
  if (body.contains("progress")) {
    const auto& list = body["progress"];
    if (!list.is_array()) bad("'progress' must be an array");
    if (list.size() > kMaxProgressSteps)
      bad("'progress' has " + std::to_string(list.size()) + " steps, more than " +
          std::to_string(kMaxProgressSteps));
    std::size_t ranks = 0;
    for (const auto& item : list) {
      if (!item.is_object()) bad("'progress' must be an array of objects");
      StepProgress step{get_u32(item, "job_id"), get_u32(item, "step_id"), {}};
      if (!item.contains("ranks") || !item["ranks"].is_array())
        bad("'progress': step " + std::to_string(step.job_id) + "." + std::to_string(step.step_id) +
            " has no 'ranks' array");
      ranks += item["ranks"].size();
      if (ranks > kMaxProgressRanks)
        bad("'progress' has more than " + std::to_string(kMaxProgressRanks) + " ranks");
      for (const auto& rank : item["ranks"]) step.ranks.push_back(rank_progress(rank));
      request.progress.push_back(std::move(step));
    }
  }
  if (body.contains("checked")) {
    const auto& item = body["checked"];
    if (!item.is_object()) bad("'checked' must be an object");
    if (!item.contains("id") || !item["id"].is_number_unsigned() ||
        item["id"].get<std::uint64_t>() == 0)
      bad("'checked': 'id' must be a positive integer");
    request.checked = CheckDone{item["id"].get<std::uint64_t>(), get_bool(item, "passed"),
                                get_string(item, "detail", kMaxCheckDetailBytes)};
  }
  if (!body.contains("peers")) return request;
  const auto& peers = body["peers"];
  if (!peers.is_object()) bad("'peers' must be an object of node names and probe results");
  if (peers.size() > kMaxPeerProbes)
    bad("'peers' has more than " + std::to_string(kMaxPeerProbes) + " nodes");
  for (const auto& [name, value] : peers.items()) {
    const auto node = get_node_name(json{{"peers", name}}, "peers");
    const auto text = get_string(peers, name.c_str(), 16);
    const auto result = parse_probe_result(text);
    if (!result)
      bad("'peers': the result for " + node + " is '" + text +
          "' (known: answered, silent, unknown)");
    request.peers[node] = *result;
  }
  return request;
}

json HeartbeatReply::to_json() const {
  json result = json::object();
  if (check) result["check"] = {{"id", check->id}, {"timeout_ms", check->timeout_ms}};
  if (probe.empty()) return result;
  result["probe"] = json::array();
  for (const auto& p : probe) {
    json item{{"node", p.node}, {"address", p.address}, {"port", p.port}};
    if (p.deep) item["deep"] = true;
    result["probe"].push_back(std::move(item));
  }
  return result;
}

HeartbeatReply HeartbeatReply::from_json(const json& result) {
  result_object(result);
  HeartbeatReply reply;
  if (result.contains("check")) {
    const auto& item = result["check"];
    if (!item.is_object() || !item.contains("id") || !item["id"].is_number_unsigned() ||
        item["id"].get<std::uint64_t>() == 0)
      bad("'check' must be an object with a positive 'id'");
    const auto timeout = get_u32(item, "timeout_ms");
    if (timeout == 0 || timeout > 600'000)
      bad("'check': 'timeout_ms' is " + std::to_string(timeout) + ": expected 1 to 600000");
    reply.check = CheckAsk{item["id"].get<std::uint64_t>(), timeout};
  }
  if (!result.contains("probe")) return reply;
  const auto& list = result["probe"];
  if (!list.is_array()) bad("'probe' must be an array");
  if (list.size() > kMaxPeerProbes)
    bad("'probe' has more than " + std::to_string(kMaxPeerProbes) + " nodes");
  for (const auto& item : list) {
    if (!item.is_object()) bad("'probe' must be an array of objects");
    PeerProbe p{get_node_name(item, "node"), get_string(item, "address", 255), 0,
                get_bool(item, "deep", false)};
    if (p.address.empty() || !std::ranges::all_of(p.address, [](unsigned char c) {
          return std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == ':';
        }))
      bad("'probe': '" + p.address + "' is not a host name or numeric address");
    const auto port = get_u32(item, "port");
    if (port == 0 || port > 65535)
      bad("'probe': port " + std::to_string(port) + " of " + p.node + " is not 1-65535");
    p.port = static_cast<std::uint16_t>(port);
    reply.probe.push_back(std::move(p));
  }
  return reply;
}

// replace

json ReplaceRequest::to_json() const {
  return {{"node", node}, {"mode", std::string(name_of(mode))}};
}

ReplaceRequest ReplaceRequest::from_json(const json& body) {
  ReplaceRequest request;
  request.node = get_node_name(body, "node");
  if (body.contains("mode")) {
    const auto mode = get_string(body, "mode", 16);
    const auto parsed = parse_name<ReplaceMode>(mode);
    if (!parsed) bad("unknown mode '" + mode + "' (known: wait, now, force)");
    request.mode = *parsed;
  }
  return request;
}

json ReplaceReply::to_json() const { return {{"node", node}, {"message", message}}; }

ReplaceReply ReplaceReply::from_json(const json& result) {
  const auto& body = result_object(result);
  return {get_node_name(body, "node"), get_string(body, "message", kMaxTextBytes)};
}

// nodes

json NodesRequest::to_json() const {
  json out = json::object();
  if (!nodes.empty()) out["nodes"] = nodes;
  return out;
}

NodesRequest NodesRequest::from_json(const json& body) {
  NodesRequest request;
  if (!body.contains("nodes")) return request;
  for (auto& node : get_string_list(body, "nodes", kMaxNodesListed))
    request.nodes.push_back(node_name(std::move(node), "node"));
  return request;
}

json NodesReply::Replacement::to_json() const {
  return {{"node", node},          {"state", name_of(state)}, {"reason", reason},
          {"mode", name_of(mode)}, {"attempts", attempts},    {"started_at", started_at},
          {"detail", detail}};
}

NodesReply::Replacement NodesReply::Replacement::from_json(const json& item) {
  return {get_string(item, "node", kMaxTextBytes),
          get_named<NodeRepairState>(item, "state", "replacement state"),
          get_string(item, "reason", kMaxTextBytes),
          get_named<RepairMode>(item, "mode", "replace mode"),
          get_i64(item, "attempts"),
          get_i64(item, "started_at"),
          get_string(item, "detail", kMaxTextBytes)};
}

json NodesReply::to_json() const {
  json out{{"replacements", to_json_array(replacements)}, {"heartbeats", heartbeats}};
  if (heartbeats_left_out > 0) out["heartbeats_left_out"] = heartbeats_left_out;
  return out;
}

NodesReply NodesReply::from_json(const json& result) {
  const auto& body = result_object(result);
  NodesReply reply;
  reply.replacements = get_items<Replacement>(body, "replacements");
  const auto& heard = required(body, "heartbeats");
  if (!heard.is_object()) bad("field 'heartbeats' must be an object, got " + shown(heard));
  if (heard.size() > kMaxNodesListed)
    bad("field 'heartbeats' has more than " + std::to_string(kMaxNodesListed) + " nodes");
  for (const auto& [node, age] : heard.items()) {
    if (!age.is_number())
      bad("field 'heartbeats': '" + node + "' must be a number of seconds, got " + shown(age));
    reply.heartbeats[node] = age.get<double>();
  }
  reply.heartbeats_left_out = get_u32(body, "heartbeats_left_out", 0);
  return reply;
}

}  // namespace ar::proto
