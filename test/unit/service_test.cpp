// Who may do what: every operation asked by every kind of caller (the
// step's owner, another user, root, SlurmUser) for a step in each state,
// through the real Service over the fakes. These pin today's rules; a test
// whose name says "(today and issue N flips it)" pins behaviour that issue
// changes.

#include "server/service.hpp"

#include <fmt/core.h>

#include <catch2/catch.hpp>
#include <memory>
#include <set>

#include "callers.hpp"
#include "fakes.hpp"
#include "full_store.hpp"
#include "stderr_capture.hpp"

namespace {

using namespace std::chrono_literals;
using ar::proto::json;

using ar::test::kOther;
using ar::test::kOwner;
using ar::test::kRoot;
using ar::test::kSlurmUser;
using ar::test::outcome;

struct ServiceRig : ar::test::Fakes {
  std::unique_ptr<ar::Store> store;
  std::unique_ptr<ar::NodeKeeper> keeper;
  std::unique_ptr<ar::Verdicts> verdicts;
  std::unique_ptr<ar::Service> service;
  int wakes = 0;

  ServiceRig() {
    slurm.add_nodes(4);
    slurm.add_job(10, kOwner, {"node1", "node2"});
    slurm.add_step(10, 0, "node[1-2]");
    slurm.add_step(10, 1, "node[1-2]");
    config.local_restart_command = {"/bin/restart", "{node}"};
    store = std::make_unique<ar::Store>(dir.path, clock);
    keeper = std::make_unique<ar::NodeKeeper>(*store, config, slurm, clock, prober, runner);
    verdicts = std::make_unique<ar::Verdicts>(*store, reports, clock, config);
    service = std::make_unique<ar::Service>(
        *store, slurm, clock, [this] { ++wakes; }, reports, *verdicts, keeper.get(), &config);
    // The keeper has looked once: heartbeats for known nodes are taken.
    ar::NodeKeeper::NodeMap nodes;
    for (const auto& n : slurm.load_nodes()) nodes[n.name] = &n;
    keeper->tick(nodes, {});
  }

  static json registration(const std::string& run, std::uint32_t step_id = 0) {
    return {{"job_id", 10},
            {"step_id", step_id},
            {"run_id", run},
            {"attempt", 0},
            {"argv", {"srun", "--auto-resume=1", "train"}},
            {"cwd", "/w"},
            {"nodelist", "node[1-2]"}};
  }
  // The step "r" of job 10, in `state`.
  void put_step(ar::StepState state) {
    REQUIRE(ask("register", registration("r"), kOwner)["ok"] == true);
    auto step = store->find("r", 0).value();
    if (state == ar::StepState::ended)
      REQUIRE(store->mark_ended(step, clock.stamp(), {ar::EventKind::ended, "ended"}));
    if (state == ar::StepState::repairing) {
      step.state = state;
      step.phase = ar::RepairPhase::node_out;
      REQUIRE(store->save(step, ar::EventSpec{ar::EventKind::node_out, "node2 out"}));
    }
    if (state == ar::StepState::decided) {
      step.state = state;
      step.verdict = ar::Verdict::give_up;
      step.message = "given up";
      REQUIRE(store->save(step, ar::EventSpec{ar::EventKind::give_up, "given up"}));
    }
  }
  // From node1's NodeAddr unless told otherwise.
  json ask(const std::string& op, json fields, uid_t caller,
           const std::string& peer = "127.0.0.11") {
    const auto request =
        ar::proto::parse_request(ar::proto::make_request(7, op, std::move(fields)));
    return json::parse(service->handle(request, caller, peer));
  }
};

const char* caller_name(uid_t caller) {
  switch (caller) {
    case kOwner:
      return "owner";
    case kOther:
      return "other user";
    case kRoot:
      return "root";
    default:
      return "SlurmUser";
  }
}

json fields_of(const std::string& op) {
  if (op == "register") return ServiceRig::registration("second", 1);
  if (op == "status" || op == "events" || op == "hello" || op == "nodes") return json::object();
  if (op == "verdict") return {{"run_id", "r"}, {"attempt", 0}};
  if (op == "cancel") return {{"run_id", "r"}, {"attempt", 0}, {"reason", "Ctrl-C"}};
  if (op == "heartbeat") return {{"node", "node1"}};
  if (op == "pause") return {{"reason", "maintenance"}};
  if (op == "unpause" || op == "resume_actions") return json::object();
  return {{"node", "node4"}, {"mode", "wait"}};  // replace
}

// Today's rules: a user acts on their own steps, root and SlurmUser on all;
// node operations are for root and SlurmUser only.
std::string expected(const std::string& op, uid_t caller, ar::StepState state) {
  const bool privileged = caller == kRoot || caller == kSlurmUser;
  const bool owns = caller == kOwner || privileged;
  if (op == "hello" || op == "status" || op == "events") return "ok";
  if (op == "heartbeat" || op == "replace" || op == "nodes" || op == "pause" || op == "unpause" ||
      op == "resume_actions")
    return privileged ? "ok" : "forbidden";
  // Another user's run is answered as an unknown one.
  if (!owns) return op == "verdict" || op == "cancel" ? "not_found" : "forbidden";
  // One protected launch per job: a second one waits for the first's verdict.
  if (op == "register") return state == ar::StepState::decided ? "ok" : "bad_request";
  return "ok";  // verdict, cancel
}

}  // namespace

TEST_CASE("a heartbeat is taken only from its node's address, and only once the nodes are known",
          "[service][origin]") {
  ServiceRig rig;
  const json node2{{"node", "node2"}};
  auto reply = rig.ask("heartbeat", node2, kRoot, "127.0.0.11");
  CHECK(outcome(reply) == "forbidden");
  CHECK_THAT(reply["error"]["message"].get<std::string>(),
             Catch::StartsWith("a heartbeat for node2 from 127.0.0.11, which is not the node's "
                               "address: node2 is at 127.0.0.12 (NodeAddr)"));
  CHECK(outcome(rig.ask("heartbeat", node2, kRoot, "127.0.0.12")) == "ok");
  // A keeper that has not looked at the nodes yet.
  ar::NodeKeeper fresh(*rig.store, rig.config, rig.slurm, rig.clock, rig.prober, rig.runner);
  ar::Service service(
      *rig.store, rig.slurm, rig.clock, [] {}, rig.reports, *rig.verdicts, &fresh, &rig.config);
  const auto request = ar::proto::parse_request(ar::proto::make_request(8, "heartbeat", node2));
  reply = json::parse(service.handle(request, kRoot, "127.0.0.12"));
  CHECK(outcome(reply) == "unavailable");
  CHECK(reply["error"]["message"] == "the controller has not loaded the nodes from slurmctld yet");
}

TEST_CASE("each operation by each caller for a step in each state", "[service]") {
  const std::vector<std::string> ops{"hello",   "register", "status",    "events",
                                     "verdict", "cancel",   "heartbeat", "replace",
                                     "nodes",   "pause",    "unpause",   "resume_actions"};
  for (const auto state : {ar::StepState::registered, ar::StepState::ended,
                           ar::StepState::repairing, ar::StepState::decided})
    for (const auto caller : {kOwner, kOther, kRoot, kSlurmUser})
      for (const auto& op : ops) {
        ServiceRig rig;
        rig.put_step(state);
        const auto reply = rig.ask(op, fields_of(op), caller);
        INFO(op << " by " << caller_name(caller) << " for a step "
                << std::string(ar::name_of(state)) << ": " << reply.dump());
        CHECK(outcome(reply) == expected(op, caller, state));
        CHECK(reply["id"] == 7);
      }
}

TEST_CASE("status and events show a user only their own steps", "[service]") {
  ServiceRig rig;
  rig.put_step(ar::StepState::registered);
  for (const auto caller : {kOwner, kRoot, kSlurmUser}) {
    INFO(caller_name(caller));
    CHECK(rig.ask("status", json::object(), caller)["result"]["steps"].size() == 1);
    CHECK(rig.ask("events", json::object(), caller)["result"]["events"].size() == 1);
  }
  CHECK(rig.ask("status", json::object(), kOther)["result"]["steps"].empty());
  CHECK(rig.ask("events", json::object(), kOther)["result"]["events"].empty());
}

TEST_CASE("verdict answers by the step's state", "[service]") {
  const std::vector<std::pair<ar::StepState, std::string>> table{
      {ar::StepState::registered, "none"},
      {ar::StepState::ended, "wait"},
      {ar::StepState::repairing, "wait"},
      {ar::StepState::decided, "give_up"}};
  for (const auto& [state, verdict] : table) {
    ServiceRig rig;
    rig.put_step(state);
    const auto reply = rig.ask("verdict", fields_of("verdict"), kOwner);
    INFO(reply.dump());
    CHECK(reply["result"]["verdict"] == verdict);
  }
  ServiceRig rig;
  rig.put_step(ar::StepState::repairing);
  CHECK(rig.ask("verdict", fields_of("verdict"), kOwner)["result"]["message"] ==
        "repairing the allocation (node_out)");
}

TEST_CASE("each verdict request says when the step's srun last asked", "[service]") {
  ServiceRig rig;
  rig.put_step(ar::StepState::registered);
  CHECK_FALSE(rig.reports.asks.last("r#0"));
  rig.ask("verdict", fields_of("verdict"), kOwner);
  CHECK(rig.reports.asks.last("r#0") == rig.clock.now());
  rig.clock.advance(1s);
  rig.ask("verdict", fields_of("verdict"), kOwner);
  CHECK(rig.reports.asks.last("r#0") == rig.clock.now());
}

TEST_CASE("cancel decides an undecided step and keeps a decided one's verdict", "[service]") {
  for (const auto state : {ar::StepState::registered, ar::StepState::repairing}) {
    ServiceRig rig;
    rig.put_step(state);
    CHECK(rig.ask("cancel", fields_of("cancel"), kOwner)["result"]["verdict"] == "cancelled");
    CHECK(rig.store->find("r", 0)->verdict == ar::Verdict::cancelled);
    CHECK(rig.wakes == 1);
  }
  ServiceRig rig;
  rig.put_step(ar::StepState::decided);
  CHECK(rig.ask("cancel", fields_of("cancel"), kOwner)["result"]["verdict"] == "give_up");
  CHECK(rig.wakes == 0);
}

TEST_CASE("another user's refused request changes nothing", "[service]") {
  ServiceRig rig;
  rig.put_step(ar::StepState::registered);
  const auto events = rig.store->events(std::nullopt, 0).size();
  CHECK(outcome(rig.ask("cancel", fields_of("cancel"), kOther)) == "not_found");
  CHECK(outcome(rig.ask("verdict", {{"run_id", "r"}, {"attempt", 0}, {"ended", true}}, kOther)) ==
        "not_found");
  CHECK(outcome(rig.ask("replace", fields_of("replace"), kOther)) == "forbidden");
  CHECK(rig.store->find("r", 0)->state == ar::StepState::registered);
  CHECK(rig.store->events(std::nullopt, 0).size() == events);
  CHECK(rig.slurm.updates.empty());
}

TEST_CASE("only a step slurmctld lists in the job may be registered", "[service][trust]") {
  ServiceRig rig;
  const auto ghost = rig.ask("register", ServiceRig::registration("ghost", 99), kOwner);
  CHECK(outcome(ghost) == "not_found");
  CHECK(ghost["error"]["message"] == "slurmctld lists no step 10.99 (with nodes) in job 10");
  // The batch script, the extern step, an interactive step: not srun's.
  for (const std::uint32_t special : {0xfffffffbU, 0xfffffffcU, 0xfffffffaU, 0xfffffffdU}) {
    rig.slurm.add_step(10, special, "node1");
    const auto reply = rig.ask("register", ServiceRig::registration("s", special), kOwner);
    CHECK(outcome(reply) == "bad_request");
    CHECK(reply["error"]["message"].get<std::string>().starts_with(
        fmt::format("step 10.{} is not an srun step", special)));
  }
  CHECK(rig.store->steps(std::nullopt).empty());
  rig.slurm.reachable = false;
  CHECK(outcome(rig.ask("register", ServiceRig::registration("r"), kOwner)) == "unavailable");
}

TEST_CASE("a registered step's nodes are slurmctld's, never the client's", "[service][trust]") {
  ServiceRig rig;
  auto fields = ServiceRig::registration("wide");
  fields["nodelist"] = "node[1-4]";
  CHECK(outcome(rig.ask("register", fields, kOwner)) == "ok");
  CHECK(rig.store->find("wide", 0)->step.nodelist == "node[1-2]");
  // A client need not send a list at all.
  auto bare = ServiceRig::registration("bare");
  bare.erase("nodelist");
  rig.slurm.add_step(10, 1, "node1");
  bare["step_id"] = 1;
  rig.ask("cancel", {{"run_id", "wide"}, {"attempt", 0}}, kOwner);
  CHECK(outcome(rig.ask("register", bare, kOwner)) == "ok");
  CHECK(rig.store->find("bare", 0)->step.nodelist == "node1");
}

TEST_CASE("while slurmctld cannot say who SlurmUser is a refusal is unavailable not forbidden",
          "[service]") {
  ServiceRig rig;
  rig.put_step(ar::StepState::registered);
  rig.slurm.reachable = false;
  const auto nodes = rig.ask("nodes", json::object(), kSlurmUser);
  CHECK(outcome(nodes) == "unavailable");
  CHECK(nodes["error"]["message"].get<std::string>().starts_with(
      "nodes is for root and SlurmUser, not uid 64030, and slurmctld cannot say whether uid 64030 "
      "is SlurmUser: "));
  CHECK(outcome(rig.ask("cancel", fields_of("cancel"), kOther)) == "unavailable");
  CHECK(rig.store->find("r", 0)->state == ar::StepState::registered);
  CHECK(outcome(rig.ask("nodes", json::object(), kRoot)) == "ok");
  CHECK(outcome(rig.ask("verdict", fields_of("verdict"), kOwner)) == "ok");
  rig.slurm.reachable = true;  // once slurmctld answers, the refusal is not_found again
  CHECK(outcome(rig.ask("cancel", fields_of("cancel"), kOther)) == "not_found");
  CHECK(outcome(rig.ask("nodes", json::object(), kSlurmUser)) == "ok");
}

TEST_CASE("nodes lists at most kMaxNodesListed heartbeats, those heard longest ago, or the named",
          "[service]") {
  ServiceRig rig;
  const unsigned count = ar::proto::kMaxNodesListed + 100;
  for (unsigned i = 1; i <= count; ++i) {
    ar::slurm::NodeInfo n;
    n.name = "hb" + std::to_string(i);
    n.address = fmt::format("127.1.{}.{}", i / 250, i % 250 + 1);
    rig.slurm.nodes[n.name] = n;
  }
  ar::NodeKeeper::NodeMap nodes;
  const auto listed = rig.slurm.load_nodes();
  for (const auto& n : listed) nodes[n.name] = &n;
  rig.keeper->tick(nodes, {});
  // hb1 heard first, hb600 last.
  for (unsigned i = 1; i <= count; ++i) {
    const auto& n = rig.slurm.nodes.at("hb" + std::to_string(i));
    REQUIRE(outcome(rig.ask("heartbeat", {{"node", n.name}}, kRoot, n.address)) == "ok");
    rig.clock.advance(10ms);
  }
  auto reply = rig.ask("nodes", json::object(), kRoot);
  REQUIRE(outcome(reply) == "ok");
  const auto& heard = reply["result"]["heartbeats"];
  CHECK(heard.size() == ar::proto::kMaxNodesListed);
  CHECK(heard.contains("hb1"));
  CHECK(heard.contains("hb500"));
  CHECK_FALSE(heard.contains("hb501"));
  CHECK(reply["result"]["heartbeats_left_out"] == 100);
  CHECK(reply.dump().size() < ar::proto::kMaxMessageBytes);
  // Named: those alone, heard or not.
  reply = rig.ask("nodes", {{"nodes", {"hb600", "node3"}}}, kRoot);
  CHECK(reply["result"]["heartbeats"] == json{{"hb600", 0.01}});  // the clock moved on after it
  CHECK_FALSE(reply["result"].contains("heartbeats_left_out"));
  json many = json::array();
  for (unsigned i = 1; i <= ar::proto::kMaxNodesListed + 1; ++i)
    many.push_back("hb" + std::to_string(i));
  reply = rig.ask("nodes", {{"nodes", many}}, kRoot);
  CHECK(outcome(reply) == "bad_request");
  CHECK(reply["error"]["message"] == "field 'nodes' has more than 500 items");
  reply = rig.ask("nodes", {{"nodes", {"hb1", "no such;node"}}}, kRoot);
  CHECK(outcome(reply) == "bad_request");
  CHECK(reply["error"]["message"] == "field 'node': 'no such;node' is not a node name");
}

TEST_CASE("registering needs a job Slurm knows and a reachable slurmctld", "[service]") {
  ServiceRig rig;
  auto fields = ServiceRig::registration("r");
  fields["job_id"] = 11;
  CHECK(outcome(rig.ask("register", fields, kOwner)) == "not_found");
  rig.slurm.reachable = false;
  CHECK(outcome(rig.ask("register", ServiceRig::registration("r"), kOwner)) == "unavailable");
}

TEST_CASE("a run belongs to the uid that registered it first", "[service]") {
  ServiceRig rig;
  rig.put_step(ar::StepState::decided);
  rig.slurm.add_job(20, kOther, {"node3"});
  rig.slurm.add_step(20, 0, "node3");
  auto fields = ServiceRig::registration("r");
  fields["job_id"] = 20;
  fields["attempt"] = 1;
  const auto reply = rig.ask("register", fields, kOther);
  CHECK(outcome(reply) == "forbidden");
  CHECK(reply["error"]["message"] == "run 'r' cannot be registered for job 20 (of uid " +
                                         std::to_string(kOther) + "): choose another run id");
}

namespace {

// `count` decided steps of uid kOwner in jobs 100.., each with an argv of
// `argv_bytes` bytes (one protected run per job at a time).
void add_decided_steps(ServiceRig& rig, int count, std::size_t argv_bytes) {
  for (int i = 0; i < count; ++i) {
    ar::proto::StepRegistration step;
    step.job_id = 100 + static_cast<std::uint32_t>(i);
    step.run_id = fmt::format("run{}", i);
    step.argv = {"srun", std::string(argv_bytes, 'x')};
    step.nodelist = "node1";
    REQUIRE(rig.store->register_step(step, kOwner) == ar::Store::Insert::created);
  }
}

}  // namespace

TEST_CASE("status comes in pages within the line limit and the cursor reaches every step",
          "[service][limits]") {
  ServiceRig rig;
  add_decided_steps(rig, 30, 15000);  // 450 KB of command lines
  std::set<std::string> seen;
  json request = json::object();
  for (int page = 0; page < 30; ++page) {
    const auto reply = rig.ask("status", request, kRoot);
    REQUIRE(outcome(reply) == "ok");
    CHECK(reply.dump().size() < ar::proto::kMaxMessageBytes);
    for (const auto& s : reply["result"]["steps"]) CHECK(seen.insert(s["run_id"]).second);
    if (!reply["result"].contains("next")) break;
    request["before"] = reply["result"]["next"];
  }
  CHECK(seen.size() == 30);
}

TEST_CASE("status and events take a limit of 1-1000 rows", "[service][limits]") {
  ServiceRig rig;
  add_decided_steps(rig, 7, 10);
  const auto five = rig.ask("status", {{"limit", 5}}, kOwner);
  CHECK(five["result"]["steps"].size() == 5);
  CHECK(five["result"]["steps"][0]["run_id"] == "run6");  // newest first
  const auto rest = rig.ask("status", {{"before", five["result"]["next"]}}, kOwner);
  CHECK(rest["result"]["steps"].size() == 2);
  CHECK_FALSE(rest["result"].contains("next"));
  for (const auto& op : {"status", "events"}) {
    const auto zero = rig.ask(op, {{"limit", 0}}, kOwner);
    CHECK(outcome(zero) == "bad_request");
    CHECK(zero["error"]["message"] == "field 'limit' must be 1-1000, got 0");
    CHECK(outcome(rig.ask(op, {{"limit", 1001}}, kOwner)) == "bad_request");
  }
  CHECK(outcome(rig.ask("status", {{"before", -1}}, kOwner)) == "bad_request");
  CHECK(outcome(rig.ask("events", {{"after", "x"}}, kOwner)) == "bad_request");
}

TEST_CASE("events come in pages of at most 1000 and the cursor reaches every one",
          "[service][limits]") {
  ServiceRig rig;
  rig.put_step(ar::StepState::registered);
  const auto step = rig.store->find("r", 0).value();
  for (int i = 0; i < 2500; ++i)
    rig.store->add_event(step, {ar::EventKind::error, std::string(300, 'e')});
  std::size_t total = 0;
  json request = json::object();
  int pages = 0;
  for (; pages < 100; ++pages) {
    const auto reply = rig.ask("events", request, kOwner);
    REQUIRE(outcome(reply) == "ok");
    CHECK(reply.dump().size() < ar::proto::kMaxMessageBytes);
    CHECK(reply["result"]["events"].size() <= 1000);
    total += reply["result"]["events"].size();
    if (!reply["result"].contains("next")) break;
    request["after"] = reply["result"]["next"];
  }
  CHECK(total == 2501);  // and the registration's own
  CHECK(pages > 3);      // 300-byte details: about 170 to a page
}

TEST_CASE("a registration's command line is bounded and stored details are cut",
          "[service][limits]") {
  ServiceRig rig;
  auto fields = ServiceRig::registration("big");
  fields["argv"] = {"srun", std::string(20000, 'a')};
  const auto reply = rig.ask("register", fields, kOwner);
  CHECK(outcome(reply) == "bad_request");
  CHECK(reply["error"]["message"] ==
        "fields 'argv' and 'cwd' hold 20008 bytes, more than the limit of 16384");
  rig.put_step(ar::StepState::registered);
  const auto step = rig.store->find("r", 0).value();
  rig.store->add_event(step, {ar::EventKind::error, std::string(100000, 'd')});
  const auto events = rig.store->events(std::nullopt, 0);
  CHECK(events.back().detail.size() == ar::Store::kMaxDetailBytes);
  CHECK(events.back().detail.ends_with("..."));
}

TEST_CASE("a step past its deadline is answered give_up by the server when nothing else acts",
          "[service][limits]") {
  // No engine runs here: the server alone must end srun's wait.
  for (const auto state : {ar::StepState::repairing, ar::StepState::ended}) {
    ServiceRig rig;
    rig.config.repair_timeout = 60s;
    rig.put_step(state);
    if (state == ar::StepState::repairing) {
      auto step = rig.store->find("r", 0).value();
      step.repair.started = rig.clock.stamp();
      REQUIRE(rig.store->save(step, std::nullopt));
    }
    rig.clock.advance(30s);
    CHECK(rig.ask("verdict", fields_of("verdict"), kOwner)["result"]["verdict"] == "wait");
    rig.clock.advance(40s);
    const auto reply = rig.ask("verdict", fields_of("verdict"), kOwner);
    CHECK(reply["result"]["verdict"] == "give_up");
    CHECK(reply["result"]["message"].get<std::string>().find("repair_timeout=60 s") !=
          std::string::npos);
    // Worded by the state the step was in.
    CHECK(reply["result"]["message"].get<std::string>().starts_with(
        state == ar::StepState::ended ? "no verdict within end_window=" : "the repair did not "));
    CHECK(rig.store->find("r", 0)->verdict == ar::Verdict::give_up);
  }
}

TEST_CASE(
    "pause and unpause are for root and SlurmUser, status shows them, and a pause survives "
    "a restart",
    "[service][guard]") {
  ServiceRig rig;
  auto reply = rig.ask("pause", {{"reason", "maintenance"}}, kOwner);
  CHECK(outcome(reply) == "forbidden");
  CHECK(reply["error"]["message"] == "pause is for root and SlurmUser, not uid 1000");
  CHECK_FALSE(rig.keeper->gate().held());
  CHECK(rig.wakes == 0);
  reply = rig.ask("pause", {{"reason", "maintenance"}}, kRoot);
  REQUIRE(outcome(reply) == "ok");
  CHECK(reply["result"]["message"] ==
        "paused by uid 0 (maintenance): the controller acts on nothing until auto-resume unpause");
  CHECK(reply["result"]["controller"]["paused"] == true);
  // Everyone sees whether the controller acts.
  reply = rig.ask("status", json::object(), kOwner);
  REQUIRE(outcome(reply) == "ok");
  const auto controller = ar::proto::GuardState::from_json(reply["result"]["controller"]);
  CHECK(controller.mode == "act");
  CHECK(controller.paused);
  CHECK_THAT(controller.paused_detail, Catch::StartsWith("by uid 0 since "));
  CHECK_THAT(controller.paused_detail, Catch::EndsWith(": maintenance"));
  CHECK_FALSE(controller.tripped);
  CHECK(controller.max_marks == 2);
  // A restarted controller is still paused.
  ar::NodeKeeper restarted(*rig.store, rig.config, rig.slurm, rig.clock, rig.prober, rig.runner);
  CHECK(restarted.gate().held() == "paused");
  CHECK(outcome(rig.ask("unpause", json::object(), kOther)) == "forbidden");
  reply = rig.ask("unpause", json::object(), kSlurmUser);
  REQUIRE(outcome(reply) == "ok");
  CHECK(reply["result"]["message"] == "unpaused by uid 64030: the controller acts again");
  CHECK(reply["result"]["controller"]["paused"] == false);
  CHECK(rig.ask("unpause", json::object(), kRoot)["result"]["message"] == "not paused");
  CHECK(rig.ask("resume_actions", json::object(), kRoot)["result"]["message"] ==
        "the circuit breaker is not tripped");
}

TEST_CASE("a pause's reason is bounded and a replace while observing is refused with the reason",
          "[service][guard]") {
  ServiceRig rig;
  auto reply = rig.ask("pause", {{"reason", std::string(300, 'x')}}, kRoot);
  CHECK(outcome(reply) == "bad_request");
  CHECK(reply["error"]["message"] == "field 'reason' is longer than 256 bytes");
  rig.config.mode = ar::ActionMode::observe;
  reply = rig.ask("replace", {{"node", "node4"}}, kRoot);
  CHECK(outcome(reply) == "unavailable");
  CHECK(reply["error"]["message"] ==
        "observe: would mark node4 FAIL (Action:Replace) and have the local provider replace it; "
        "nothing was done (mode=observe in the controller's configuration)");
  CHECK(rig.slurm.updates.empty());
}

TEST_CASE("srun hears give_up at the step's deadline while the store cannot write",
          "[service][limits]") {
  // A full state disk: neither srun's end nor the give_up can be stored.
  for (const auto state : {ar::StepState::repairing, ar::StepState::registered}) {
    INFO(std::string(ar::name_of(state)));
    ar::test::StderrCapture log;
    ServiceRig rig;
    rig.config.repair_timeout = 60s;
    rig.put_step(state);
    if (state == ar::StepState::repairing) {
      auto step = rig.store->find("r", 0).value();
      step.repair.started = rig.clock.stamp();
      REQUIRE(rig.store->save(step, std::nullopt));
    }
    ar::test::FullStore full(rig.dir.path);
    auto ended = fields_of("verdict");
    ended["ended"] = true;  // srun's step ended: it waits for the verdict
    for (int i = 0; i < 6; ++i) {
      CHECK(rig.ask("verdict", ended, kOwner)["result"]["verdict"] == "wait");
      rig.clock.advance(10s);
    }
    rig.clock.advance(5s);  // past 60 s, and the end_window of 3 s
    for (int i = 0; i < 3; ++i) {
      const auto reply = rig.ask("verdict", ended, kOwner);
      CHECK(reply["result"]["verdict"] == "give_up");
      CHECK(reply["result"]["message"].get<std::string>().find("repair_timeout=60 s") !=
            std::string::npos);
    }
    CHECK(rig.store->find("r", 0)->state == state);  // nothing was stored
    const auto text = log.text();
    CHECK(ar::test::lines_with(text, "its give_up cannot be stored") == 1);
    CHECK(ar::test::lines_with(text, "cannot store that srun says it ended") ==
          (state == ar::StepState::registered ? 1 : 0));
  }
}

TEST_CASE(
    "a relaunch given an id no newer than its attempt before's is refused and the id cancelled",
    "[service]") {
  ServiceRig rig;
  // Attempt 0 of run "r" ran as step 10.1 and was relaunched.
  REQUIRE(rig.ask("register", ServiceRig::registration("r", 1), kOwner)["ok"] == true);
  auto first = rig.store->find("r", 0).value();
  first.state = ar::StepState::decided;
  first.verdict = ar::Verdict::relaunch;
  REQUIRE(rig.store->save(first, ar::EventSpec{ar::EventKind::relaunch, "relaunch"}));
  auto attempt = [](std::uint32_t step_id) {
    auto fields = ServiceRig::registration("r", step_id);
    fields["attempt"] = 1;
    return fields;
  };
  // slurmctld, back from an older state, hands out 10.1 again (or an
  // older id): the id is cancelled, and srun is told to start again.
  for (const std::uint32_t id : {1U, 0U}) {
    rig.slurm.updates.clear();
    rig.slurm.add_step(10, id, "node[1-2]");
    const auto reply = rig.ask("register", attempt(id), kOwner);
    CHECK(outcome(reply) == "step_reused");
    CHECK(reply["error"]["message"].get<std::string>().find(fmt::format(
              "the step id 10.{}, no newer than attempt 0's step 10.1", id)) != std::string::npos);
    CHECK(rig.slurm.updates == std::vector<std::string>{fmt::format("kill_step 10.{}", id)});
    CHECK_FALSE(rig.store->find("r", 1));
  }
  const auto events = rig.ask("events", json::object(), kOwner)["result"]["events"];
  int reused = 0;
  for (const auto& event : events) reused += event["kind"] == "step_reused" ? 1 : 0;
  CHECK(reused == 2);
  // A cancel slurmctld refuses: unavailable (srun asks again).
  rig.slurm.add_step(10, 1, "node[1-2]");
  rig.slurm.refuse_kill_step = true;
  CHECK(outcome(rig.ask("register", attempt(1), kOwner)) == "unavailable");
  rig.slurm.refuse_kill_step = false;
  // The id after it: registered.
  rig.slurm.add_step(10, 2, "node[1-2]");
  rig.slurm.updates.clear();
  CHECK(outcome(rig.ask("register", attempt(2), kOwner)) == "ok");
  CHECK(rig.slurm.updates.empty());
  // A new run's first attempt is never compared.
  CHECK(outcome(rig.ask("register", ServiceRig::registration("other", 1), kOwner)) ==
        "bad_request");  // one protected step per job: not a reuse
}
