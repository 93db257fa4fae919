// The resume engine driven through the fakes (the policy: attempts, time, backoff, requeue,
// verdicts): Slurm in memory, a clock moved by hand. These pin what the engine does today; a test
// whose name says
// "(today and issue N flips it)" pins behaviour that issue changes.

#include "engine_rig.hpp"
#include "full_store.hpp"
#include "hostlist.hpp"
#include "stderr_capture.hpp"

TEST_CASE("max_attempts reached: give_up with the failed node out of the job", "[engine]") {
  Rig rig;
  rig.config.max_attempts = 1;
  rig.protect(1, 1);
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  const auto step = rig.step(1);
  CHECK(step.verdict == Verdict::give_up);
  CHECK(step.message ==
        "run r was relaunched 1 times within attempt_window=86400 s (max_attempts=1), none of "
        "them running healthy_after=1800 s; the failed node left the job");
  CHECK(rig.slurm.updated("shrink 10 node[1-2,4]"));
  CHECK_FALSE(rig.slurm.updated("helper"));
}

TEST_CASE("too little time left: give_up", "[engine]") {
  Rig rig;
  rig.protect();
  rig.slurm.jobs.at(10).end_time = rig.clock.unix_now() + 60;  // min_time_left is 120 s
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::give_up);
  CHECK(rig.step().message.starts_with("only 60 s of job 10's time limit are left"));
}

TEST_CASE("the relaunch waits for the backoff from the second relaunch on", "[engine]") {
  Rig rig;
  rig.config.backoff = 10s;
  rig.protect(1, 1);
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  CHECK(rig.step(1).phase == RepairPhase::expanded);
  rig.clock.advance(9s);
  rig.engine->tick();
  CHECK(rig.step(1).state == StepState::repairing);
  rig.clock.advance(1s);
  rig.engine->tick();
  CHECK(rig.step(1).verdict == Verdict::relaunch);
  CHECK(rig.step(1).message.ends_with("after a backoff of 10 s"));
}

TEST_CASE("the batch host failing requeues the job and sets its node DOWN", "[engine]") {
  Rig rig;
  rig.protect();
  rig.slurm.nodes["node1"].down = true;
  rig.engine->tick();
  const auto step = rig.step();
  CHECK(step.verdict == Verdict::requeued);
  CHECK(step.message ==
        "the batch host node1 failed: job 10 was requeued and restarts from its batch script");
  CHECK(rig.slurm.updated("requeue 10"));
  CHECK(rig.slurm.updated("down node1 auto-resume: failed under job 10"));
  CHECK_FALSE(rig.slurm.updated("shrink"));
}

TEST_CASE(
    "a GRES job with no spare left is requeued and with --no-requeue or under salloc it gives up, "
    "its failed node set FAIL for no other job to take",
    "[engine]") {
  Rig rig;
  rig.protect();
  auto& job = rig.slurm.jobs.at(10);
  job.has_gres = true;
  SECTION("batch, requeue allowed") {
    rig.slurm.nodes["node3"].down = true;
    rig.engine->tick();
    CHECK(rig.step().verdict == Verdict::requeued);
    CHECK(rig.step().message ==
          "job 10 holds GRES, which Slurm cannot move to other nodes, and has no spare node left "
          "(its 4-node step, 3 healthy nodes in the job): job 10 was requeued and restarts from "
          "its batch script");
    CHECK(rig.slurm.updated("down node3"));
  }
  SECTION("--no-requeue") {
    job.requeue = false;
    rig.slurm.nodes["node3"].down = true;
    rig.engine->tick();
    CHECK(rig.step().verdict == Verdict::give_up);
    CHECK(rig.step().message.ends_with("; the job was submitted with --no-requeue"));
    CHECK(rig.slurm.updated("kill_step 10.0"));
    CHECK(rig.slurm.updated("fail node3 auto-resume: "));
    CHECK_FALSE(rig.slurm.updated("requeue"));
    CHECK_FALSE(rig.slurm.updated("shrink"));
  }
  SECTION("salloc") {
    job.batch = false;
    rig.slurm.nodes["node3"].down = true;
    rig.engine->tick();
    CHECK(rig.step().verdict == Verdict::give_up);
    CHECK(rig.step().message.ends_with("; a salloc job cannot be requeued"));
    CHECK(rig.slurm.updated("fail node3 auto-resume: "));
  }
}

TEST_CASE("the job ending or requeued by Slurm decides the step", "[engine]") {
  Rig rig;
  rig.protect();
  SECTION("gone") {
    rig.slurm.jobs.erase(10);
    rig.engine->tick();
    CHECK(rig.step().verdict == Verdict::cancelled);
    CHECK(rig.step().message == "job 10 is gone");
  }
  SECTION("requeued by Slurm") {
    auto& job = rig.slurm.jobs.at(10);
    job.running = false;
    job.pending = true;
    job.restart_count = 1;
    rig.engine->tick();
    CHECK(rig.step().verdict == Verdict::requeued);
  }
  SECTION("suspended: nothing happens") {
    rig.slurm.jobs.at(10).suspended = true;
    rig.slurm.nodes["node3"].down = true;
    rig.engine->tick();
    CHECK(rig.step().state == StepState::registered);
  }
}

TEST_CASE("the job ending during a repair cancels the step and its helpers", "[engine]") {
  Rig rig;
  rig.protect();
  rig.fault_with_pending_helper();
  // Another user's job that happens to bear the helpers' name.
  rig.slurm.add_job(30, 2000, {"node6"}).name = "auto-resume-expand-10";
  rig.slurm.jobs.at(10).running = false;
  rig.slurm.jobs.at(10).state = "CANCELLED";
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::cancelled);
  CHECK(rig.step().message == "job 10 ended (CANCELLED) during the repair");
  CHECK(rig.slurm.updated("cancel 5000"));
  CHECK_FALSE(rig.slurm.updated("cancel 30"));
  CHECK(rig.slurm.jobs.contains(30));
}

TEST_CASE("an ended step with no fault within end_window gets no_fault", "[engine]") {
  Rig rig;
  rig.protect();
  auto step = rig.step();
  REQUIRE(rig.store->mark_ended(step, rig.clock.stamp(), {EventKind::ended, "ended"}));
  rig.engine->tick();
  CHECK(rig.step().state == StepState::ended);
  rig.clock.advance(3s);
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::no_fault);
}

TEST_CASE("a step Slurm forgot for over 15 s while registered is cancelled", "[engine]") {
  Rig rig;
  rig.protect();
  rig.slurm.steps.clear();
  rig.engine->tick();
  rig.clock.advance(15s);
  rig.engine->tick();
  CHECK(rig.step().state == StepState::registered);
  rig.clock.advance(1s);
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::cancelled);
  CHECK(rig.step().message == "step 10.0 is gone and its srun never asked for a verdict");
}

TEST_CASE("a step Slurm forgot while its srun still asks is not written off", "[engine]") {
  // slurmctld SIGKILLed and back from its last saved state, which lacks a
  // step started since: the step and its srun run on.
  Rig rig;
  auto& asks = rig.reports.asks;  // the server's, as it hears srun
  rig.protect();
  rig.slurm.steps.clear();
  for (int second = 0; second < 30; ++second) {
    asks.asked("r#0", rig.clock.now());
    rig.engine->tick();
    rig.clock.advance(1s);
  }
  CHECK(rig.step().state == StepState::registered);
  // Its srun stops asking (killed): the step is over once the grace passes.
  rig.clock.advance(16s);
  rig.engine->tick();
  rig.clock.advance(16s);
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::cancelled);
}

TEST_CASE("a step cancelled by its srun mid-repair stays cancelled", "[engine]") {
  Rig rig;
  rig.protect();
  rig.fault_with_pending_helper();
  REQUIRE(rig.store->cancel(rig.step(), "cancelled by its srun"));
  rig.slurm.start_job(5000);
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::cancelled);
  CHECK_FALSE(rig.slurm.updated("merge"));
}

TEST_CASE("slurmctld unreachable: the step waits and goes on once it is back", "[engine]") {
  Rig rig;
  rig.protect();
  rig.slurm.reachable = false;
  // The engine's loop logs what a tick throws and tries again.
  CHECK_THROWS_AS(rig.engine->tick(), ar::slurm::SlurmError);
  CHECK(rig.step().state == StepState::registered);
  rig.slurm.reachable = true;
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::relaunch);
}

TEST_CASE("decided steps and events older than retention are forgotten", "[engine][limits]") {
  Rig rig;
  rig.config.retention = std::chrono::hours{24};
  rig.protect();
  rig.slurm.jobs.at(10).running = false;
  rig.slurm.jobs.at(10).state = "COMPLETED";
  rig.engine->tick();
  REQUIRE(rig.step().state == StepState::decided);
  rig.clock.advance(std::chrono::hours{23});
  rig.engine->tick();
  CHECK(rig.store->find("r", 0));  // within retention
  rig.clock.advance(std::chrono::hours{2});
  rig.engine->tick();
  CHECK_FALSE(rig.store->find("r", 0));
  CHECK(rig.store->events(std::nullopt, 0).empty());
}

TEST_CASE("a repair ends within repair_timeout while slurmctld cannot be asked",
          "[engine][limits]") {
  Rig rig(4);  // no idle node: the repair waits at node_out
  rig.config.repair_timeout = 60s;
  rig.protect();
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  REQUIRE(rig.step().phase == RepairPhase::node_out);
  rig.slurm.reachable = false;  // every call to slurmctld fails (the last node list goes on)
  rig.clock.advance(30s);
  rig.engine->tick();
  CHECK(rig.step().state == StepState::repairing);
  rig.clock.advance(31s);
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::give_up);
  CHECK(rig.step().message ==
        "the repair did not finish within repair_timeout=60 s (it got to "
        "'node_out')");
  // What is left of the step is cancelled once slurmctld answers again.
  const auto kills = [&] {
    return std::count(rig.slurm.updates.begin(), rig.slurm.updates.end(), "kill_step 10.0");
  };
  const auto before = kills();
  rig.clock.advance(1s);
  rig.engine->tick();
  CHECK(kills() == before);
  rig.slurm.reachable = true;
  rig.engine->tick();
  CHECK(kills() == before + 1);
  rig.engine->tick();
  CHECK(kills() == before + 1);  // once
}

TEST_CASE(
    "a repair past repair_timeout while the store cannot write is given up once and said once",
    "[engine][limits]") {
  ar::test::StderrCapture log;
  Rig rig(4);  // no idle node: the repair waits at node_out
  rig.config.repair_timeout = 60s;
  rig.protect();
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  REQUIRE(rig.step().phase == RepairPhase::node_out);
  auto kills = [&] {
    return std::count(rig.slurm.updates.begin(), rig.slurm.updates.end(), "kill_step 10.0");
  };
  {
    ar::test::FullStore full(rig.dir.path);
    for (int i = 0; i < 10; ++i) {
      rig.clock.advance(10s);
      rig.engine->tick();
    }
    CHECK(rig.step().state == StepState::repairing);  // the give_up could not be stored
    CHECK(kills() == 2);                              // the take-out's, then the deadline's
    CHECK(ar::test::lines_with(log.text(), "its give_up cannot be stored") == 1);
  }
  rig.engine->tick();  // the store writes again
  CHECK(rig.step().verdict == Verdict::give_up);
  CHECK(kills() == 2);
  CHECK(ar::test::lines_with(log.text(), "its give_up is stored now") == 1);
}

namespace {

// Run "r" relaunched as `attempt` (step `attempt` of job 10, on the job's
// nodes now), as srun registers it.
void relaunched(Rig& rig, std::uint32_t attempt) {
  const auto nodes = ar::slurm::compress_hostlist(rig.slurm.jobs.at(10).hosts);
  rig.slurm.add_step(10, attempt, nodes);
  ar::proto::StepRegistration step;
  step.job_id = 10;
  step.step_id = attempt;
  step.run_id = "r";
  step.attempt = attempt;
  step.argv = {"srun", "--auto-resume=1", "train"};
  step.cwd = "/w";
  step.nodelist = nodes;
  REQUIRE(rig.store->register_step(step, 1000) == ar::Store::Insert::created);
}

// After `ran`, the last node of attempt `attempt` fails; its verdict once
// the repair is over (the backoff passes in steps of 1 s).
ar::StoredStep fault_after(Rig& rig, std::uint32_t attempt, std::chrono::milliseconds ran) {
  // Many faults in an hour on a small cluster: the circuit breaker's
  // default (2 marks an hour here) is not what these tests are about.
  rig.config.max_marks_per_hour = ar::ActionLimit{1000, false};
  rig.config.max_replacements_per_hour = ar::ActionLimit{1000, false};
  rig.clock.advance(ran);
  rig.slurm.nodes[rig.slurm.jobs.at(10).hosts.back()].down = true;
  for (int i = 0; i < 700 && rig.step(attempt).state != StepState::decided; ++i) {
    rig.engine->tick();
    rig.clock.advance(1s);
  }
  return rig.step(attempt);
}

}  // namespace

TEST_CASE("a long run with more faults than max_attempts spread over the window goes on",
          "[engine][budget]") {
  Rig rig(12);
  rig.config.attempt_window = 1h;
  rig.config.healthy_after = 0ms;  // the window alone counts
  rig.config.backoff = 0ms;
  rig.protect();
  // Five faults, 25 min apart: never more than 3 relaunches within an hour.
  for (std::uint32_t attempt = 0; attempt < 5; ++attempt) {
    INFO("attempt " << attempt);
    const auto step = fault_after(rig, attempt, 25min);
    REQUIRE(step.verdict == Verdict::relaunch);
    relaunched(rig, attempt + 1);
  }
}

TEST_CASE("a fourth fault within attempt_window gives up, naming the budget", "[engine][budget]") {
  Rig rig(12);
  rig.config.attempt_window = 1h;
  rig.config.backoff = 0ms;
  rig.protect();
  for (std::uint32_t attempt = 0; attempt < 3; ++attempt) {
    REQUIRE(fault_after(rig, attempt, 10min).verdict == Verdict::relaunch);
    relaunched(rig, attempt + 1);
  }
  const auto step = fault_after(rig, 3, 10min);
  CHECK(step.verdict == Verdict::give_up);
  CHECK(step.message ==
        "run r was relaunched 3 times within attempt_window=3600 s (max_attempts=3), none of "
        "them running healthy_after=1800 s; the failed node left the job");
}

TEST_CASE("an attempt that ran healthy_after resets the count and the backoff",
          "[engine][budget]") {
  Rig rig(12);
  rig.config.backoff = 10s;
  rig.protect();
  // Attempts 0 and 1 fail quickly: the second relaunch waits 10 s.
  REQUIRE(fault_after(rig, 0, 1min).message.find("backoff") == std::string::npos);
  relaunched(rig, 1);
  REQUIRE(fault_after(rig, 1, 1min).message.ends_with("after a backoff of 10 s"));
  relaunched(rig, 2);
  // Attempt 2 runs 30 min (healthy_after): its relaunch is a first one again.
  auto step = fault_after(rig, 2, 30min);
  CHECK(step.verdict == Verdict::relaunch);
  CHECK(step.message.find("backoff") == std::string::npos);
  relaunched(rig, 3);
  // Quick faults again: the backoff grows from the start, and three more
  // relaunches fit in the budget (2 within the window before the reset).
  step = fault_after(rig, 3, 1min);
  CHECK(step.message.ends_with("after a backoff of 10 s"));
  relaunched(rig, 4);
  step = fault_after(rig, 4, 1min);
  CHECK(step.message.ends_with("after a backoff of 20 s"));
  relaunched(rig, 5);
  CHECK(fault_after(rig, 5, 1min).verdict == Verdict::give_up);
}

TEST_CASE("a wall clock step during a repair moves neither repair_timeout nor the backoff",
          "[engine][clock]") {
  const auto step_by = GENERATE(as<std::chrono::milliseconds>{}, 1h, -1h);
  INFO("the wall clock steps by " << step_by.count() << " ms");
  SECTION("repair_timeout") {
    Rig rig(4);  // no idle node: the repair waits at node_out
    rig.config.repair_timeout = 60s;
    rig.protect();
    rig.slurm.nodes["node3"].down = true;
    rig.engine->tick();
    REQUIRE(rig.step().phase == RepairPhase::node_out);
    rig.clock.step_wall(step_by);
    rig.clock.advance(60s);
    rig.engine->tick();
    CHECK(rig.step().state == StepState::repairing);
    rig.clock.advance(1s);
    rig.engine->tick();
    CHECK(rig.step().verdict == Verdict::give_up);
  }
  SECTION("the backoff") {
    Rig rig;
    rig.config.backoff = 10s;
    rig.protect(1, 1);
    rig.slurm.nodes["node3"].down = true;
    rig.engine->tick();
    REQUIRE(rig.step(1).phase == RepairPhase::expanded);
    rig.clock.step_wall(step_by);
    rig.clock.advance(9s);
    rig.engine->tick();
    CHECK(rig.step(1).state == StepState::repairing);
    rig.clock.advance(1s);
    rig.engine->tick();
    CHECK(rig.step(1).verdict == Verdict::relaunch);
  }
  SECTION("end_window") {
    Rig rig;
    rig.protect();
    auto step = rig.step();
    REQUIRE(rig.store->mark_ended(step, rig.clock.stamp(), {EventKind::ended, "ended"}));
    rig.clock.step_wall(step_by);
    rig.engine->tick();
    CHECK(rig.step().state == StepState::ended);
    rig.clock.advance(3s);
    rig.engine->tick();
    CHECK(rig.step().verdict == Verdict::no_fault);
  }
}

TEST_CASE("a controller restarted after a reboot of its host counts the repair by wall time",
          "[engine][clock]") {
  Rig rig(4);
  rig.config.repair_timeout = 60s;
  rig.protect();
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  REQUIRE(rig.step().phase == RepairPhase::node_out);
  rig.clock.reboot(30s);
  rig.start();
  rig.engine->tick();
  CHECK(rig.step().state == StepState::repairing);
  rig.clock.advance(31s);
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::give_up);
}
