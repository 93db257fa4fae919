// The resume engine with a job that holds more nodes than its protected
// step runs on (in-job spares, --auto-resume-spares) or a step that may go
// on smaller (--auto-resume-min-nodes): the failed node is shrunk out and
// the step relaunched on the job's nodes, with no new node and no requeue,
// GRES or not. Through the fakes, as engine_policy_test.cpp.

#include "engine_rig.hpp"

namespace {

// Job 10 of uid 1000 on node1-`job_nodes`, its step 10.0 on node1-`step_nodes`
// protected as run "r" with `min_nodes`.
void protect_with_spares(Rig& rig, int job_nodes, int step_nodes, std::uint32_t min_nodes = 0,
                         bool gres = false) {
  std::vector<std::string> hosts;
  for (int i = 1; i <= job_nodes; ++i) hosts.push_back("node" + std::to_string(i));
  rig.slurm.add_job(10, 1000, hosts);
  rig.slurm.jobs.at(10).has_gres = gres;
  rig.slurm.add_step(10, 0, fmt::format("node[1-{}]", step_nodes));
  ar::proto::StepRegistration step;
  step.job_id = 10;
  step.step_id = 0;
  step.run_id = "r";
  step.argv = {"srun", "--auto-resume=1", "train"};
  step.cwd = "/w";
  step.nodelist = fmt::format("node[1-{}]", step_nodes);  // the server keeps slurmctld's
  step.min_nodes = min_nodes;
  REQUIRE(rig.store->register_step(step, 1000) == ar::Store::Insert::created);
}

// The relaunch plan the server hands srun.
ar::RelaunchPlan plan(Rig& rig) { return rig.step().repair.relaunch.value(); }

}  // namespace

TEST_CASE("a GRES job with a spare goes on in place: the failed node out, the step on the rest",
          "[engine][spares]") {
  Rig rig;
  const bool gres = GENERATE(true, false);
  CAPTURE(gres);
  protect_with_spares(rig, 5, 4, 0, gres);
  rig.slurm.nodes["node3"].down = true;
  REQUIRE(rig.tick_until([&] { return rig.step().state == StepState::decided; }));
  const auto step = rig.step();
  CHECK(step.verdict == Verdict::relaunch);
  CHECK(step.message.starts_with("relaunching run r as attempt 1 on node[1-2,4-5]"));
  CHECK(rig.slurm.updated("shrink 10 node[1-2,4-5]"));
  CHECK(rig.slurm.updated("fail node3"));
  CHECK_FALSE(rig.slurm.updated("requeue"));
  CHECK_FALSE(rig.slurm.updated("helper"));
  // DOWN once out of the job (Slurm then drops the job's abort for it), not for a requeue.
  CHECK(rig.slurm.updated("down node3 auto-resume: it is DOWN (job 10)"));
  CHECK(plan(rig) == ar::RelaunchPlan{"node[1-2,4-5]", 4, 4});
  CHECK(rig.detail("expanded") ==
        "job 10 goes on without a new node: the step runs again on 4 of its 4 healthy nodes "
        "(node[1-2,4-5])");
  CHECK_FALSE(rig.has_event("replaced"));
}

TEST_CASE("a GRES job whose spares are used up is requeued", "[engine][spares]") {
  Rig rig;
  protect_with_spares(rig, 5, 4, 0, true);
  rig.slurm.nodes["node3"].down = true;
  rig.slurm.nodes["node4"].down = true;
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::requeued);
  CHECK(rig.step().message ==
        "job 10 holds GRES, which Slurm cannot move to other nodes, and has no spare node left "
        "(its 4-node step, 3 healthy nodes in the job): job 10 was requeued and restarts from its "
        "batch script");
  CHECK_FALSE(rig.slurm.updated("shrink"));
}

TEST_CASE("a step with min_nodes goes on on fewer nodes while enough are left",
          "[engine][spares]") {
  Rig rig;
  const bool gres = GENERATE(true, false);
  CAPTURE(gres);
  protect_with_spares(rig, 4, 4, 3, gres);
  SECTION("one node lost: on 3") {
    rig.slurm.nodes["node3"].down = true;
    REQUIRE(rig.tick_until([&] { return rig.step().state == StepState::decided; }));
    CHECK(rig.step().verdict == Verdict::relaunch);
    CHECK(plan(rig) == ar::RelaunchPlan{"node[1-2,4]", 3, 3});
    CHECK(rig.detail("expanded") ==
          "job 10 goes on without a new node: the step runs again on 3 of its 3 healthy nodes "
          "(node[1-2,4]), 1 fewer than before (--auto-resume-min-nodes=3)");
    CHECK_FALSE(rig.slurm.updated("helper"));
  }
  SECTION("below min_nodes: requeued (GRES) or a replacement") {
    rig.slurm.nodes["node3"].down = true;
    rig.slurm.nodes["node4"].down = true;
    rig.engine->tick();
    if (gres) {
      CHECK(rig.step().verdict == Verdict::requeued);
      CHECK(rig.step().message.starts_with(
          "job 10 holds GRES, which Slurm cannot move to other nodes, and has no spare node left "
          "(its 4-node step, 2 healthy nodes in the job, --auto-resume-min-nodes=3)"));
    } else {
      CHECK(rig.step().phase == RepairPhase::expanded);
      CHECK(rig.slurm.updated("helper"));
    }
  }
}

TEST_CASE("a spare of the job that fails while the step runs leaves the job, the step runs on",
          "[engine][spares]") {
  Rig rig;
  protect_with_spares(rig, 5, 4, 0, true);
  rig.slurm.nodes["node5"].not_responding = true;
  rig.engine->tick();
  const auto step = rig.step();
  CHECK(step.state == StepState::registered);
  CHECK(rig.slurm.updated("shrink 10 node[1-4]"));
  CHECK(rig.slurm.updated("fail node5"));
  CHECK_FALSE(rig.slurm.updated("kill_step"));
  CHECK(rig.detail("node_out") ==
        "node5 of job 10, which the protected step does not run on, failed (node5: its slurmd is "
        "not responding): out of the job (now on node[1-4]) before Slurm sees it DOWN; set DOWN "
        "once out of it; step 10.0 runs on");
  CHECK(rig.slurm.updated("down node5 auto-resume: its slurmd is not responding (job 10)"));
  // Gone from the job, it is no longer looked at.
  rig.slurm.updates.clear();
  rig.engine->tick();
  CHECK(rig.slurm.updates.empty());
  SECTION("a node of the step failing then: no spare left, requeued") {
    rig.slurm.nodes["node2"].down = true;
    rig.engine->tick();
    CHECK(rig.step().verdict == Verdict::requeued);
  }
}

TEST_CASE("a spare's fault under the guard rails is said, not acted on", "[engine][spares]") {
  Rig rig;
  rig.config.mode = ar::ActionMode::observe;
  rig.start();
  protect_with_spares(rig, 5, 4);
  rig.slurm.nodes["node5"].not_responding = true;
  rig.engine->tick();
  CHECK(rig.slurm.updates.empty());
  CHECK(rig.step().state == StepState::registered);
  CHECK(rig.last_detail("would").find("mark node5 FAIL, shrink job 10 to node[1-4] (the "
                                      "protected step does not run on node5); step 10.0 runs on") !=
        std::string::npos);
}

TEST_CASE("the batch host, which no step runs on, is not shrunk out", "[engine][spares]") {
  Rig rig;
  protect_with_spares(rig, 5, 4);
  rig.slurm.jobs.at(10).batch_host = "node5";
  rig.slurm.nodes["node5"].not_responding = true;
  rig.engine->tick();
  CHECK(rig.slurm.updates.empty());
  CHECK(rig.step().state == StepState::registered);
}

TEST_CASE("a spare killed before Slurm notices is found by the probes and leaves the job",
          "[engine][spares]") {
  Rig rig;
  rig.config.probe_failures = 3;
  rig.config.probe_interval = 1000ms;
  protect_with_spares(rig, 5, 4, 0, true);
  rig.prober.dead.insert(rig.slurm.nodes.at("node5").address);
  for (int i = 0; i < 6 && !rig.slurm.updated("shrink"); ++i) {
    rig.engine->tick();
    rig.clock.advance(1s);
  }
  CHECK(rig.slurm.updated("shrink 10 node[1-4]"));
  CHECK(rig.step().state == StepState::registered);
  CHECK(rig.detail("node_out").find("its slurmd did not answer 3 probes in a row") !=
        std::string::npos);
}
