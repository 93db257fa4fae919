// The step daemons' reports of their tasks' exit (tasks_exited): parsed
// field by field, taken only from root and SlurmUser, counted only for a
// node of a protected step not yet decided; a step every node of which
// reported that its tasks exited 0 gets no_fault as soon as srun reports
// its end, without end_window; any other step waits end_window as before.

#include <fmt/core.h>

#include <catch2/catch.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "callers.hpp"
#include "engine_rig.hpp"
#include "resume/exit_reports.hpp"
#include "server/service.hpp"

namespace {

namespace proto = ar::proto;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;
using proto::json;

using ar::test::kOther;
using ar::test::kOwner;
using ar::test::kRoot;
using ar::test::kSlurmUser;
using ar::test::outcome;

// node1-4 are the step's nodes 0-3.
json report(const std::string& node, std::uint32_t failed = 0) {
  const int node_id = node.size() == 5 && node.starts_with("node") ? node[4] - '1' : 0;
  return {{"job_id", 10}, {"step_id", 0},       {"run_id", "r"}, {"attempt", 0},
          {"node", node}, {"node_id", node_id}, {"tasks", 2},    {"failed", failed}};
}

// The engine's rig (job 10 on node1-4, step 10.0 protected as run "r")
// with the server's operations over the same store.
struct ReportRig : ar::test::EngineRig {
  std::unique_ptr<ar::Service> service;
  int wakes = 0;

  ReportRig() {
    service = std::make_unique<ar::Service>(
        *store, slurm, clock, [this] { ++wakes; }, reports, *verdicts, keeper.get(), &config);
    protect();
  }
  json ask(const std::string& op, json fields, uid_t caller) {
    const auto request = proto::parse_request(proto::make_request(7, op, std::move(fields)));
    return json::parse(service->handle(request, caller, "127.0.0.11"));
  }
  // srun asks for the verdict after its step ended.
  json ended() {
    return ask("verdict", {{"run_id", "r"}, {"attempt", 0}, {"ended", true}}, kOwner)["result"];
  }
  json tell(const std::string& node, std::uint32_t failed = 0) {
    return ask("tasks_exited", report(node, failed), kRoot);
  }
};

}  // namespace

TEST_CASE("a tasks_exited report names the field it finds wrong", "[protocol][tasks_exited]") {
  const auto valid = report("node1", 1);
  const auto parsed = proto::TasksExitedRequest::from_json(valid);
  CHECK(parsed.to_json() == valid);
  CHECK(parsed.attempt == 0U);
  CHECK_FALSE(parsed.clean());
  // run_id and attempt are optional (a step daemon may not know them).
  auto bare = valid;
  bare.erase("run_id");
  bare.erase("attempt");
  const auto without = proto::TasksExitedRequest::from_json(bare);
  CHECK(without.run_id.empty());
  CHECK_FALSE(without.attempt);
  CHECK(without.to_json() == bare);
  const std::vector<std::pair<json, std::string>> refused{
      {{{"job_id", -1}}, "field 'job_id' must be an unsigned 32-bit integer, got -1"},
      {{{"job_id", "10"}}, "field 'job_id' must be an unsigned 32-bit integer, got \"10\""},
      {{{"step_id", 4294967296LL}},
       "field 'step_id' must be an unsigned 32-bit integer, got 4294967296"},
      {{{"run_id", ""}}, "field 'run_id' must not be empty"},
      {{{"run_id", std::string(129, 'r')}}, "field 'run_id' is longer than 128 bytes"},
      {{{"run_id", 5}}, "field 'run_id' must be a string"},
      {{{"attempt", 1.5}}, "field 'attempt' must be an unsigned 32-bit integer, got 1.5"},
      {{{"node", "node1;reboot"}}, "field 'node': 'node1;reboot' is not a node name"},
      {{{"node", std::string(65, 'n')}}, "field 'node' is longer than 64 bytes"},
      {{{"node", ""}}, "field 'node': '' is not a node name"},
      {{{"node_id", -1}}, "field 'node_id' must be an unsigned 32-bit integer, got -1"},
      {{{"tasks", 0}}, "field 'tasks' must be at least 1, got 0"},
      {{{"tasks", -2}}, "field 'tasks' must be an unsigned 32-bit integer, got -2"},
      {{{"failed", 3}}, "field 'failed': 3 is more than the 2 tasks"},
      {{{"failed", true}}, "field 'failed' must be an unsigned 32-bit integer, got true"}};
  for (const auto& [change, message] : refused) {
    auto body = valid;
    body.update(change);
    INFO(body.dump());
    try {
      proto::TasksExitedRequest::from_json(body);
      FAIL_CHECK("accepted");
    } catch (const proto::ProtocolError& e) {
      CHECK(e.code() == proto::code::kBadRequest);
      CHECK_THAT(e.what(), Equals(message));
    }
  }
  for (const char* field : {"job_id", "step_id", "node", "node_id", "tasks", "failed"}) {
    auto body = valid;
    body.erase(field);
    CHECK_THROWS_WITH(proto::TasksExitedRequest::from_json(body),
                      Equals(fmt::format("missing field '{}'", field)));
  }
  const auto reply = proto::TasksExitedReply::from_json({{"counted", true}, {"message", "m"}});
  CHECK(reply.counted);
  CHECK_THROWS(proto::TasksExitedReply::from_json({{"counted", "yes"}, {"message", "m"}}));
}

TEST_CASE("only root and SlurmUser may report tasks' exit: a user cannot forge a clean end",
          "[service][tasks_exited]") {
  ReportRig rig;
  for (const auto caller : {kOwner, kOther}) {
    INFO(caller);
    for (const auto& node : {"node1", "node2", "node3", "node4"}) {
      const auto reply = rig.ask("tasks_exited", report(node), caller);
      CHECK(outcome(reply) == "forbidden");
      CHECK(reply["error"]["message"] ==
            fmt::format("tasks_exited is for root and SlurmUser (the step daemons), not uid {}",
                        caller));
    }
  }
  // Even a malformed report of a user's is refused for who sent it.
  CHECK(outcome(rig.ask("tasks_exited", json::object(), kOwner)) == "forbidden");
  CHECK(rig.reports.exits.steps() == 0);
  CHECK(rig.ended()["verdict"] == "wait");
  CHECK(rig.step().state == StepState::ended);
  for (const auto caller : {kRoot, kSlurmUser}) {
    const auto reply = rig.ask("tasks_exited", report("node1"), caller);
    CHECK(outcome(reply) == "ok");
    CHECK(reply["result"]["counted"] == true);
  }
}

TEST_CASE(
    "a report of an unknown step, of a node not in the step or of a decided step counts "
    "for nothing",
    "[service][tasks_exited]") {
  ReportRig rig;
  const std::vector<std::pair<json, std::string>> unknown{
      {{{"job_id", 11}},
       "no protected step 11.0 of run 'r' is running, under repair or waiting for its "
       "verdict: nothing to count"},
      {{{"step_id", 1}},
       "no protected step 10.1 of run 'r' is running, under repair or waiting for its "
       "verdict: nothing to count"},
      {{{"step_id", 0xfffffffbU}},
       "no protected step 10.4294967291 of run 'r' is running, under repair or "
       "waiting for its verdict: nothing to count"},
      {{{"run_id", "other"}},
       "no protected step 10.0 of run 'other' is running, under repair or waiting for "
       "its verdict: nothing to count"},
      {{{"attempt", 1}},
       "no protected step 10.0 of run 'r' is running, under repair or waiting for its "
       "verdict: nothing to count"},
      {{{"node", "node5"}}, "node5 is not node 0 of step 10.0 (node[1-4]): not counted"},
      // node1's step daemon, its name taken from a node list the user set
      {{{"node", "node2"}}, "node2 is not node 0 of step 10.0 (node[1-4]): not counted"},
      {{{"node_id", 4}}, "node1 is not node 4 of step 10.0 (node[1-4]): not counted"}};
  for (const auto& [change, message] : unknown) {
    auto body = report("node1");
    body.update(change);
    const auto reply = rig.ask("tasks_exited", body, kRoot);
    INFO(reply.dump());
    CHECK(reply["result"]["counted"] == false);
    CHECK(reply["result"]["message"] == message);
  }
  CHECK(rig.reports.exits.steps() == 0);
  // Without run_id and attempt the step is found by its ids.
  auto bare = report("node1");
  bare.erase("run_id");
  bare.erase("attempt");
  CHECK(rig.ask("tasks_exited", bare, kRoot)["result"]["counted"] == true);
  // A decided step: nothing to count, and its reports are gone.
  auto step = rig.step();
  step.state = StepState::decided;
  step.verdict = Verdict::give_up;
  REQUIRE(rig.store->save(step, ar::EventSpec{EventKind::give_up, "given up"}));
  CHECK(rig.tell("node2")["result"]["counted"] == false);
  CHECK(rig.ended()["verdict"] == "give_up");
  CHECK(rig.reports.exits.steps() == 0);
}

TEST_CASE("an ended step every node of which reported its tasks exited 0 gets no_fault at once",
          "[service][engine][tasks_exited]") {
  ReportRig rig;
  for (const auto& node : {"node1", "node2", "node3", "node4"}) {
    const auto reply = rig.tell(node);
    CHECK(reply["result"]["counted"] == true);
    CHECK(reply["result"]["message"] ==
          fmt::format("{} of step 10.0: 2 tasks, 0 with a status other than 0", node));
  }
  CHECK(rig.step().state == StepState::registered);  // srun has not said it ended
  const auto verdict = rig.ended();                  // no engine tick, no time passed
  CHECK(verdict["verdict"] == "no_fault");
  const std::string message =
      "every node of step 10.0 (4 nodes) reported its tasks exited 0; srun keeps the step's own "
      "exit status";
  CHECK(verdict["message"] == message);
  CHECK(rig.step().verdict == Verdict::no_fault);
  CHECK(rig.detail("no_fault") == message);
  CHECK(rig.wakes == 0);  // nothing left for the engine to look at
  CHECK(rig.reports.exits.steps() == 0);
}

TEST_CASE("the last clean report after srun's end decides no_fault at once",
          "[service][engine][tasks_exited]") {
  ReportRig rig;
  for (const auto& node : {"node1", "node2", "node3"}) rig.tell(node);
  CHECK(rig.ended()["verdict"] == "wait");
  rig.engine->tick();
  CHECK(rig.step().state == StepState::ended);
  CHECK(rig.tell("node4")["result"]["message"] ==
        "node4 of step 10.0: 2 tasks, 0 with a status other than 0; every node reported: "
        "no_fault");
  CHECK(rig.step().verdict == Verdict::no_fault);
  CHECK(rig.ended()["verdict"] == "no_fault");
}

TEST_CASE("a step with a node that did not report, or reported a failed task, waits end_window",
          "[service][engine][tasks_exited]") {
  for (const bool fails : {false, true}) {
    INFO((fails ? "node4 reports a task that failed" : "node4 does not report"));
    ReportRig rig;
    for (const auto& node : {"node1", "node2", "node3"}) rig.tell(node);
    if (fails) CHECK(rig.tell("node4", 1)["result"]["counted"] == true);
    CHECK(rig.ended()["verdict"] == "wait");
    CHECK(rig.wakes == 1);
    rig.engine->tick();
    rig.clock.advance(2900ms);
    rig.engine->tick();
    CHECK(rig.ended()["verdict"] == "wait");
    rig.clock.advance(100ms);  // end_window (3 s) is over
    rig.engine->tick();
    CHECK(rig.step().verdict == Verdict::no_fault);
    CHECK(rig.step().message ==
          "no node of the step failed; srun keeps the step's own exit status");
    CHECK(rig.reports.exits.steps() == 0);  // forgotten once decided
  }
}

TEST_CASE("a node killed before its tasks exited still gets the step repaired",
          "[service][engine][tasks_exited]") {
  ReportRig rig;
  for (const auto& node : {"node1", "node2", "node3"}) rig.tell(node);
  rig.slurm.nodes["node4"].down = true;  // killed: it never reports
  CHECK(rig.ended()["verdict"] == "wait");
  rig.engine->tick();
  CHECK(rig.has_event("detected"));
  CHECK_THAT(rig.detail("detected"), Contains("node4"));
  CHECK(rig.step().verdict == Verdict::relaunch);  // the fakes' repair needs one look
  CHECK_FALSE(rig.has_event("no_fault"));
}

TEST_CASE("a report from a node of a step under repair is counted, until the verdict",
          "[service][engine][tasks_exited]") {
  ReportRig rig;
  rig.slurm.nodes["node3"].down = true;
  rig.slurm.lingering_steps.insert({10, 0});
  rig.slurm.step_daemons.insert({10, 0});
  rig.engine->tick();
  REQUIRE(rig.step().state == StepState::repairing);
  for (const auto& node : {"node1", "node2"}) {
    const auto reply = rig.tell(node, 2);  // SIGKILLed by the repair's cancel
    CHECK(reply["result"]["counted"] == true);
    CHECK(reply["result"]["message"] ==
          fmt::format("{} of step 10.0: 2 tasks, 2 with a status other than 0", node));
  }
  CHECK(rig.step().state == StepState::repairing);  // node4 has not reported
  rig.tell("node4", 2);
  rig.slurm.lingering_steps.insert({10, 0});
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.tell("node4")["result"]["counted"] == false);
  CHECK(rig.reports.exits.steps() == 0);
}

TEST_CASE("the reports kept are bounded: the oldest step's go first", "[tasks_exited]") {
  ar::ExitReports reports;
  const std::vector<std::string> hosts{"n1"};
  bool complete = true;
  for (std::size_t i = 0; i <= ar::ExitReports::kMaxSteps; ++i)
    complete = reports.add("s" + std::to_string(i), "n1", true, hosts) && complete;
  CHECK(complete);
  CHECK(reports.steps() == ar::ExitReports::kMaxSteps);
  CHECK_FALSE(reports.all_clean("s0", hosts));
  CHECK(reports.all_clean("s1", hosts));
  CHECK(reports.all_clean("s" + std::to_string(ar::ExitReports::kMaxSteps), hosts));
  // A node's first report stands; no hosts is never all clean.
  CHECK_FALSE(reports.add("t", "n1", false, hosts));
  CHECK_FALSE(reports.add("t", "n1", true, hosts));
  CHECK_FALSE(reports.all_clean("s1", {}));
  reports.forget("s1");
  CHECK_FALSE(reports.all_clean("s1", hosts));
}

TEST_CASE("a repair that srun hears given up at its deadline is cleared by the engine, once",
          "[service][engine][limits]") {
  // The server and the engine decide through one Verdicts: whichever finds
  // the repair past repair_timeout first, the give_up is stored once, the
  // job's AdminComment tells it, and the engine cancels the old step and
  // the pending helper job.
  for (const bool server_first : {true, false}) {
    INFO((server_first ? "srun asks first" : "the engine looks first"));
    ReportRig rig;
    rig.config.repair_timeout = 60s;
    rig.fault_with_pending_helper();  // helper job 5000 pending for node5
    const auto count = [&](const std::string& update) {
      return std::count(rig.slurm.updates.begin(), rig.slurm.updates.end(), update);
    };
    const auto kills = count("kill_step 10.0");
    rig.clock.advance(61s);
    if (!server_first) rig.engine->tick();
    const auto reply = rig.ask("verdict", {{"run_id", "r"}, {"attempt", 0}}, kOwner)["result"];
    CHECK(reply["verdict"] == "give_up");
    CHECK(reply["message"] ==
          "the repair did not finish within repair_timeout=60 s (it got to 'replaced')");
    if (server_first) {
      CHECK(count("cancel 5000") == 0);  // the server asks slurmctld nothing
      rig.engine->tick();
    }
    CHECK(rig.step().verdict == Verdict::give_up);
    CHECK(count("cancel 5000") == 1);
    CHECK(count("kill_step 10.0") == kills + 1);
    rig.engine->tick();
    rig.ask("verdict", {{"run_id", "r"}, {"attempt", 0}}, kOwner);
    CHECK(count("cancel 5000") == 1);  // once
    CHECK(std::ranges::count(rig.kinds(), "give_up") == 1);
    CHECK(rig.slurm.jobs.at(10).admin_comment.find("attempt 0: node3 failed, give_up: ") !=
          std::string::npos);
  }
}
