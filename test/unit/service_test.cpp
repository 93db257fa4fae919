// Who may do what: every operation asked by every kind of caller (the
// step's owner, another user, root, SlurmUser) for a step in each state,
// through the real Service over the fakes. These pin today's rules; a test
// whose name says "(today and issue N flips it)" pins behaviour that issue
// changes.

#include "server/service.hpp"

#include <catch2/catch.hpp>
#include <memory>

#include "fakes.hpp"

namespace {

using namespace std::chrono_literals;
using ar::proto::json;

constexpr uid_t kOwner = 1000;
constexpr uid_t kOther = 2000;
constexpr uid_t kRoot = 0;
constexpr uid_t kSlurmUser = 64030;

struct ServiceRig : ar::test::Fakes {
  std::unique_ptr<ar::Store> store;
  std::unique_ptr<ar::NodeKeeper> keeper;
  std::unique_ptr<ar::Service> service;
  int wakes = 0;

  ServiceRig() {
    slurm.add_nodes(4);
    slurm.add_job(10, kOwner, {"node1", "node2"});
    slurm.add_step(10, 0, "node[1-2]");
    config.local_restart_command = {"/bin/restart", "{node}"};
    store = std::make_unique<ar::Store>(dir.path, clock);
    keeper = std::make_unique<ar::NodeKeeper>(*store, config, slurm, clock, prober, runner);
    service = std::make_unique<ar::Service>(
        *store, slurm, clock, [this] { ++wakes; }, keeper.get());
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
      REQUIRE(store->mark_ended(step, clock.unix_now(), {ar::EventKind::ended, "ended"}));
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
  json ask(const std::string& op, json fields, uid_t caller) {
    const auto request =
        ar::proto::parse_request(ar::proto::make_request(7, op, std::move(fields)));
    return json::parse(service->handle(request, caller));
  }
};

// "ok", or the error code.
std::string outcome(const json& reply) {
  return reply["ok"] == true ? "ok" : reply["error"]["code"].get<std::string>();
}

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
  return {{"node", "node4"}, {"mode", "wait"}};  // replace
}

// Today's rules: a user acts on their own steps, root and SlurmUser on all;
// node operations are for root and SlurmUser only.
std::string expected(const std::string& op, uid_t caller, ar::StepState state) {
  const bool privileged = caller == kRoot || caller == kSlurmUser;
  const bool owns = caller == kOwner || privileged;
  if (op == "hello" || op == "status" || op == "events") return "ok";
  if (op == "heartbeat" || op == "replace" || op == "nodes") return privileged ? "ok" : "forbidden";
  if (!owns) return "forbidden";
  // One protected launch per job: a second one waits for the first's verdict.
  if (op == "register") return state == ar::StepState::decided ? "ok" : "bad_request";
  return "ok";  // verdict, cancel
}

}  // namespace

TEST_CASE("each operation by each caller for a step in each state", "[service]") {
  const std::vector<std::string> ops{"hello",  "register",  "status",  "events", "verdict",
                                     "cancel", "heartbeat", "replace", "nodes"};
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
  CHECK(outcome(rig.ask("cancel", fields_of("cancel"), kOther)) == "forbidden");
  CHECK(outcome(rig.ask("verdict", {{"run_id", "r"}, {"attempt", 0}, {"ended", true}}, kOther)) ==
        "forbidden");
  CHECK(outcome(rig.ask("replace", fields_of("replace"), kOther)) == "forbidden");
  CHECK(rig.store->find("r", 0)->state == ar::StepState::registered);
  CHECK(rig.store->events(std::nullopt, 0).size() == events);
  CHECK(rig.slurm.updates.empty());
}

TEST_CASE(
    "a user may register a step id Slurm does not list in their job (today and issue 10 flips "
    "it)",
    "[service]") {
  ServiceRig rig;
  const auto reply = rig.ask("register", ServiceRig::registration("ghost", 99), kOwner);
  CHECK(outcome(reply) == "ok");
}

TEST_CASE("a user may register a node list their job does not hold (today and issue 10 flips it)",
          "[service]") {
  ServiceRig rig;
  auto fields = ServiceRig::registration("wide");
  fields["nodelist"] = "node[1-4]";
  CHECK(outcome(rig.ask("register", fields, kOwner)) == "ok");
  CHECK(rig.store->find("wide", 0)->step.nodelist == "node[1-4]");
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
  rig.slurm.reachable = true;  // once slurmctld answers, the refusal is forbidden again
  CHECK(outcome(rig.ask("cancel", fields_of("cancel"), kOther)) == "forbidden");
  CHECK(outcome(rig.ask("nodes", json::object(), kSlurmUser)) == "ok");
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
  auto fields = ServiceRig::registration("r");
  fields["job_id"] = 20;
  fields["attempt"] = 1;
  const auto reply = rig.ask("register", fields, kOther);
  CHECK(outcome(reply) == "forbidden");
  CHECK(reply["error"]["message"] == "run 'r' belongs to uid 1000");
}
