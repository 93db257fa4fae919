#include "autoresume/protocol.hpp"

#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

namespace proto = ar::proto;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;
using proto::json;
using proto::ProtocolError;

namespace {

// The code of the ProtocolError `line` raises.
std::string error_code(const std::string& line) {
  try {
    proto::parse_request(line);
  } catch (const ProtocolError& e) {
    return e.code();
  }
  return "none";
}

json valid_step() {
  return {{"job_id", 12},
          {"step_id", 0},
          {"run_id", "12.0-abc"},
          {"attempt", 0},
          {"argv", {"srun", "--auto-resume=1", "train.sh"}},
          {"cwd", "/home/u"},
          {"nodelist", "node[1-4]"}};
}

// `valid` with `field` set to `value`, or without it.
json with(json valid, const std::string& field, const std::optional<json>& value) {
  if (value)
    valid[field] = *value;
  else
    valid.erase(field);
  return valid;
}

struct Refusal {
  std::string field;
  std::optional<json> value;  // nothing: the field is left out
  std::string message;        // the whole error message
};

// Each change of `valid` is refused as bad_request with its message.
template <typename Message>
void check_refusals(const json& valid, const std::vector<Refusal>& refusals) {
  CHECK_NOTHROW(Message::from_json(valid));
  for (const auto& [field, value, message] : refusals) {
    INFO(field << " = " << (value ? value->dump() : "(absent)"));
    try {
      Message::from_json(with(valid, field, value));
      FAIL_CHECK("accepted");
    } catch (const ProtocolError& e) {
      CHECK(e.code() == proto::code::kBadRequest);
      CHECK_THAT(e.what(), Equals(message));
    }
  }
}

// `message` survives to_json and from_json, and its JSON is `wire` exactly.
template <typename Message>
Message round_trip(const Message& message, const std::string& wire) {
  CHECK(message.to_json().dump() == wire);
  auto back = Message::from_json(json::parse(wire));
  CHECK(back.to_json().dump() == wire);
  return back;
}

std::string missing(const char* field) { return std::string("missing field '") + field + "'"; }
std::string not_u32(const char* field, const char* got) {
  return std::string("field '") + field + "' must be an unsigned 32-bit integer, got " + got;
}

}  // namespace

TEST_CASE("a request made by make_request parses back", "[protocol]") {
  const auto body = proto::make_request("r1", "register", valid_step());
  const auto request = proto::parse_request(body);
  CHECK(request.id == "r1");
  CHECK(request.op == "register");
  CHECK(proto::RegisterRequest::from_json(request.body).run_id == "12.0-abc");
}

TEST_CASE("malformed requests are refused with a reason", "[protocol]") {
  CHECK(error_code("{not json") == "bad_request");
  CHECK(error_code("[1,2]") == "bad_request");
  CHECK(error_code(R"({"id":1})") == "bad_request");
  CHECK(error_code(R"({"op":7})") == "bad_request");
  CHECK(error_code(std::string(proto::kMaxMessageBytes + 1, ' ')) == "too_large");
  CHECK(error_code(R"({"id":[[[1]]],"op":"hello"})") == "bad_request");
  CHECK(error_code(R"({"id":")" + std::string(129, 'x') + R"(","op":"hello"})") == "bad_request");
  CHECK_THROWS_WITH(proto::parse_request(R"({"id":1})"), Contains("'op'"));
}

TEST_CASE("replies carry the id and the outcome, and parse back", "[protocol]") {
  const auto ok = json::parse(proto::ok_reply(5, {{"a", 1}}));
  CHECK(ok["id"] == 5);
  CHECK(ok["ok"] == true);
  CHECK(ok["result"]["a"] == 1);
  CHECK(proto::parse_reply(proto::ok_reply(5, {{"a", 1}})).result["a"] == 1);
  const auto error = json::parse(proto::error_reply(nullptr, "forbidden", "not yours"));
  CHECK(error["ok"] == false);
  CHECK_FALSE(error.contains("id"));
  CHECK(error["error"]["code"] == "forbidden");
  CHECK(error["error"]["message"] == "not yours");
  const auto parsed = proto::parse_reply(proto::error_reply(nullptr, "forbidden", "not yours"));
  CHECK_FALSE(parsed.ok);
  CHECK(parsed.code == "forbidden");
  CHECK(parsed.message == "not yours");
  CHECK_THROWS_AS(proto::parse_reply("[]"), ProtocolError);
  CHECK_THROWS_WITH(proto::parse_reply(R"({"ok":false})"), Contains("'error'"));
}

TEST_CASE("each request names its op and goes over the wire as it did", "[protocol]") {
  CHECK(std::string(proto::HelloRequest::kOp) == "hello");
  CHECK(std::string(proto::RegisterRequest::kOp) == "register");
  CHECK(std::string(proto::StatusRequest::kOp) == "status");
  CHECK(std::string(proto::EventsRequest::kOp) == "events");
  CHECK(std::string(proto::VerdictRequest::kOp) == "verdict");
  CHECK(std::string(proto::CancelRequest::kOp) == "cancel");
  CHECK(std::string(proto::HeartbeatRequest::kOp) == "heartbeat");
  CHECK(std::string(proto::ReplaceRequest::kOp) == "replace");
  CHECK(std::string(proto::NodesRequest::kOp) == "nodes");

  round_trip(proto::HelloRequest{}, "{}");
  round_trip(proto::NodesRequest{}, "{}");
  const auto step =
      round_trip(proto::RegisterRequest::from_json(valid_step()),
                 R"({"argv":["srun","--auto-resume=1","train.sh"],"attempt":0,"cwd":"/home/u",)"
                 R"("job_id":12,"nodelist":"node[1-4]","run_id":"12.0-abc","step_id":0})");
  CHECK(step.argv.size() == 3);
  CHECK(step.min_nodes == 0);  // left out when 0
  auto smaller = proto::RegisterRequest::from_json(valid_step());
  smaller.min_nodes = 3;
  CHECK(round_trip(smaller,
                   R"({"argv":["srun","--auto-resume=1","train.sh"],"attempt":0,"cwd":"/home/u",)"
                   R"("job_id":12,"min_nodes":3,"nodelist":"node[1-4]","run_id":"12.0-abc",)"
                   R"("step_id":0})")
            .min_nodes == 3);
  CHECK(round_trip(proto::StatusRequest{}, "{}").job_id == std::nullopt);
  CHECK(round_trip(proto::StatusRequest{12, {}, {}}, R"({"job_id":12})").job_id == 12U);
  CHECK(round_trip(proto::StatusRequest{{}, 5, 40}, R"({"before":40,"limit":5})").before == 40);
  CHECK(round_trip(proto::EventsRequest{}, "{}").since == std::nullopt);
  CHECK(round_trip(proto::EventsRequest{1700000000, {}, {}, {}, {}}, R"({"since":1700000000})")
            .since == 1700000000);
  CHECK(round_trip(proto::EventsRequest{{}, 10, 77, {}, {}}, R"({"after":77,"limit":10})").after ==
        77);
  const auto verdict = round_trip(proto::VerdictRequest{"12.0-abc", 2, true},
                                  R"({"attempt":2,"ended":true,"run_id":"12.0-abc"})");
  CHECK(verdict.run_id == "12.0-abc");
  CHECK(verdict.attempt == 2);
  CHECK(verdict.ended);
  round_trip(proto::VerdictRequest{"r", 0, false}, R"({"attempt":0,"ended":false,"run_id":"r"})");
  CHECK(round_trip(proto::CancelRequest{"r", 1, "srun got SIGINT"},
                   R"({"attempt":1,"reason":"srun got SIGINT","run_id":"r"})")
            .reason == "srun got SIGINT");
  round_trip(proto::CancelRequest{"r", 1, ""}, R"({"attempt":1,"run_id":"r"})");
  CHECK(
      round_trip(proto::HeartbeatRequest{"node1", true, {}}, R"({"node":"node1","stopping":true})")
          .stopping);
  round_trip(proto::HeartbeatRequest{"node1", false, {}}, R"({"node":"node1"})");
  const auto found = round_trip(proto::HeartbeatRequest{"node1",
                                                        false,
                                                        {{"node2", ar::ProbeResult::silent},
                                                         {"node3", ar::ProbeResult::unknown}}},
                                R"({"node":"node1","peers":{"node2":"silent","node3":"unknown"}})");
  CHECK(found.peers.at("node2") == ar::ProbeResult::silent);
  proto::HeartbeatRequest paced{"node1", false, {}};
  paced.interval_ms = 1000;
  CHECK(round_trip(paced, R"({"interval_ms":1000,"node":"node1"})").interval_ms == 1000);
  for (const auto mode :
       {proto::ReplaceMode::wait, proto::ReplaceMode::now, proto::ReplaceMode::force}) {
    const auto wire = R"({"mode":")" + std::string(ar::name_of(mode)) + R"(","node":"node2"})";
    CHECK(round_trip(proto::ReplaceRequest{"node2", mode}, wire).mode == mode);
  }
}

TEST_CASE("a heartbeat's cross-check results and a reply's probe list are checked", "[protocol]") {
  using proto::HeartbeatReply;
  using proto::HeartbeatRequest;
  CHECK_THROWS_WITH(HeartbeatRequest::from_json({{"node", "n1"}, {"peers", {{"n2", "maybe"}}}}),
                    "'peers': the result for n2 is 'maybe' (known: answered, silent, "
                    "unknown)");
  CHECK_THROWS_WITH(HeartbeatRequest::from_json({{"node", "n1"}, {"peers", {{"n 2", "silent"}}}}),
                    Catch::Contains("'n 2' is not a node name"));
  CHECK_THROWS_WITH(HeartbeatRequest::from_json({{"node", "n1"}, {"peers", {"n2"}}}),
                    Catch::Contains("'peers' must be an object"));
  ar::proto::json many = ar::proto::json::object();
  for (int i = 0; i < 17; ++i) many["n" + std::to_string(i)] = "silent";
  CHECK_THROWS_WITH(HeartbeatRequest::from_json({{"node", "n1"}, {"peers", many}}),
                    Catch::Contains("'peers' has more than 16 nodes"));
  CHECK_THROWS_WITH(HeartbeatRequest::from_json({{"node", "n1"}, {"interval_ms", 99}}),
                    "'interval_ms' is 99: expected 100 to 60000 (milliseconds between heartbeats)");
  CHECK_THROWS_WITH(HeartbeatRequest::from_json({{"node", "n1"}, {"interval_ms", 60001}}),
                    Catch::Contains("'interval_ms' is 60001"));
  CHECK_THROWS_WITH(HeartbeatRequest::from_json({{"node", "n1"}, {"interval_ms", -5}}),
                    Catch::Contains("must be an unsigned 32-bit integer"));
  CHECK(HeartbeatRequest::from_json({{"node", "n1"}}).interval_ms == 0);

  const HeartbeatReply reply{
      {{"node3", "10.0.0.3", 6818, false}, {"node4", "node4.example", 6819, true}}};
  const auto back = HeartbeatReply::from_json(reply.to_json());
  REQUIRE(back.probe.size() == 2);
  CHECK(back.probe[1].address == "node4.example");
  CHECK(back.probe[1].port == 6819);
  CHECK(back.probe[1].deep);
  CHECK_FALSE(back.probe[0].deep);
  CHECK(HeartbeatReply::from_json(ar::proto::json::object()).probe.empty());
  CHECK_THROWS_WITH(
      HeartbeatReply::from_json({{"probe", {{{"node", "n3"}, {"address", "a"}, {"port", 0}}}}}),
      Catch::Contains("port 0 of n3 is not 1-65535"));
  CHECK_THROWS_WITH(HeartbeatReply::from_json(
                        {{"probe", {{{"node", "n3"}, {"address", "a b;rm"}, {"port", 1}}}}}),
                    Catch::Contains("'a b;rm' is not a host name or numeric address"));
}

TEST_CASE("optional request fields have their documented defaults", "[protocol]") {
  CHECK_FALSE(proto::VerdictRequest::from_json({{"run_id", "r"}, {"attempt", 0}}).ended);
  CHECK(proto::CancelRequest::from_json({{"run_id", "r"}, {"attempt", 0}}).reason.empty());
  CHECK_FALSE(proto::HeartbeatRequest::from_json({{"node", "n1"}}).stopping);
  CHECK(proto::ReplaceRequest::from_json({{"node", "n1"}}).mode == proto::ReplaceMode::wait);
  // Fields an op does not know are left alone, as the envelope's are.
  CHECK(proto::StatusRequest::from_json({{"v", 1}, {"op", "status"}, {"x", 1}}).job_id ==
        std::nullopt);
}

TEST_CASE("a step registration names the field it finds wrong", "[protocol]") {
  check_refusals<proto::RegisterRequest>(
      valid_step(),
      {{"job_id", -1, not_u32("job_id", "-1")},
       {"job_id", "12", not_u32("job_id", "\"12\"")},
       {"job_id", 4294967296LL, not_u32("job_id", "4294967296")},
       {"job_id", std::nullopt, missing("job_id")},
       {"step_id", 1.5, not_u32("step_id", "1.5")},
       {"run_id", "", "field 'run_id' must not be empty"},
       {"run_id", 5, "field 'run_id' must be a string"},
       {"run_id", std::string(129, 'r'), "field 'run_id' is longer than 128 bytes"},
       // What could end a log field or an AdminComment entry, or a line.
       {"run_id", "12.0 uid=0 op=replace",
        "field 'run_id' may hold only letters, digits and ._:@+-, got \"12.0 uid=0 op=replace\""},
       {"run_id", "12.0; attempt 9",
        "field 'run_id' may hold only letters, digits and ._:@+-, got \"12.0; attempt 9\""},
       {"run_id", "12.0\u2028uid=0",
        "field 'run_id' may hold only letters, digits and ._:@+-, got \"12.0\u2028uid=0\""},
       {"attempt", nullptr, not_u32("attempt", "null")},
       {"argv", json::array(), "field 'argv' must not be empty"},
       {"argv", json{1, 2}, "field 'argv' must be an array of strings"},
       {"argv", "srun", "field 'argv' must be an array of strings"},
       {"argv", json(std::vector<std::string>(1025, "x")), "field 'argv' has more than 1024 items"},
       {"cwd", false, "field 'cwd' must be a string"},
       {"cwd", std::nullopt, missing("cwd")},
       {"cwd", std::string(4097, 'c'), "field 'cwd' is longer than 4096 bytes"},
       {"nodelist", json::object(), "field 'nodelist' must be a string"},
       {"min_nodes", -2, not_u32("min_nodes", "-2")},
       {"min_nodes", "2", not_u32("min_nodes", "\"2\"")}});
  // The limits themselves are accepted, and the whole alphabet.
  CHECK_NOTHROW(
      proto::RegisterRequest::from_json(with(valid_step(), "run_id", std::string(128, 'r'))));
  CHECK_NOTHROW(
      proto::RegisterRequest::from_json(with(valid_step(), "run_id", "12.0-ca7a2a4a_A.Z:9@x+y-0")));
  CHECK_NOTHROW(proto::RegisterRequest::from_json(with(valid_step(), "job_id", 4294967295LL)));
}

TEST_CASE("the other requests name the field they find wrong", "[protocol]") {
  check_refusals<proto::StatusRequest>(
      json::object(),
      {{"job_id", -3, not_u32("job_id", "-3")}, {"job_id", nullptr, not_u32("job_id", "null")}});
  check_refusals<proto::EventsRequest>(json::object(),
                                       {{"since", "yesterday", not_u32("since", "\"yesterday\"")},
                                        {"since", 4294967296LL, not_u32("since", "4294967296")}});
  const json step_ref{{"run_id", "r"}, {"attempt", 0}};
  check_refusals<proto::VerdictRequest>(
      step_ref,
      {{"run_id", std::nullopt, missing("run_id")},
       {"run_id", std::string(129, 'r'), "field 'run_id' is longer than 128 bytes"},
       {"run_id", "r\nx", "field 'run_id' may hold only letters, digits and ._:@+-, got \"r\\nx\""},
       {"attempt", std::nullopt, missing("attempt")},
       {"attempt", "0", not_u32("attempt", "\"0\"")},
       {"ended", "yes", "field 'ended' must be true or false, got \"yes\""},
       {"ended", 1, "field 'ended' must be true or false, got 1"}});
  check_refusals<proto::CancelRequest>(
      step_ref, {{"run_id", 1, "field 'run_id' must be a string"},
                 {"attempt", -1, not_u32("attempt", "-1")},
                 {"reason", 7, "field 'reason' must be a string"},
                 {"reason", std::string(257, 'x'), "field 'reason' is longer than 256 bytes"}});
  CHECK(proto::CancelRequest::from_json(with(step_ref, "reason", std::string(256, 'x')))
            .reason.size() == 256);
  check_refusals<proto::HeartbeatRequest>(
      {{"node", "node1"}},
      {{"node", std::nullopt, missing("node")},
       {"stopping", "true", "field 'stopping' must be true or false, got \"true\""}});
  check_refusals<proto::ReplaceRequest>(
      {{"node", "node1"}, {"mode", "now"}},
      {{"node", std::nullopt, missing("node")},
       {"mode", 1, "field 'mode' must be a string"},
       {"mode", "later", "unknown mode 'later' (known: wait, now, force)"},
       {"mode", std::string(17, 'w'), "field 'mode' is longer than 16 bytes"}});
}

TEST_CASE("heartbeat and replace take a node name as slurm.conf spells one", "[protocol]") {
  for (const auto* name : {"node1", "gpu-a_01.rack2", "N", "0"}) {
    INFO(name);
    CHECK(proto::HeartbeatRequest::from_json({{"node", name}}).node == name);
    CHECK(proto::ReplaceRequest::from_json({{"node", name}}).node == name);
  }
  const std::string longest(64, 'n');
  CHECK(proto::HeartbeatRequest::from_json({{"node", longest}}).node == longest);
  const std::vector<std::pair<json, std::string>> bad{
      {"", "field 'node': '' is not a node name"},
      {"node1;reboot", "field 'node': 'node1;reboot' is not a node name"},
      {"node 1", "field 'node': 'node 1' is not a node name"},
      {"node1/..", "field 'node': 'node1/..' is not a node name"},
      {"nöde", "field 'node': 'nöde' is not a node name"},
      {std::string(65, 'n'), "field 'node' is longer than 64 bytes"},
      {42, "field 'node' must be a string"}};
  for (const auto& [node, message] : bad) {
    INFO(node.dump());
    CHECK_THROWS_WITH(proto::HeartbeatRequest::from_json({{"node", node}}), Equals(message));
    CHECK_THROWS_WITH(proto::ReplaceRequest::from_json({{"node", node}, {"mode", "wait"}}),
                      Equals(message));
  }
}

TEST_CASE("replace modes have one name each", "[protocol]") {
  for (const auto mode :
       {proto::ReplaceMode::wait, proto::ReplaceMode::now, proto::ReplaceMode::force})
    CHECK(ar::parse_name<proto::ReplaceMode>(ar::name_of(mode)) == mode);
  CHECK(ar::name_of(proto::ReplaceMode::force) == "force");
  CHECK(ar::parse_name<proto::ReplaceMode>("Wait") == std::nullopt);
  CHECK(ar::parse_name<proto::ReplaceMode>("") == std::nullopt);
}

TEST_CASE("each reply goes over the wire as it did and parses back", "[protocol]") {
  const auto hello = round_trip(proto::HelloReply{"0.1.0", 1, 1000},
                                R"({"protocol":1,"uid":1000,"version":"0.1.0"})");
  CHECK(hello.version == "0.1.0");
  CHECK(hello.uid == 1000);
  CHECK(round_trip(proto::RegisterReply{"12.0-abc", 1, true},
                   R"({"attempt":1,"duplicate":true,"run_id":"12.0-abc"})")
            .duplicate);

  proto::StatusReply status;
  status.steps.push_back({proto::RegisterRequest::from_json(valid_step()), 1000,
                          ar::StepState::decided, 17, ar::Verdict::give_up, "no spare nodes",
                          ar::RepairPhase::none});
  status.steps.push_back({proto::RegisterRequest::from_json(valid_step()), 0,
                          ar::StepState::repairing, 18, ar::Verdict::none, "",
                          ar::RepairPhase::node_out});
  const auto steps = round_trip(
      status,
      R"({"steps":[{"argv":["srun","--auto-resume=1","train.sh"],"attempt":0,"created_at":17,)"
      R"("cwd":"/home/u","job_id":12,"message":"no spare nodes","nodelist":"node[1-4]",)"
      R"("run_id":"12.0-abc","state":"decided","step_id":0,"uid":1000,"verdict":"give_up"},)"
      R"({"argv":["srun","--auto-resume=1","train.sh"],"attempt":0,"created_at":18,)"
      R"("cwd":"/home/u","job_id":12,"nodelist":"node[1-4]","phase":"node_out",)"
      R"("run_id":"12.0-abc","state":"repairing","step_id":0,"uid":0}]})");
  REQUIRE(steps.steps.size() == 2);
  CHECK(steps.steps[0].verdict == ar::Verdict::give_up);
  CHECK(steps.steps[1].phase == ar::RepairPhase::node_out);
  CHECK(steps.steps[1].message.empty());
  round_trip(proto::StatusReply{}, R"({"steps":[]})");

  proto::EventsReply events;
  events.events.push_back(
      {1, 1700000000, 12, "12.0-abc", "registered", "step 12.0", "", 1000, "", "info", ""});
  events.events.push_back({2, 1700000001, 0, "", "marked", "FAIL", "node3", 0, "", "info", ""});
  events.events.push_back(
      {3, 1700000002, 0, "", "capacity_unavailable", "none", "a-3", 0, "a", "warning", "instance"});
  events.next = 2;
  const auto paged =
      round_trip(events, R"({"events":[{"at":1700000000,"detail":"step 12.0","id":1,"job_id":12,)"
                         R"("kind":"registered","node":"","run_id":"12.0-abc","uid":1000},)"
                         R"({"at":1700000001,"detail":"FAIL","id":2,"job_id":0,"kind":"marked",)"
                         R"("node":"node3","run_id":"","uid":0},)"
                         R"({"at":1700000002,"detail":"none","group":"a","id":3,"job_id":0,)"
                         R"("kind":"capacity_unavailable","level":"warning","node":"a-3",)"
                         R"("resource":"instance","run_id":"","uid":0}],"next":2})");
  CHECK(paged.events[1].node == "node3");
  CHECK(paged.events[1].group.empty());
  CHECK(paged.events[1].level == "info");
  CHECK(paged.events[2].group == "a");
  CHECK(paged.events[2].level == "warning");
  CHECK(paged.events[2].resource == "instance");
  CHECK(paged.events[1].resource.empty());
  CHECK(paged.events[0].uid == 1000);
  CHECK(paged.next == 2);

  proto::VerdictReply verdict{"r", 0, ar::Verdict::relaunch, "repaired", {{"node[1-3,5]", 4}}};
  const auto relaunch = round_trip(
      verdict, R"({"attempt":0,"message":"repaired","relaunch":{"nodelist":"node[1-3,5]",)"
               R"("num_nodes":4},"run_id":"r","verdict":"relaunch"})");
  REQUIRE(relaunch.relaunch);
  CHECK(relaunch.relaunch->num_nodes == 4);
  CHECK(relaunch.relaunch->step_nodes == 0);  // left out when 0
  CHECK(relaunch.verdict == ar::Verdict::relaunch);
  proto::VerdictReply resized{"r", 0, ar::Verdict::relaunch, "", {{"node[1-2,4-5]", 4, 3}}};
  CHECK(round_trip(resized, R"({"attempt":0,"message":"","relaunch":{"nodelist":"node[1-2,4-5]",)"
                            R"("num_nodes":4,"step_nodes":3},"run_id":"r","verdict":"relaunch"})")
            .relaunch->step_nodes == 3);
  const auto waiting =
      round_trip(proto::VerdictReply{"r", 3, ar::Verdict::wait, "checking the step's nodes", {}},
                 R"({"attempt":3,"message":"checking the step's nodes","run_id":"r",)"
                 R"("verdict":"wait"})");
  CHECK_FALSE(waiting.relaunch);
  CHECK(round_trip(proto::CancelReply{"r", 0, ar::Verdict::cancelled, "stopped"},
                   R"({"attempt":0,"message":"stopped","run_id":"r","verdict":"cancelled"})")
            .verdict == ar::Verdict::cancelled);
  round_trip(proto::HeartbeatReply{}, "{}");
  CHECK(round_trip(proto::ReplaceReply{"node2", "node2 is being replaced"},
                   R"({"message":"node2 is being replaced","node":"node2"})")
            .message == "node2 is being replaced");

  proto::NodesReply nodes;
  nodes.replacements.push_back({"node3", ar::NodeRepairState::failed, "Action:Replace",
                                ar::RepairMode::wait, 2, 1700000000, ""});
  nodes.heartbeats = {{"node1", 0.5}, {"node2", 1.25}};
  const auto back =
      round_trip(nodes, R"({"heartbeats":{"node1":0.5,"node2":1.25},"replacements":[{"attempts":2,)"
                        R"("detail":"","mode":"wait","node":"node3","reason":"Action:Replace",)"
                        R"("started_at":1700000000,"state":"failed"}]})");
  CHECK(back.heartbeats.at("node2") == 1.25);
  round_trip(proto::NodesReply{}, R"({"heartbeats":{},"replacements":[]})");
  proto::NodesReply capped;
  capped.heartbeats = {{"node1", 9.5}};
  capped.heartbeats_left_out = 7;
  CHECK(round_trip(capped, R"({"heartbeats":{"node1":9.5},"heartbeats_left_out":7,)"
                           R"("replacements":[]})")
            .heartbeats_left_out == 7);
  CHECK(round_trip(proto::NodesRequest{{"node1", "node2"}}, R"({"nodes":["node1","node2"]})")
            .nodes.size() == 2);
}

TEST_CASE("a reply names the field it finds wrong", "[protocol]") {
  check_refusals<proto::HelloReply>(proto::HelloReply{"0.1.0", 1, 0}.to_json(),
                                    {{"version", 1, "field 'version' must be a string"},
                                     {"uid", -1, not_u32("uid", "-1")},
                                     {"protocol", std::nullopt, missing("protocol")}});
  check_refusals<proto::RegisterReply>(
      proto::RegisterReply{"r", 0, false}.to_json(),
      {{"duplicate", std::nullopt, missing("duplicate")},
       {"duplicate", 0, "field 'duplicate' must be true or false, got 0"},
       {"run_id", std::string(129, 'r'), "field 'run_id' is longer than 128 bytes"}});
  check_refusals<proto::VerdictReply>(
      proto::VerdictReply{"r", 0, ar::Verdict::none, "running", {}}.to_json(),
      {{"verdict", "maybe", "field 'verdict': unknown verdict 'maybe'"},
       {"verdict", std::nullopt, missing("verdict")},
       {"message", nullptr, "field 'message' must be a string"},
       {"relaunch", "node1", "field 'relaunch' must be an object, got \"node1\""},
       {"relaunch", json::object(), "field 'relaunch': missing field 'nodelist'"},
       {"relaunch", json{{"nodelist", "n1"}, {"num_nodes", -2}},
        "field 'relaunch': " + not_u32("num_nodes", "-2")}});
  check_refusals<proto::CancelReply>(
      proto::CancelReply{"r", 0, ar::Verdict::give_up, "no"}.to_json(),
      {{"verdict", "", "field 'verdict': unknown verdict ''"},
       {"attempt", std::nullopt, missing("attempt")}});
  check_refusals<proto::ReplaceReply>(proto::ReplaceReply{"node1", "ok"}.to_json(),
                                      {{"node", "a b", "field 'node': 'a b' is not a node name"},
                                       {"message", std::nullopt, missing("message")}});

  auto step = proto::StatusReply::Step{proto::RegisterRequest::from_json(valid_step()),
                                       0,
                                       ar::StepState::registered,
                                       1,
                                       ar::Verdict::none,
                                       "",
                                       ar::RepairPhase::none}
                  .to_json();
  check_refusals<proto::StatusReply>(
      json{{"steps", json::array({step})}},
      {{"steps", std::nullopt, missing("steps")},
       {"steps", step, "field 'steps' must be an array of objects"},
       {"steps", json::array({step, 3}), "field 'steps' item 1 must be an object, got 3"},
       {"steps", json::array({with(step, "uid", std::nullopt)}),
        "field 'steps' item 0: missing field 'uid'"},
       {"steps", json::array({with(step, "argv", "srun")}),
        "field 'steps' item 0: field 'argv' must be an array of strings"},
       {"steps", json::array({with(step, "created_at", 1.5)}),
        "field 'steps' item 0: field 'created_at' must be a 64-bit integer, got 1.5"},
       {"steps", json::array({with(step, "phase", 2)}),
        "field 'steps' item 0: field 'phase' must be a string"},
       {"steps", json::array({with(step, "state", "Decided")}),
        "field 'steps' item 0: field 'state': unknown step state 'Decided'"},
       {"steps", json::array({with(step, "phase", "shrunk")}),
        "field 'steps' item 0: field 'phase': unknown repair phase 'shrunk'"}});

  const auto event =
      proto::EventsReply::Event{1, 2, 3, "r", "ended", "", "", 0, "", "info", ""}.to_json();
  check_refusals<proto::EventsReply>(
      json{{"events", json::array({event})}},
      {{"events", json::array({with(event, "node", std::nullopt)}),
        "field 'events' item 0: missing field 'node'"},
       {"events", json::array({with(event, "id", 18446744073709551615ULL)}),
        "field 'events' item 0: field 'id' must be a 64-bit integer, got 18446744073709551615"},
       {"events", json::array({with(event, "kind", false)}),
        "field 'events' item 0: field 'kind' must be a string"}});

  check_refusals<proto::NodesReply>(
      proto::NodesReply{{{"n1", ar::NodeRepairState::waiting, "r", ar::RepairMode::wait, 0, 0, ""}},
                        {{"n1", 1.0}}}
          .to_json(),
      {{"heartbeats", std::nullopt, missing("heartbeats")},
       {"heartbeats", json::array(), "field 'heartbeats' must be an object, got []"},
       {"heartbeats", json{{"n1", "1s"}},
        "field 'heartbeats': 'n1' must be a number of seconds, got \"1s\""},
       {"replacements", json::array({json::object()}),
        "field 'replacements' item 0: missing field 'node'"},
       {"replacements",
        json::array({{{"node", "n1"},
                      {"state", "lost"},
                      {"reason", ""},
                      {"mode", "wait"},
                      {"attempts", 0},
                      {"started_at", 0},
                      {"detail", ""}}}),
        "field 'replacements' item 0: field 'state': unknown replacement state 'lost'"}});

  // A result that is not an object at all.
  CHECK_THROWS_WITH(proto::HeartbeatReply::from_json(json::array()),
                    Equals("the result must be a JSON object, got []"));
  CHECK_THROWS_WITH(proto::StatusReply::from_json("x"),
                    Equals("the result must be a JSON object, got \"x\""));
}

// Found by fuzz/request.cpp: an error echoed the whole value it refused,
// which the reply escapes once more; a request of 60 KB made a reply of
// 70 KB, over the line a client reads ("reply too large" instead of what
// was wrong).
TEST_CASE("an error naming a refused value fits in a reply line", "[protocol]") {
  const auto big_string = std::string(10'000, '\x01');
  const auto big_array = json(std::vector<std::string>(8'000, "\""));
  for (const auto& value : {json(big_string), big_array, json{{"a", big_string}}}) {
    const auto body = with(json::object(), "job_id", value);
    REQUIRE(body.dump().size() < proto::kMaxMessageBytes);
    try {
      proto::StatusRequest::from_json(body);
      FAIL_CHECK("accepted");
    } catch (const ProtocolError& e) {
      const auto reply = proto::error_reply(1, e.code(), e.what());
      CHECK(reply.size() <= proto::kMaxMessageBytes + 1);
      CHECK_THAT(e.what(), Contains("field 'job_id' must be an unsigned 32-bit integer, got ") &&
                               Contains("..."));
      CHECK(std::string(e.what()).size() < 200);
    }
  }
}

TEST_CASE("the guard rails' requests and replies go over the wire and parse back",
          "[protocol][guard]") {
  CHECK(std::string(proto::PauseRequest::kOp) == "pause");
  CHECK(std::string(proto::UnpauseRequest::kOp) == "unpause");
  CHECK(std::string(proto::ResumeActionsRequest::kOp) == "resume_actions");
  CHECK(round_trip(proto::PauseRequest{"kernel"}, R"({"reason":"kernel"})").reason == "kernel");
  round_trip(proto::PauseRequest{}, "{}");
  round_trip(proto::UnpauseRequest{}, "{}");
  round_trip(proto::ResumeActionsRequest{}, "{}");
  proto::GuardReply reply{"paused", {"observe", true, "by uid 0", false, "", 1, 2, 0, 3}};
  const auto back = round_trip(
      reply, R"({"controller":{"marks":1,"max_marks":2,"max_replacements":3,"mode":"observe",)"
             R"("paused":true,"paused_detail":"by uid 0","replacements":0,"tripped":false},)"
             R"("message":"paused"})");
  CHECK(back.controller.paused_detail == "by uid 0");
  CHECK(back.controller.max_replacements == 3);
  proto::StatusReply status;
  status.controller = reply.controller;
  CHECK(round_trip(status, R"({"controller":{"marks":1,"max_marks":2,"max_replacements":3,)"
                           R"("mode":"observe","paused":true,"paused_detail":"by uid 0",)"
                           R"("replacements":0,"tripped":false},"steps":[]})")
            .controller->mode == "observe");
  auto wrong = reply.to_json();
  wrong["controller"]["mode"] = "watch";
  CHECK_THROWS_WITH(proto::GuardReply::from_json(wrong),
                    "field 'controller': field 'mode': unknown mode 'watch' (known: act, observe)");
}

TEST_CASE("continuous provisioning's requests go over the wire and name what they refuse",
          "[protocol]") {
  const auto filtered = round_trip(proto::EventsRequest{{}, {}, {}, "gpu", "warning"},
                                   R"({"group":"gpu","level":"warning"})");
  CHECK(filtered.group == "gpu");
  CHECK(filtered.level == "warning");
  check_refusals<proto::EventsRequest>(
      json::object(),
      {{"level", "debug", "field 'level': unknown level 'debug' (known: info, warning, error)"},
       {"group", "",
        "field 'group': \"\" is not a group name (letters, digits, '_' and '-', "
        "starting with a letter, at most 40 bytes)"},
       {"group", "a b",
        "field 'group': \"a b\" is not a group name (letters, digits, '_' and "
        "'-', starting with a letter, at most 40 bytes)"},
       {"group", std::string(41, 'g'),
        "field 'group': \"" + std::string(41, 'g') +
            "\" is not a group name (letters, digits, '_' and '-', starting with a letter, at "
            "most 40 bytes)"}});

  round_trip(proto::GroupsRequest{}, "{}");
  round_trip(proto::GroupApplyRequest{}, "{}");
  const auto set = round_trip(proto::GroupSetRequest{"gpu", 5, {}}, R"({"count":5,"name":"gpu"})");
  CHECK(set.count == 5U);
  CHECK_FALSE(set.min_count);
  CHECK(round_trip(proto::GroupSetRequest{"gpu", {}, 2}, R"({"min_count":2,"name":"gpu"})")
            .min_count == 2U);
  check_refusals<proto::GroupSetRequest>(
      {{"name", "gpu"}, {"count", 3}},
      {{"name", std::nullopt, missing("name")},
       {"name", "../etc",
        "field 'name': \"../etc\" is not a group name (letters, digits, '_' "
        "and '-', starting with a letter, at most 40 bytes)"},
       {"count", -1, not_u32("count", "-1")},
       {"count", std::nullopt, "group_set needs count or min_count (or both)"}});
  CHECK(round_trip(proto::GroupRetryRequest{"gpu"}, R"({"name":"gpu"})").name == "gpu");
  CHECK(round_trip(proto::GroupRollRequest{"gpu", 2}, R"({"batch":2,"name":"gpu"})").batch == 2U);
  CHECK(proto::GroupRollRequest::from_json({{"name", "gpu"}}).batch == 1U);
  check_refusals<proto::GroupRollRequest>({{"name", "gpu"}, {"batch", 1}},
                                          {{"batch", 0, "field 'batch' must be at least 1, got 0"},
                                           {"name", 7, "field 'name' must be a string"}});
  const auto usage = round_trip(proto::UsageRequest{"gpu", 1700000000, 10},
                                R"({"group":"gpu","limit":10,"since":1700000000})");
  CHECK(usage.since == 1700000000);
  check_refusals<proto::UsageRequest>(json::object(),
                                      {{"since", -5, "field 'since' must not be negative, got -5"},
                                       {"limit", 0, "field 'limit' must be 1-1000, got 0"}});
  CHECK(round_trip(proto::LifecycleLogRequest{"gpu-3"}, R"({"node":"gpu-3"})").node == "gpu-3");
  check_refusals<proto::LifecycleLogRequest>(
      {{"node", "gpu-3"}}, {{"node", "../../x", "field 'node': '../../x' is not a node name"}});
}

TEST_CASE("continuous provisioning's replies go over the wire and parse back", "[protocol]") {
  proto::GroupsReply groups;
  groups.groups.push_back({"gpu", "compute", "InService", 3, 2, 6, 3, 0, 0, 4, ""});
  const auto back = round_trip(
      groups, R"({"groups":[{"count":3,"detail":"","in_service":3,"leaving":0,"max_count":6,)"
              R"("min_count":2,"name":"gpu","operation":4,"starting":0,"status":"InService",)"
              R"("type":"compute"}]})");
  REQUIRE(back.groups.size() == 1);
  CHECK(back.groups[0].max_count == 6);
  CHECK(round_trip(proto::GroupReply{"done"}, R"({"message":"done"})").message == "done");
  proto::GroupPlanReply plan{
      "/etc/slurm/nodes.conf", "restart", {"+NodeName=g-3 State=CLOUD"}, 2, ""};
  const auto planned = round_trip(
      plan, R"({"change":"restart","diff":["+NodeName=g-3 State=CLOUD"],"diff_left_out":2,)"
            R"("error":"","path":"/etc/slurm/nodes.conf"})");
  CHECK(planned.diff == plan.diff);
  CHECK(planned.diff_left_out == 2U);
  CHECK(round_trip(proto::GroupPlanRequest{}, "{}").to_json() == proto::json::object());
  proto::UsageReply usage;
  usage.groups.push_back({"gpu", 2, 1.5});
  usage.instances.push_back(
      {"gpu", "gpu-1", "i-1", "gpu:gpu-1:1", 1, 10, 20, 30, 3620, "scale_in", 1.0});
  usage.left_out = 3;
  const auto used = round_trip(
      usage, R"({"groups":[{"group":"gpu","instance_hours":1.5,"instances":2}],"instances":)"
             R"([{"end_reason":"scale_in","group":"gpu","hours":1.0,"in_service":30,)"
             R"("instance_id":"i-1","node":"gpu-1","operation":1,"requested":10,"started":20,)"
             R"("terminated":3620,"token":"gpu:gpu-1:1"}],"left_out":3})");
  CHECK(used.instances.at(0).terminated == 3620);
  CHECK(used.left_out == 3);
  CHECK_THROWS_WITH(proto::UsageReply::from_json(json::parse(
                        R"({"groups":[{"group":"gpu","instance_hours":-1,"instances":2}],)"
                        R"("instances":[],"left_out":0})")),
                    "field 'groups' item 0: field 'instance_hours' must be a number of hours, "
                    "got -1");
  CHECK(round_trip(proto::LifecycleLogReply{"gpu-1", "/l/gpu/gpu-1.2.log", "ok\n", 3},
                   R"({"node":"gpu-1","path":"/l/gpu/gpu-1.2.log","size":3,"text":"ok\n"})")
            .size == 3);
}

TEST_CASE("kOps lists every request's op once", "[protocol]") {
  using namespace proto;
  const std::vector<std::string_view> ops = {
      HelloRequest::kOp,         RegisterRequest::kOp,   StatusRequest::kOp,
      EventsRequest::kOp,        VerdictRequest::kOp,    CancelRequest::kOp,
      TasksExitedRequest::kOp,   HeartbeatRequest::kOp,  ReplaceRequest::kOp,
      NodesRequest::kOp,         PauseRequest::kOp,      UnpauseRequest::kOp,
      ResumeActionsRequest::kOp, GroupsRequest::kOp,     GroupSetRequest::kOp,
      GroupApplyRequest::kOp,    GroupRetryRequest::kOp, GroupRollRequest::kOp,
      GroupPlanRequest::kOp,     UsageRequest::kOp,      LifecycleLogRequest::kOp};
  CHECK(std::vector<std::string_view>(kOps.begin(), kOps.end()) == ops);
}
