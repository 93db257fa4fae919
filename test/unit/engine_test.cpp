// The resume engine driven through the fakes (faults, repair phases, replacements): Slurm in
// memory, a clock moved by hand. These pin what the engine does today; a test whose name says
// "(today and issue N flips it)" pins behaviour that issue changes.

#include <fmt/core.h>

#include <thread>

#include "engine_rig.hpp"

TEST_CASE("a DOWN node of a protected step is taken out and the step relaunched", "[engine]") {
  Rig rig;
  rig.protect();
  rig.engine->tick();
  CHECK(rig.step().state == StepState::registered);
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  const auto step = rig.step();
  REQUIRE(step.state == StepState::decided);
  CHECK(step.verdict == Verdict::relaunch);
  CHECK(rig.slurm.updated("fail node3 auto-resume: it is DOWN (job 10)"));
  CHECK(rig.slurm.updated("shrink 10 node[1-2,4]"));
  CHECK(rig.slurm.updated("kill_step 10.0"));
  CHECK(rig.slurm.updated("helper 5000 node5 for 10"));
  CHECK(rig.slurm.updated("merge 5000 into 10"));
  CHECK(rig.slurm.jobs.at(10).nodes == "node[1-2,4-5]");
  CHECK(step.repair.relaunch.value().nodelist == "node[1-2,4-5]");
  CHECK(step.repair.relaunch.value().num_nodes == 4);
  CHECK(rig.kinds() == std::vector<std::string>{"registered", "detected", "node_out", "replaced",
                                                "replaced_all", "expand_helper", "merged",
                                                "expanded", "relaunch"});
}

TEST_CASE(
    "a failed node out of the job is set DOWN unless another job holds it (Slurm drops the job's "
    "abort it would otherwise send the node's next instance)",
    "[engine]") {
  Rig rig;
  rig.protect();
  rig.slurm.nodes["node3"].down = true;
  SECTION("no other job on it") {
    rig.engine->tick();
    CHECK(rig.slurm.updated("down node3 auto-resume: it is DOWN (job 10)"));
    CHECK(rig.step().verdict == Verdict::relaunch);
    CHECK(rig.detail("node_out") ==
          "node3 set FAIL and out of job 10 (now on node[1-2,4]), then DOWN: node3; step 10.0 "
          "cancelled");
  }
  SECTION("a health check's mark keeps its reason") {
    rig.slurm.nodes["node3"].down = false;
    rig.slurm.nodes["node3"].fail = true;
    rig.slurm.nodes["node3"].reason = "Action:Replace gpu: Xid 79";
    rig.engine->tick();
    CHECK(rig.step().verdict == Verdict::relaunch);
    CHECK_FALSE(rig.slurm.updated("fail node3"));
    CHECK(rig.slurm.updated("down node3 Action:Replace gpu: Xid 79"));
  }
  SECTION("another job on it") {
    auto other = rig.slurm.jobs.at(10);
    other.job_id = 11;
    other.hosts = {"node3"};
    other.nodes = "node3";
    rig.slurm.jobs[11] = other;
    rig.engine->tick();
    CHECK(rig.slurm.updated("fail node3 auto-resume: it is DOWN (job 10)"));
    CHECK_FALSE(rig.slurm.updated("down node3"));
    CHECK(rig.step().verdict == Verdict::relaunch);
  }
}

TEST_CASE("a running step with healthy nodes is left alone", "[engine]") {
  Rig rig;
  rig.protect();
  for (int i = 0; i < 5; ++i) {
    rig.engine->tick();
    rig.clock.advance(1s);
  }
  CHECK(rig.step().state == StepState::registered);
  CHECK(rig.slurm.updates.empty());
}

TEST_CASE(
    "while nothing is under way the engine reads slurmctld once per slurm_read_interval, and at "
    "every look while something is",
    "[engine]") {
  Rig rig;
  rig.config.slurm_read_interval = 5s;
  rig.protect();
  // The first look reads, and the next (the first look was busy: no read yet).
  rig.engine->tick();
  rig.clock.advance(500ms);
  rig.engine->tick();
  rig.clock.advance(500ms);
  const int settled = rig.slurm.node_reads;
  REQUIRE(settled == 2);
  CHECK(rig.slurm.job_reads == 2);
  CHECK(rig.slurm.step_reads == 2);
  for (int i = 0; i < 4; ++i) {  // quiet looks: none
    rig.engine->tick();
    rig.clock.advance(500ms);
  }
  CHECK(rig.slurm.node_reads == settled);
  // slurmctld sets node3 DOWN: seen by the first read past the interval.
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  CHECK(rig.step().state == StepState::registered);
  rig.clock.advance(2500ms);  // 5 s after the last read began
  rig.engine->tick();
  CHECK(rig.slurm.node_reads == settled + 1);
  CHECK(rig.step().verdict == Verdict::relaunch);

  SECTION("a step that ends is read at every look, and once more after") {
    rig.register_attempt(1, 1, "node[1-2,4-5]");
    rig.engine->tick();  // not in the last read: it waits for the next look, which reads
    auto step = rig.step(1);
    REQUIRE(rig.store->mark_ended(step, rig.clock.stamp(), {EventKind::ended, "ended"}));
    const int before = rig.slurm.node_reads;
    for (int i = 0; i < 3; ++i) {
      rig.clock.advance(500ms);
      rig.engine->tick();
    }
    CHECK(rig.slurm.node_reads == before + 3);
    rig.clock.advance(3s);  // past end_window: decided
    rig.engine->tick();
    CHECK(rig.step(1).verdict == Verdict::no_fault);
    for (int i = 0; i < 3; ++i) rig.engine->tick();  // its outcome read, the looks are quiet
    const int after = rig.slurm.node_reads;
    rig.engine->tick();
    rig.engine->tick();
    CHECK(rig.slurm.node_reads == after);
  }
  SECTION("0: every look reads") {
    rig.config.slurm_read_interval = 0ms;
    const int before = rig.slurm.node_reads;
    rig.engine->tick();
    rig.engine->tick();
    CHECK(rig.slurm.node_reads == before + 2);
  }
}

TEST_CASE("the protected steps' jobs and steps are read in one call per owner, not one per step",
          "[engine]") {
  Rig rig(12);
  rig.protect();
  for (std::uint32_t id = 11; id <= 13; ++id) {
    const auto node = fmt::format("node{}", id - 6);
    rig.slurm.add_job(id, 1000 + id % 2, {node});
    rig.slurm.add_step(id, 0, node);
    ar::proto::StepRegistration step;
    step.job_id = id;
    step.run_id = fmt::format("r{}", id);
    step.argv = {"srun", "--auto-resume=1", "train"};
    step.nodelist = node;
    REQUIRE(rig.store->register_step(step, rig.slurm.jobs.at(id).uid) ==
            ar::Store::Insert::created);
  }
  rig.engine->tick();
  CHECK(rig.slurm.node_reads == 1);
  CHECK(rig.slurm.job_reads == 2);   // uid 1000 (jobs 10, 12), uid 1001 (jobs 11, 13)
  CHECK(rig.slurm.step_reads == 1);  // the four steps
  CHECK(rig.store->active_steps().size() == 4);
}

TEST_CASE("each repair phase is stored and a restarted controller carries on from it", "[engine]") {
  Rig rig(4);  // no idle node: the repair stops at node_out
  rig.protect();
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  CHECK(rig.step().state == StepState::repairing);
  CHECK(rig.step().phase == RepairPhase::node_out);

  rig.start();  // restart at node_out
  rig.slurm.helpers_start = false;
  rig.slurm.add_nodes(5);  // node5 is new and idle
  rig.engine->tick();
  CHECK(rig.step().phase == RepairPhase::replaced);
  CHECK(rig.step().repair.helpers.at("node5") == 5000);

  rig.start();  // restart at replaced, with the helper pending
  rig.slurm.start_job(5000);
  rig.engine->tick();
  const auto step = rig.step();
  CHECK(step.verdict == Verdict::relaunch);
  // The recorded helper is merged, not submitted again.
  CHECK(std::count_if(rig.slurm.updates.begin(), rig.slurm.updates.end(),
                      [](const auto& u) { return u.starts_with("helper "); }) == 1);
  CHECK(rig.slurm.jobs.at(10).nodes == "node[1-2,4-5]");
}

TEST_CASE("a node merged before a restart is not merged again", "[engine]") {
  Rig rig;
  rig.protect();
  rig.fault_with_pending_helper();
  // The merge happened, but the controller died before recording it.
  rig.slurm.start_job(5000);
  rig.slurm.merge_expand_helper(5000, 10);
  rig.start();
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.slurm.jobs.at(10).num_nodes == 4);
}

TEST_CASE("a second node failing during a helper's wait joins the same repair and attempt",
          "[engine]") {
  Rig rig;
  rig.protect();
  rig.fault_with_pending_helper();       // node3; helper 5000 for node5 pending
  rig.slurm.nodes["node2"].down = true;  // the second fault
  rig.engine->tick();
  CHECK(rig.detail("detected") == "step 10.0 attempt 0: node3: it is DOWN");
  rig.engine->tick();
  CHECK(rig.slurm.updated("fail node2 auto-resume: it is DOWN (job 10)"));
  CHECK(rig.slurm.updated("shrink 10 node[1,4]"));
  CHECK(rig.step().repair.replacements == std::vector<std::string>{"node5", "node6"});
  rig.slurm.start_job(5000);
  rig.engine->tick();
  CHECK(rig.slurm.updated("helper 5001 node6 for 10"));
  rig.slurm.start_job(5001);
  REQUIRE(rig.tick_until([&] { return rig.step().state == StepState::decided; }));
  const auto step = rig.step();
  CHECK(step.verdict == Verdict::relaunch);
  CHECK(step.message == "relaunching run r as attempt 1 on node[1,4-6]");
  CHECK(step.repair.relaunch.value().nodelist == "node[1,4-6]");
  CHECK(rig.store->job_steps(10).size() == 1);  // one repair, one attempt
  const auto kinds = rig.kinds();
  CHECK(std::count(kinds.begin(), kinds.end(), "detected") == 2);
  CHECK(std::count(kinds.begin(), kinds.end(), "relaunch") == 1);
}

TEST_CASE("a node that stops answering probes during a repair joins it", "[engine]") {
  Rig rig;
  rig.config.probe_failures = 2;
  rig.protect();
  rig.fault_with_pending_helper();
  rig.prober.dead.insert(rig.slurm.nodes["node4"].address);
  REQUIRE(rig.tick_until([&] { return rig.slurm.updated("fail node4"); }));
  CHECK(
      rig.slurm.updated("fail node4 auto-resume: its slurmd did not answer 2 probes in a row (no "
                        "node agent to cross-check with) (job 10)"));
  CHECK(rig.step().state == StepState::repairing);
}

TEST_CASE("a replacement that fails before it joins the job is replaced", "[engine]") {
  Rig rig;
  rig.protect();
  rig.fault_with_pending_helper();       // helper 5000 for node5 pending
  rig.slurm.nodes["node5"].down = true;  // before the merge
  rig.engine->tick();
  CHECK(rig.slurm.updated("cancel 5000"));
  CHECK(rig.last_detail("detected") ==
        "step 10.0 attempt 0, during its repair: node5 (a replacement): it is DOWN");
  rig.engine->tick();
  CHECK(rig.slurm.updated("helper 5001 node6 for 10"));
  rig.slurm.start_job(5001);
  REQUIRE(rig.tick_until([&] { return rig.step().state == StepState::decided; }));
  CHECK(rig.step().repair.relaunch.value().nodelist == "node[1-2,4,6]");
  CHECK_FALSE(rig.slurm.updated("fail node5"));  // never the job's: not the engine's to mark
}

TEST_CASE("a merged replacement that fails during the backoff is taken out and replaced",
          "[engine]") {
  Rig rig;
  rig.config.backoff = 10s;
  rig.protect(1, 1);
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  REQUIRE(rig.step(1).phase == RepairPhase::expanded);
  REQUIRE(rig.slurm.jobs.at(10).nodes == "node[1-2,4-5]");
  rig.clock.advance(2s);
  rig.slurm.nodes["node5"].down = true;
  REQUIRE(rig.tick_until([&] { return rig.step(1).state == StepState::decided; }));
  const auto step = rig.step(1);
  CHECK(step.verdict == Verdict::relaunch);
  CHECK(rig.slurm.updated("fail node5 auto-resume: it is DOWN (job 10)"));
  CHECK(rig.slurm.updated("shrink 10 node[1-2,4]"));
  CHECK(step.repair.relaunch.value().nodelist == "node[1-2,4,6]");
  CHECK(step.message == "relaunching run r as attempt 2 on node[1-2,4,6] after a backoff of 10 s");
}

TEST_CASE(
    "an old step slurmctld still lists after the grace is cancelled again before the relaunch",
    "[engine]") {
  Rig rig;
  rig.protect();
  rig.slurm.lingering_steps.insert({10, 0});  // slurmctld restarted after the first cancel
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  REQUIRE(rig.step().phase == RepairPhase::expanded);
  CHECK(rig.slurm.steps.contains({10, 0}));
  rig.clock.advance(4s);
  rig.engine->tick();
  CHECK(rig.step().state == StepState::repairing);
  rig.clock.advance(1s);
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK_FALSE(rig.slurm.steps.contains({10, 0}));
  CHECK(std::count(rig.slurm.updates.begin(), rig.slurm.updates.end(), "kill_step 10.0") == 2);
}

TEST_CASE("an old step record that outlives every cancel holds the relaunch back 60 s at most",
          "[engine]") {
  Rig rig;
  rig.protect();
  rig.slurm.nodes["node3"].down = true;
  rig.slurm.lingering_steps.insert({10, 0});
  rig.slurm.step_daemons.insert({10, 0});  // its slurmstepds do not end
  rig.engine->tick();
  REQUIRE(rig.step().phase == RepairPhase::expanded);
  for (int waited = 0; waited < 60; ++waited) {
    rig.slurm.lingering_steps.insert({10, 0});
    CHECK(rig.step().state == StepState::repairing);
    rig.clock.advance(1s);
    rig.engine->tick();
  }
  CHECK(rig.step().verdict == Verdict::relaunch);
  // Cancelled again once per grace of 5 s, from 5 s to 55 s.
  CHECK(std::count(rig.slurm.updates.begin(), rig.slurm.updates.end(), "kill_step 10.0") == 12);
}

TEST_CASE(
    "an old step record whose surviving nodes all reported their tasks exited does not hold the "
    "relaunch back",
    "[engine][tasks_exited]") {
  Rig rig;
  rig.protect();
  rig.slurm.nodes["node3"].down = true;
  rig.slurm.lingering_steps.insert({10, 0});
  rig.slurm.step_daemons.insert({10, 0});  // the daemons above node3 wait for it
  rig.engine->tick();
  REQUIRE(rig.step().phase == RepairPhase::expanded);
  const auto key = rig.step().key();
  const std::vector<std::string> hosts{"node1", "node2", "node3", "node4"};
  // Two of the three survivors: the relaunch waits.
  rig.reports.exits.add(key, "node1", false, hosts);
  rig.reports.exits.add(key, "node2", false, hosts);
  rig.slurm.lingering_steps.insert({10, 0});
  rig.clock.advance(1s);
  rig.engine->tick();
  CHECK(rig.step().state == StepState::repairing);
  // The third (node3, dead, never reports): relaunched, the record listed.
  rig.reports.exits.add(key, "node4", false, hosts);
  rig.slurm.lingering_steps.insert({10, 0});
  rig.clock.advance(1s);
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.slurm.steps.contains({10, 0}));
  CHECK(rig.reports.exits.steps() == 0);  // forgotten once decided
}

TEST_CASE(
    "a step record a restarted slurmctld recovered, which no node runs, holds the relaunch back "
    "the grace only",
    "[engine][slurm_restart]") {
  Rig rig;
  rig.protect();
  rig.slurm.nodes["node3"].down = true;
  // slurmctld restarted and recovered the cancelled step's record, which
  // outlives every cancel; no slurmstepd of it runs anywhere.
  rig.slurm.lingering_steps.insert({10, 0});
  rig.engine->tick();
  REQUIRE(rig.step().phase == RepairPhase::expanded);
  for (int waited = 0; waited < 5; ++waited) {
    rig.slurm.lingering_steps.insert({10, 0});
    CHECK(rig.step().state == StepState::repairing);
    rig.clock.advance(1s);
    rig.engine->tick();
  }
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.slurm.daemons_asked == std::vector<std::string>{"10.0 node[1-2,4]"});
}

TEST_CASE("an old step record whose nodes cannot tell whether they run it holds the relaunch back",
          "[engine][slurm_restart]") {
  Rig rig;
  rig.protect();
  rig.slurm.nodes["node3"].down = true;
  rig.slurm.daemons_unknown = true;  // a node does not answer
  rig.slurm.lingering_steps.insert({10, 0});
  rig.engine->tick();
  REQUIRE(rig.step().phase == RepairPhase::expanded);
  rig.slurm.lingering_steps.insert({10, 0});
  rig.clock.advance(5s);
  rig.engine->tick();
  CHECK(rig.step().state == StepState::repairing);
  CHECK(rig.slurm.daemons_asked.size() == 1);
}

TEST_CASE(
    "a shrink and a merge that a restarted slurmctld lost (killed before it saved them) are done "
    "again",
    "[engine][slurm_restart]") {
  Rig rig;
  rig.protect();
  rig.slurm.lingering_steps.insert({10, 0});  // holds the relaunch back at expanded
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  REQUIRE(rig.step().phase == RepairPhase::expanded);
  // slurmctld SIGKILLed, and restarted from the state it saved before the
  // repair: the dead node3 is in the job again, node5 and its helper gone.
  auto& job = rig.slurm.jobs.at(10);
  job.hosts = {"node1", "node2", "node3", "node4"};
  job.nodes = "node[1-4]";
  rig.slurm.jobs.erase(5000);
  rig.slurm.updates.clear();
  rig.engine->tick();
  CHECK(rig.slurm.updated("shrink 10 node[1-2,4]"));
  rig.engine->tick();  // the lost helper is found gone, and submitted again
  CHECK(rig.slurm.updated("helper 5001 node5 for 10"));
  CHECK(rig.slurm.updated("merge 5001 into 10"));
  CHECK(rig.last_detail("detected").find("node3 is in the job again, node5 is out of it") !=
        std::string::npos);
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.step().repair.relaunch.value().nodelist == "node[1-2,4-5]");
}

TEST_CASE(
    "a relaunched attempt whose repair a restarted slurmctld lost is repaired again, not ended as "
    "a shrink",
    "[engine][slurm_restart]") {
  Rig rig;
  rig.protect();
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  REQUIRE(rig.step().verdict == Verdict::relaunch);
  REQUIRE(rig.step().repair.relaunch.value().nodelist == "node[1-2,4-5]");
  // Attempt 1 runs on the repaired job; node3 is back as a new instance.
  rig.register_attempt(1, 1, "node[1-2,4-5]");
  auto& node3 = rig.slurm.nodes["node3"];
  node3.down = node3.fail = false;
  node3.slurmd_start_time += 100;
  rig.engine->tick();
  REQUIRE(rig.step(1).state == StepState::registered);
  auto& job = rig.slurm.jobs.at(10);
  rig.slurm.updates.clear();
  SECTION("slurmctld restarted from a state saved before the repair") {
    // SIGKILLed just after the relaunch: the job on node1-4 again, node5
    // out of it.
    job.hosts = {"node1", "node2", "node3", "node4"};
    job.nodes = "node[1-4]";
    rig.engine->tick();
    CHECK(rig.last_detail("detected") ==
          "step 10.1 attempt 1: node5: out of job 10, with node3 in it again: slurmctld restarted "
          "from a state saved before attempt 0's repair, which merged node5");
    CHECK_FALSE(rig.has_event("no_fault"));
    CHECK_FALSE(rig.slurm.updated("fail node5"));  // healthy: not marked
    // In place, on the job as slurmctld has it, after the relaunch's backoff.
    CHECK(rig.tick_until([&] { return rig.step(1).state == StepState::decided; }, 5s));
    CHECK(rig.step(1).verdict == Verdict::relaunch);
    CHECK(rig.step(1).repair.relaunch.value().nodelist == "node[1-4]");
  }
  SECTION("slurmctld restarted from a state saved after the shrink, before the merge") {
    // The job on node1-2,4; the relaunched step unknown to it.
    job.hosts = {"node1", "node2", "node4"};
    job.nodes = "node[1-2,4]";
    rig.slurm.steps.erase({10, 1});
    rig.engine->tick();
    CHECK(rig.last_detail("detected") ==
          "step 10.1 attempt 1: node5: out of job 10, and step 10.1 unknown to slurmctld: "
          "slurmctld restarted from a state saved before attempt 0's repair, which merged node5");
    CHECK_FALSE(rig.has_event("no_fault"));
    CHECK_FALSE(rig.slurm.updated("fail node5"));
    // A node joins the job again for the step's 4.
    CHECK(rig.tick_until([&] { return rig.step(1).state == StepState::decided; }, 5s));
    CHECK(rig.step(1).verdict == Verdict::relaunch);
    CHECK(rig.slurm.jobs.at(10).hosts.size() == 4);
  }
  SECTION("a shrink by hand of the merged node, the step still listed, is no lost repair") {
    job.hosts = {"node1", "node2", "node4"};
    job.nodes = "node[1-2,4]";
    rig.engine->tick();
    CHECK(rig.step(1).verdict == Verdict::no_fault);
    CHECK(rig.slurm.updates.empty());
  }
}

TEST_CASE("a helper a restarted slurmctld no longer links to the job is replaced by a new one",
          "[engine][slurm_restart]") {
  Rig rig;
  rig.protect();
  rig.fault_with_pending_helper();  // helper 5000 for node5
  // slurmctld restarted, then the helper started: Slurm 22.05 saved no
  // link from it to job 10 and refuses its merge.
  rig.slurm.unlinked_helpers.insert(5000);
  rig.slurm.helpers_start = true;
  rig.slurm.start_job(5000);
  rig.engine->tick();
  CHECK(rig.slurm.updated("cancel 5000"));
  CHECK(rig.last_detail("expand_retry").find("a new helper") != std::string::npos);
  rig.engine->tick();
  CHECK(rig.slurm.updated("helper 5001 node5 for 10"));
  CHECK(rig.slurm.updated("merge 5001 into 10"));
  CHECK(rig.step().verdict == Verdict::relaunch);
}

TEST_CASE("a relaunch waits for the job's nodes to register with a restarted slurmctld",
          "[engine][slurm_restart]") {
  Rig rig;
  rig.protect();
  rig.slurm.nodes["node3"].down = true;
  // slurmctld restarted: node1 has not registered again (no slurmd start
  // time), and slurmctld would refuse a new step on it as busy.
  rig.slurm.nodes["node1"].slurmd_start_time = 0;
  rig.engine->tick();
  REQUIRE(rig.step().phase == RepairPhase::expanded);
  rig.clock.advance(10s);
  rig.engine->tick();
  CHECK(rig.step().state == StepState::repairing);
  rig.slurm.nodes["node1"].slurmd_start_time = 1001;  // registered again
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::relaunch);
}

TEST_CASE("an idle node not registered with a restarted slurmctld is not chosen",
          "[engine][slurm_restart]") {
  Rig rig;
  rig.protect();
  rig.slurm.nodes["node5"].slurmd_start_time = 0;  // its instance is not known yet
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  CHECK(rig.slurm.updated("helper 5000 node6 for 10"));
  CHECK_FALSE(rig.slurm.updated("helper 5000 node5"));
}

TEST_CASE("an old step whose first node died is not waited for past the grace", "[engine]") {
  Rig rig;
  rig.protect();
  rig.slurm.jobs.at(10).batch = false;  // a salloc job: node1 is no batch host
  rig.slurm.lingering_steps.insert({10, 0});
  rig.slurm.nodes["node1"].down = true;
  rig.engine->tick();
  REQUIRE(rig.step().phase == RepairPhase::expanded);
  rig.slurm.lingering_steps.insert({10, 0});  // it outlives every cancel
  rig.clock.advance(5s);
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::relaunch);
}

TEST_CASE(
    "a node of the job the step had gone on without fails: one replacement for the step's own "
    "failed node, none for it",
    "[engine][slurm_restart]") {
  Rig rig;
  // slurmctld came back from an older state: job 10 holds node1-3, its
  // step runs on node[1-2,4], and node4 is gone.
  rig.slurm.add_job(10, 1000, {"node1", "node2", "node3"});
  rig.register_attempt(0, 0, "node[1-2,4]");
  rig.slurm.nodes["node4"].down = true;
  // The relaunch waits for the old step's record: node3 fails meanwhile.
  rig.slurm.lingering_steps.insert({10, 0});
  rig.slurm.step_daemons.insert({10, 0});
  rig.engine->tick();
  REQUIRE(rig.step().phase == RepairPhase::expanded);
  CHECK_THAT(rig.detail("expanded"), Catch::Contains("goes on without a new node"));
  // node3, the node the step was to go on with, fails too.
  rig.slurm.nodes["node3"].down = true;
  rig.slurm.lingering_steps.clear();
  rig.slurm.step_daemons.clear();
  rig.clock.advance(1s);
  REQUIRE(rig.tick_until([&] { return rig.step().state == StepState::decided; }));
  const auto step = rig.step();
  CHECK(step.verdict == Verdict::relaunch);
  CHECK(step.repair.replacements.size() == 1);
  CHECK(step.repair.relaunch.value().num_nodes == 3);
}

TEST_CASE("a fault in the relaunched attempt starts a new repair", "[engine]") {
  Rig rig;
  rig.protect(1, 1);
  rig.config.backoff = 0ms;
  rig.slurm.nodes["node4"].not_responding = true;
  rig.engine->tick();
  CHECK(rig.step(1).verdict == Verdict::relaunch);
  CHECK(rig.detail("detected").find("node4: its slurmd is not responding") != std::string::npos);
}

TEST_CASE("a helper left pending for 30 s is given up for another idle node, across a restart",
          "[engine]") {
  Rig rig;
  rig.config.repair_timeout = 300s;
  rig.protect();
  rig.fault_with_pending_helper();  // helper 5000 for node5 stays pending
  // node5 stays idle (say a maintenance reservation holds it from its
  // start), and the wait survives a restart of the controller.
  rig.clock.advance(10s);
  rig.engine->tick();
  rig.start();
  rig.clock.advance(10s);
  rig.engine->tick();
  CHECK_FALSE(rig.slurm.updated("cancel 5000"));
  rig.clock.advance(10s);
  rig.engine->tick();
  CHECK(rig.slurm.updated("cancel 5000"));
  CHECK(rig.detail("expand_retry") ==
        "helper job 5000 waited 30 s for node5 (Resources): choosing another node");
  // node5 is not chosen again in this repair: node6 is.
  rig.engine->tick();
  CHECK(rig.slurm.updated("helper 5001 node6 for 10"));
  CHECK_FALSE(rig.slurm.updated("helper 5002"));
  rig.slurm.start_job(5001);
  rig.engine->tick();
  const auto step = rig.step();
  CHECK(step.verdict == Verdict::relaunch);
  CHECK(step.repair.relaunch.value().nodelist == "node[1-2,4,6]");
}

TEST_CASE("a helper that ends before the merge is submitted again", "[engine]") {
  Rig rig;
  rig.protect();
  rig.fault_with_pending_helper();
  rig.slurm.jobs.erase(5000);  // ended (cancelled by someone)
  rig.engine->tick();
  CHECK(rig.detail("expand_retry").find("ended (gone) before the merge") != std::string::npos);
  rig.engine->tick();
  CHECK(rig.slurm.updated("helper 5001 node5 for 10"));
}

TEST_CASE("a helper Slurm refuses makes the engine choose another node", "[engine]") {
  Rig rig;
  rig.protect();
  rig.slurm.nodes["node3"].down = true;
  rig.slurm.refuse_helpers.insert("node5");  // the first pick
  rig.engine->tick();
  CHECK(rig.step().phase == RepairPhase::node_out);
  CHECK(rig.detail("expand_retry").ends_with(": choosing another node"));
  CHECK(rig.step().repair.replacements.empty());
  // node5 is still idle but not chosen again in this repair: node6 is.
  rig.engine->tick();
  CHECK(rig.slurm.updated("helper 5000 node6 for 10"));
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.step().repair.relaunch.value().nodelist == "node[1-2,4,6]");
}

TEST_CASE("a node a health check marked keeps its mark and the step moves off it", "[engine]") {
  Rig rig;
  rig.protect();
  const std::string mark = "Action:Replace gpu: GPU 0 is missing";
  rig.slurm.nodes["node2"].fail = true;
  rig.slurm.nodes["node2"].reason = mark;
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK_FALSE(rig.slurm.updated("fail node2"));
  CHECK(rig.slurm.nodes["node2"].reason == mark);
  CHECK(rig.slurm.updated("shrink 10 node[1,3-4]"));
}

TEST_CASE("an admin's bare Action:Replace lets the step run on", "[engine]") {
  Rig rig;
  rig.protect();
  rig.slurm.nodes["node2"].fail = true;
  rig.slurm.nodes["node2"].reason = "Action:Replace";
  rig.engine->tick();
  CHECK(rig.step().state == StepState::registered);
}

TEST_CASE("a slurmd that misses probe_failures probes in a row is a fault", "[engine]") {
  Rig rig;
  rig.config.probe_failures = 3;
  rig.config.probe_interval = 1000ms;
  rig.protect();
  rig.prober.dead.insert(rig.slurm.nodes["node4"].address);
  for (int i = 0; i < 2; ++i) {
    rig.engine->tick();
    rig.clock.advance(1s);
  }
  CHECK(rig.step().state == StepState::registered);
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.detail("detected").find("node4: its slurmd did not answer 3 probes in a row") !=
        std::string::npos);
}

TEST_CASE("only the step's own nodes count as Slurm lists them", "[engine]") {
  Rig rig;
  rig.protect();
  rig.slurm.steps[{10, 0}] = "node[1-2]";  // an srun -N2 in a 4-node job
  rig.slurm.nodes["node4"].down = true;    // not under the step
  rig.engine->tick();
  CHECK(rig.step().state == StepState::registered);
}

namespace {

// Once the node keeper has node3 replaced, its new instance registers (a
// new slurmd start time, the mark still on).
void node3_back(Rig& rig) {
  REQUIRE(rig.tick_until([&] {
    return rig.store->node_repair("node3") &&
           rig.store->node_repair("node3")->state == ar::NodeRepairState::returning;
  }));
  auto& node3 = rig.slurm.nodes["node3"];
  node3.down = false;
  node3.slurmd_start_time = rig.clock.unix_now();
}

}  // namespace

TEST_CASE("with no idle node the failed node's new instance replaces it", "[engine]") {
  Rig rig(4);
  rig.config.local_restart_command = {"/bin/restart", "{node}"};
  rig.protect();
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  REQUIRE(rig.step().phase == RepairPhase::node_out);
  // The node keeper has the provider restart node3; its new instance
  // registers (a new slurmd start time, the mark still on).
  REQUIRE(rig.tick_until([&] { return !rig.runner.calls().empty(); }));
  CHECK(rig.runner.calls().front() == std::vector<std::string>{"/bin/restart", "node3"});
  node3_back(rig);
  REQUIRE(rig.tick_until([&] { return rig.step().state == StepState::decided; }));
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.step().repair.relaunch.value().nodelist == "node[1-4]");
  CHECK(rig.slurm.updated("resume node3"));
}

TEST_CASE("a failed node back within MessageTimeout joins the job only once that has passed",
          "[engine]") {
  // slurmctld sent job 1's abort to node3's dead slurmd when node3 left the
  // job, and keeps connecting for MessageTimeout (here 20 s): node3's new
  // instance must not be in job 1 before that has passed.
  Rig rig(4);
  rig.config.local_restart_command = {"/bin/restart", "{node}"};
  rig.slurm.msg_timeout = std::chrono::seconds(20);
  rig.protect();
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  REQUIRE(rig.step().phase == RepairPhase::node_out);
  const auto out = rig.clock.unix_now();
  REQUIRE(rig.step().repair.out.value().wall == out);
  node3_back(rig);
  auto merged = [&] {
    return std::ranges::any_of(rig.slurm.updates,
                               [](const std::string& u) { return u.starts_with("merge "); });
  };
  // Its helper runs at once; the merge waits until 22 s after node_out.
  REQUIRE(rig.tick_until([&] { return !rig.step().repair.helpers.empty(); }));
  while (rig.clock.unix_now() < out + 21) {
    rig.engine->tick();
    REQUIRE_FALSE(merged());
    rig.clock.advance(500ms);
  }
  REQUIRE(rig.tick_until([&] { return rig.step().state == StepState::decided; }));
  CHECK(merged());
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.step().repair.relaunch.value().nodelist == "node[1-4]");
}

TEST_CASE("a replacement that is not the failed node is merged at once", "[engine]") {
  Rig rig;
  rig.slurm.msg_timeout = std::chrono::seconds(600);
  rig.protect();
  rig.engine->tick();
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  REQUIRE(rig.step().state == StepState::decided);
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.slurm.updated("merge 5000 into 10"));
}

TEST_CASE("a node whose replacement failed ends the repair with give_up", "[engine]") {
  Rig rig(4);
  rig.config.local_restart_command = {"/bin/restart", "{node}"};
  rig.config.provider_retries = 1;
  rig.runner.set_result({1, "no capacity", ""});
  rig.protect();
  rig.slurm.nodes["node3"].down = true;
  REQUIRE(rig.tick_until([&] { return rig.step().state == StepState::decided; }));
  CHECK(rig.step().verdict == Verdict::give_up);
  CHECK(rig.step().message.starts_with(
      "no node can replace node3 (no idle node in partition main, and the provider failed: "));
  CHECK(rig.step().message.find("no capacity") != std::string::npos);
}

TEST_CASE("a repair that does not finish within repair_timeout gives up", "[engine]") {
  Rig rig(4);
  rig.config.repair_timeout = 60s;
  rig.protect();
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  rig.clock.advance(60s);
  rig.engine->tick();
  CHECK(rig.step().state == StepState::repairing);
  rig.clock.advance(2s);
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::give_up);
  CHECK(rig.step().message ==
        "the repair did not finish within repair_timeout=60 s (it got to 'node_out')");
}

TEST_CASE("a spare is taken before an idle node", "[engine]") {
  Rig rig;
  rig.config.provider = ar::ProviderKind::spares;
  rig.slurm.nodes["node6"].drain = true;
  rig.slurm.nodes["node6"].reason = "spare";
  rig.protect();
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  CHECK(rig.slurm.updated("undrain node6"));
  CHECK(rig.has_event("spare_taken"));
  CHECK(rig.slurm.updated("helper 5000 node6 for 10"));
}

TEST_CASE("a node that failed this job before is not chosen again but its new instance is",
          "[engine]") {
  Rig rig(5);
  rig.config.backoff = 0ms;
  rig.protect();
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  REQUIRE(rig.step().verdict == Verdict::relaunch);  // onto node5
  // Attempt 1 on node[1-2,4-5]; node3 is idle again, the same instance.
  auto& node3 = rig.slurm.nodes["node3"];
  node3.down = node3.fail = false;
  ar::proto::StepRegistration next = rig.step().step;
  next.attempt = 1;
  next.step_id = 1;
  rig.slurm.add_step(10, 1, "node[1-2,4-5]");
  REQUIRE(rig.store->register_step(next, 1000) == ar::Store::Insert::created);
  rig.slurm.nodes["node5"].down = true;
  rig.engine->tick();
  CHECK(rig.step(1).phase == RepairPhase::node_out);  // node3's old instance is banned
  node3.slurmd_start_time += 100;                     // replaced meanwhile
  rig.engine->tick();
  CHECK(rig.step(1).verdict == Verdict::relaunch);
}

// Job 20 of uid 1000 on `hosts`, its step 20.0 on node5-6 protected as run
// "r2" (with node7 in the job, a spare it holds: a fault of node6 is
// repaired in place).
static void protect_other(Rig& rig, const std::vector<std::string>& hosts) {
  rig.slurm.add_job(20, 1000, hosts);
  rig.slurm.add_step(20, 0, "node[5-6]");
  ar::proto::StepRegistration other;
  other.job_id = 20;
  other.run_id = "r2";
  other.argv = {"srun", "--auto-resume=1", "train"};
  other.cwd = "/w";
  other.nodelist = "node[5-6]";
  REQUIRE(rig.store->register_step(other, 1000) == ar::Store::Insert::created);
}

// Job 10 on node1-4 and job 20 on node5-6, each with a protected step,
// relaunched without a backoff.
static void two_jobs(Rig& rig) {
  rig.config.backoff = 0ms;
  rig.protect();
  protect_other(rig, {"node5", "node6"});
}

TEST_CASE("two repairs at once never choose the same idle node", "[engine]") {
  Rig rig(8);  // idle: node7 and node8
  two_jobs(rig);
  // The helpers stay pending: the node list shows both nodes idle for as
  // long as the repairs wait, as when a rack fails (bench/rack.sh).
  rig.slurm.helpers_start = false;
  rig.slurm.nodes["node3"].down = true;
  rig.slurm.nodes["node6"].down = true;
  rig.engine->tick();
  rig.engine->tick();
  const auto a = rig.step().repair.replacements;
  const auto b = rig.store->find("r2", 0).value().repair.replacements;
  REQUIRE(a.size() == 1);
  REQUIRE(b.size() == 1);
  CHECK(a != b);
  CHECK(std::set<std::string>{a[0], b[0]} == std::set<std::string>{"node7", "node8"});
  // And at the looks after, while both wait for their helpers.
  rig.engine->tick();
  CHECK(rig.step().repair.replacements == a);
  CHECK(rig.store->find("r2", 0).value().repair.replacements == b);
}

TEST_CASE("a slow AdminComment update holds up no other job's repair", "[engine][outbox]") {
  Rig rig(8);
  two_jobs(rig);
  rig.engine->outbox().start();
  // slurmctld takes its time with AdminComment updates (without slurmdbd
  // it refuses each after 5 s).
  rig.slurm.admin_comments.set(true);
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  REQUIRE(rig.step().verdict == Verdict::relaunch);
  REQUIRE(rig.slurm.admin_comments.wait_for_waiter(5s));  // the tick did not wait for it
  // Another job's node dies meanwhile: repaired at the next look.
  rig.slurm.nodes["node6"].down = true;
  rig.engine->tick();
  CHECK(rig.store->find("r2", 0).value().verdict == Verdict::relaunch);
  rig.slurm.admin_comments.set(false);
  rig.engine->outbox().drain();
  CHECK(rig.slurm.jobs.at(10).admin_comment.find("attempt 0: node3 failed, relaunch on") !=
        std::string::npos);
  CHECK(rig.slurm.jobs.at(20).admin_comment.find("attempt 0: node6 failed, relaunch on") !=
        std::string::npos);
}

TEST_CASE("a slurmctld slow to take one repair's FAIL mark holds up no other job's repair",
          "[engine][writes]") {
  Rig rig(8);
  two_jobs(rig);
  rig.engine->start_writes();
  rig.slurm.fail_marks_of = "node3";
  rig.slurm.fail_marks.set(true);
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();  // returns while node3's mark waits
  REQUIRE(rig.slurm.fail_marks.wait_for_waiter(5s));
  CHECK(rig.step().phase == RepairPhase::detected);
  // Another job's node dies meanwhile: repaired at the next looks, the
  // first repair still waiting for its mark.
  rig.slurm.nodes["node6"].down = true;
  CHECK(rig.tick_until(
      [&] { return rig.store->find("r2", 0).value().verdict == Verdict::relaunch; }));
  CHECK(rig.slurm.fail_marks.waiting());
  CHECK(rig.step().phase == RepairPhase::detected);
  rig.slurm.fail_marks.set(false);
  REQUIRE(rig.engine->writes_settled(5s));
  CHECK(rig.tick_until([&] { return rig.step().verdict == Verdict::relaunch; }));
  CHECK(std::ranges::count(rig.kinds(), "node_out") == 2);                        // one per repair
  CHECK(rig.detail("node_out").starts_with("node6 set FAIL and out of job 20"));  // first
  CHECK(rig.last_detail("node_out") ==
        "node3 set FAIL and out of job 10 (now on node[1-2,4]), then "
        "DOWN: node3; step 10.0 cancelled");
}

TEST_CASE("a slurmctld slow to answer one repair's later calls holds up no other job's repair",
          "[engine][writes]") {
  Rig rig(8);
  two_jobs(rig);
  rig.engine->start_writes();
  auto verdict = Verdict::relaunch;
  SECTION("the merge of its helper") { rig.slurm.later_call = "merge"; }
  SECTION("the relaunch's look at the old step") { rig.slurm.later_call = "step_exists"; }
  SECTION("its requeue") {
    rig.slurm.jobs.at(10).has_gres = true;  // no spare: Slurm's requeue
    rig.slurm.later_call = "requeue";
    verdict = Verdict::requeued;
  }
  rig.slurm.later_calls_of = 10;
  rig.slurm.later_calls.set(true);
  rig.slurm.nodes["node3"].down = true;
  REQUIRE(rig.tick_until([&] { return rig.slurm.later_calls.waiting(); }));
  const auto phase = rig.step().phase;
  // Another job's node dies meanwhile: repaired at the next looks, the
  // first repair still waiting for slurmctld.
  rig.slurm.nodes["node6"].down = true;
  CHECK(rig.tick_until(
      [&] { return rig.store->find("r2", 0).value().verdict == Verdict::relaunch; }));
  CHECK(rig.slurm.later_calls.waiting());
  CHECK(rig.step().state == StepState::repairing);
  CHECK(rig.step().phase == phase);
  rig.slurm.later_calls.set(false);
  CHECK(rig.tick_until([&] { return rig.step().state == StepState::decided; }));
  CHECK(rig.step().verdict == verdict);
}

TEST_CASE(
    "a look asks slurmctld nothing itself: of two protected steps of a job, one whose job the "
    "other's repair changed waits for the next look's read",
    "[engine][writes]") {
  Rig rig(8);
  rig.config.backoff = 0ms;
  // Two repairs of one job at once: the breaker's count of marks not yet
  // settled depends on their order; it is not what this test is about.
  rig.config.max_marks_per_hour = ar::ActionLimit{1000, false};
  rig.config.max_replacements_per_hour = ar::ActionLimit{1000, false};
  // Job 10 on node1-4: two attempts of run r not decided yet (the one
  // protected run of the job), 10.0 on node[1-2] and 10.1 on node[3-4].
  rig.slurm.add_job(10, 1000, {"node1", "node2", "node3", "node4"});
  rig.register_attempt(0, 0, "node[1-2]");
  rig.register_attempt(1, 1, "node[3-4]");
  // Every outside call on threads of their own, as in the controller.
  rig.start_calls();
  rig.engine->tick();
  // A node under each step dies: one step's repair begins, and the other
  // waits for the next look (on a read made after that change).
  rig.slurm.nodes["node2"].down = true;
  rig.slurm.nodes["node4"].down = true;
  rig.engine->tick();
  CHECK(std::set{rig.step(0).state, rig.step(1).state} ==
        std::set{StepState::registered, StepState::repairing});
  rig.engine->tick();
  CHECK(rig.step(0).state != StepState::registered);
  CHECK(rig.step(1).state != StepState::registered);
  CHECK(rig.tick_until([&] {
    return rig.step(0).state == StepState::decided && rig.step(1).state == StepState::decided;
  }));
  CHECK(rig.look_thread_calls() == 0);
  rig.settle_calls();
}

TEST_CASE("slurmctld gone during a look: the other steps wait for the next look, not a call each",
          "[engine][writes]") {
  Rig rig(8);
  two_jobs(rig);
  // The look's read is in; then slurmctld stops answering: the first
  // repair's mark waits MessageTimeout for nothing.
  rig.slurm.marks_unreachable = {"node3", "node6"};
  rig.slurm.nodes["node3"].down = true;
  rig.slurm.nodes["node6"].down = true;
  rig.engine->tick();
  CHECK(rig.slurm.unreachable_marks == 1);  // not one per step
  rig.slurm.marks_unreachable.clear();
  CHECK(rig.tick_until([&] {
    return rig.step().verdict == Verdict::relaunch &&
           rig.store->find("r2", 0).value().verdict == Verdict::relaunch;
  }));
}

TEST_CASE("a stopped expand helper submit holds up no tick: another job's repair goes on",
          "[engine][submits]") {
  Rig rig(8);
  rig.config.backoff = 0ms;
  rig.protect();  // job 10 on node1-4: node3's repair needs a new node (a helper)
  protect_other(rig, {"node5", "node6", "node7"});
  rig.engine->start_submits();
  // The job's owner stopped auto-resume-submit (it runs as them).
  rig.slurm.helper_submits.set(true);
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();  // returns while the submit waits
  REQUIRE(rig.slurm.helper_submits.wait_for_waiter(5s));
  CHECK(rig.step().phase == RepairPhase::replaced);
  // Another job's node dies meanwhile: repaired at the next look.
  rig.slurm.nodes["node6"].down = true;
  rig.engine->tick();
  CHECK(rig.store->find("r2", 0).value().verdict == Verdict::relaunch);
  CHECK(rig.step().phase == RepairPhase::replaced);  // still waiting for its helper
  CHECK(rig.slurm.helper_submits.waiting());
  // The submit returns: the next look takes its helper and goes on.
  rig.slurm.helper_submits.set(false);
  REQUIRE(rig.engine->submits_settled(5s));
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.has_event("expand_helper"));
  CHECK(rig.slurm.updated("merge"));
}

TEST_CASE("a helper whose submit returns after its repair moved on is cancelled",
          "[engine][submits]") {
  Rig rig(8);
  rig.protect();
  rig.engine->start_submits();
  rig.slurm.helper_submits.set(true);
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  REQUIRE(rig.slurm.helper_submits.wait_for_waiter(5s));
  // Its srun cancels the step while the submit is under way.
  REQUIRE(rig.store->cancel(rig.step(), "cancelled by its srun"));
  rig.engine->tick();
  rig.slurm.helper_submits.set(false);
  REQUIRE(rig.engine->submits_settled(5s));
  REQUIRE(rig.slurm.updated("helper 5000 node5 for 10"));
  rig.engine->tick();
  CHECK(rig.slurm.updated("cancel 5000"));
  CHECK_FALSE(rig.slurm.updated("merge"));
  CHECK(rig.step().verdict == Verdict::cancelled);
}
