// What the resume engine may do as root: only to nodes the job holds, only
// on Slurm's word about the step, never from a reservation the job is not
// in, and never by lifting an admin's drain.

#include "engine_rig.hpp"
#include "hostlist.hpp"  // compress_hostlist

namespace {

// The job as the user's own `scontrol update JobId=10 NodeList=...` leaves it.
void shrink_by_hand(ar::test::FakeSlurm& slurm, const std::vector<std::string>& hosts) {
  auto& job = slurm.jobs.at(10);
  job.hosts = hosts;
  job.nodes = ar::slurm::compress_hostlist(hosts);
  job.num_nodes = static_cast<std::uint32_t>(hosts.size());
}

}  // namespace

TEST_CASE("a node the job released while Slurm shows it healthy is no fault", "[engine][trust]") {
  Rig rig;
  rig.protect();
  rig.engine->tick();
  shrink_by_hand(rig.slurm, {"node1", "node2", "node3"});
  rig.engine->tick();
  const auto step = rig.step();
  REQUIRE(step.state == StepState::decided);
  CHECK(step.verdict == Verdict::no_fault);
  CHECK(step.message ==
        "job 10 was shrunk under step 10.0: node4 left it and Slurm shows it healthy; no node is "
        "at fault, srun keeps the step's own exit status");
  CHECK(rig.slurm.updates.empty());  // nothing marked, no node taken, no job grown
  CHECK(rig.slurm.jobs.at(10).nodes == "node[1-3]");
  CHECK(rig.detail("no_fault") == step.message);
}

TEST_CASE(
    "a slurmctld restarted from a state saved before a node joined the job, that node dead, "
    "is no release: the step is resumed",
    "[engine][trust]") {
  Rig rig;
  rig.protect();
  rig.engine->tick();
  // node4's slurmd dies, and slurmctld is SIGKILLed and comes back from a
  // state it saved before node4 joined the job: no node4 in the job, no
  // record of the running step, node4 not registered with it (and never
  // again: it is dead). Slurm has not yet seen node4 stop answering.
  rig.prober.dead.insert(rig.slurm.nodes.at("node4").address);
  shrink_by_hand(rig.slurm, {"node1", "node2", "node3"});
  rig.slurm.steps.erase({10, 0});
  rig.slurm.nodes["node4"].slurmd_start_time = 0;
  rig.clock.advance(1s);
  rig.engine->tick();
  CHECK(rig.step().state == StepState::registered);  // not no_fault: nothing says node4 lives
  // Its probes go unanswered: a fault, and the step is resumed.
  REQUIRE(rig.tick_until([&] { return rig.step().state == StepState::decided; }));
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK_FALSE(rig.has_event("no_fault"));
  CHECK_FALSE(rig.slurm.updated("fail node4"));  // not the job's: not the engine's to mark
}

TEST_CASE(
    "a node that left the job is released only once slurmctld lists it registered and its "
    "last probe answered",
    "[engine][trust]") {
  Rig rig;
  rig.protect();
  rig.engine->tick();
  shrink_by_hand(rig.slurm, {"node1", "node2", "node3"});
  SECTION("not registered with a slurmctld restarted lately") {
    rig.slurm.nodes["node4"].slurmd_start_time = 0;
    rig.clock.advance(1s);
    rig.engine->tick();
    CHECK(rig.step().state == StepState::registered);
    rig.slurm.nodes["node4"].slurmd_start_time = 2000;  // it registers
  }
  SECTION("silent at its last probe") {
    rig.prober.dead.insert(rig.slurm.nodes.at("node4").address);
    rig.clock.advance(1s);
    rig.engine->tick();
    CHECK(rig.step().state == StepState::registered);
    rig.prober.dead.clear();  // it answers again
  }
  rig.clock.advance(1s);
  rig.engine->tick();
  REQUIRE(rig.step().state == StepState::decided);
  CHECK(rig.step().verdict == Verdict::no_fault);
}

TEST_CASE("a node that left the job and is DOWN is a fault but is not marked by the engine",
          "[engine][trust]") {
  Rig rig;
  rig.protect();
  rig.engine->tick();
  // --no-kill: Slurm itself dropped the dead node from the job.
  shrink_by_hand(rig.slurm, {"node1", "node2", "node3"});
  rig.slurm.nodes["node4"].down = true;
  rig.engine->tick();
  const auto step = rig.step();
  REQUIRE(step.state == StepState::decided);
  CHECK(step.verdict == Verdict::relaunch);
  CHECK_FALSE(rig.slurm.updated("fail node4"));
  CHECK_FALSE(rig.slurm.updated("shrink"));  // nothing left to shrink
  CHECK(rig.slurm.jobs.at(10).nodes == "node[1-3,5]");
}

TEST_CASE("the engine marks no node the job does not hold, whatever the stored list says",
          "[engine][trust]") {
  Rig rig;
  rig.slurm.add_job(10, 1000, {"node1", "node2", "node3", "node4"});
  // A registration from before the controller took node lists from Slurm
  // only; slurmctld does not list the step (yet): the stored list is all
  // the engine has.
  ar::proto::StepRegistration step;
  step.job_id = 10;
  step.run_id = "r";
  step.nodelist = "node[1-6]";
  REQUIRE(rig.store->register_step(step, 1000) == ar::Store::Insert::created);
  rig.slurm.nodes["node6"].down = true;  // someone else's node
  rig.engine->tick();
  for (const auto& update : rig.slurm.updates) {
    CHECK_FALSE(update.starts_with("fail node6"));
    CHECK_FALSE(update.starts_with("down node6"));
    CHECK_FALSE(update.starts_with("drain node6"));
  }
}

TEST_CASE("no replacement is taken from a reservation the job is not in", "[engine][trust]") {
  Rig rig;  // node5 and node6 are idle
  rig.slurm.reservation_nodes["maint"] = {"node5"};
  rig.protect();
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.slurm.updated("helper 5000 node6 for 10"));
  CHECK_FALSE(rig.slurm.updated("helper 5000 node5"));
}

TEST_CASE("a job in a reservation is repaired from that reservation's nodes only",
          "[engine][trust]") {
  Rig rig;
  rig.slurm.reservation_nodes["big"] = {"node1", "node2", "node3", "node4", "node6"};
  rig.protect();
  rig.slurm.jobs.at(10).reservation = "big";
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.slurm.updated("helper 5000 node6 for 10"));
}

TEST_CASE("an idle node an admin drained is no replacement and keeps its drain",
          "[engine][trust]") {
  Rig rig(5);
  rig.slurm.nodes["node5"].drain = true;
  rig.slurm.nodes["node5"].reason = "bad DIMM, ticket 42";
  rig.protect();
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  CHECK(rig.step().phase == RepairPhase::node_out);
  CHECK_FALSE(rig.slurm.updated("undrain node5"));
  CHECK_FALSE(rig.slurm.updated("resume node5"));
  CHECK(rig.slurm.nodes["node5"].reason == "bad DIMM, ticket 42");
}
