// The resume engine's probes and their guards, through the fakes: a node
// only the controller cannot reach is cross-checked by other nodes' agents;
// many silent at once, or the prober's own failures, take no node.

#include "engine_rig.hpp"

namespace {

using ar::ProbeResult;

// A rig whose step's nodes run agents: node1-4 heard, probes every second.
struct ProbeRig : Rig {
  ProbeRig() {
    config.probe_failures = 3;
    config.probe_interval = 1000ms;
    protect();
    engine->tick();  // the keeper's first look: heartbeats are taken from now
    clock.advance(1s);
  }
  void beat_all() {
    for (const auto* node : {"node1", "node2", "node3", "node4"})
      keeper->heartbeat(node, false, slurm.nodes.at(node).address);
  }
  // `seconds` of ticks, a second apart, the agents heard before each.
  void run_for(int seconds) {
    for (int i = 0; i < seconds; ++i) {
      beat_all();
      engine->tick();
      clock.advance(1s);
    }
  }
  std::string address(const char* node) { return slurm.nodes.at(node).address; }
};

}  // namespace

TEST_CASE("a node only the controller cannot reach is not taken when other agents reach it",
          "[engine][cross_check]") {
  ProbeRig rig;
  rig.prober.dead.insert(rig.address("node3"));
  rig.run_for(1);
  // The step's other nodes' agents are asked at the first silent probe.
  const auto work = rig.keeper->peer_work("node1", {});
  REQUIRE(work.size() == 1);
  CHECK(work[0].node == "node3");
  CHECK(work[0].address == rig.address("node3"));
  CHECK_FALSE(work[0].deep);
  rig.keeper->peer_work("node1", {{"node3", ProbeResult::answered}});
  rig.run_for(20);
  CHECK(rig.step().state == StepState::registered);
  CHECK(rig.slurm.updates.empty());
  CHECK(rig.detail("probe_disputed") ==
        "node3 does not answer the controller's probes, but the agent of node1 reaches its "
        "slurmd: not taken (the controller's route to it is the likelier fault; Slurm's own node "
        "state still counts)");
  CHECK(std::ranges::count(rig.kinds(), "probe_disputed") == 1);
  // Slurm's own word still counts.
  rig.slurm.nodes["node3"].down = true;
  rig.run_for(1);
  CHECK(rig.step().verdict == Verdict::relaunch);
}

TEST_CASE("a node an agent cannot reach either is taken within the probe count",
          "[engine][cross_check]") {
  ProbeRig rig;
  rig.config.backoff = 0ms;
  rig.prober.dead.insert(rig.address("node3"));
  rig.run_for(1);
  rig.keeper->peer_work("node2", {{"node3", ProbeResult::silent}});
  rig.run_for(1);
  CHECK(rig.step().state == StepState::registered);  // 2 probes of 3
  rig.run_for(1);
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.detail("detected")
            .find("node3: its slurmd did not answer 3 probes in a row, and the "
                  "agent of node2 cannot reach it either") != std::string::npos);
}

TEST_CASE("a cross-check no agent answers holds a node back 5 s at most", "[engine][cross_check]") {
  ProbeRig rig;
  rig.prober.dead.insert(rig.address("node3"));
  rig.run_for(5);  // asked at the first probe; 3 probes are in after 3 s
  CHECK(rig.step().state == StepState::registered);
  rig.run_for(1);
  CHECK(rig.step().state != StepState::registered);
  CHECK(rig.detail("detected").find("(no answer from the agents of node1, node2 within 5 s)") !=
        std::string::npos);
}

TEST_CASE("most probed nodes silent at once take no node, and one event says why",
          "[engine][cross_check]") {
  ProbeRig rig;
  rig.prober.dead = {rig.address("node1"), rig.address("node2"), rig.address("node3")};
  rig.run_for(30);
  CHECK(rig.step().state == StepState::registered);
  CHECK(rig.slurm.updates.empty());
  CHECK(std::ranges::count(rig.kinds(), "probe_crowd") == 1);
  CHECK(rig.detail("probe_crowd")
            .starts_with(
                "3 of the 4 nodes probed under protected steps are silent at once (more than "
                "probe_max_silent_percent=50)"));
  // The crowd ends: node3 alone stays silent, counted from then on.
  rig.prober.dead = {rig.address("node3")};
  rig.run_for(1);
  rig.keeper->peer_work("node1", {{"node3", ProbeResult::silent}});
  rig.run_for(1);
  CHECK(rig.step().state == StepState::registered);
  rig.run_for(1);
  CHECK(rig.step().state != StepState::registered);
}

TEST_CASE("the prober's own failures never count as a node's silence", "[engine][cross_check]") {
  ProbeRig rig;
  rig.prober.unknown = {rig.address("node1"), rig.address("node2"), rig.address("node3"),
                        rig.address("node4")};
  rig.run_for(30);
  CHECK(rig.step().state == StepState::registered);
  CHECK_FALSE(rig.has_event("probe_crowd"));
  // Some answer, some cannot be probed: the silent one is still found.
  rig.prober.unknown = {rig.address("node1")};
  rig.prober.dead = {rig.address("node4")};
  rig.run_for(1);
  rig.keeper->peer_work("node2", {{"node4", ProbeResult::silent}});
  rig.run_for(2);
  CHECK(rig.step().state != StepState::registered);
}

TEST_CASE("probe rounds far apart (the controller stood still) start the count again",
          "[engine][cross_check]") {
  Rig rig;  // no agents: the controller's own view
  rig.config.probe_failures = 3;
  rig.config.probe_interval = 1000ms;
  rig.protect();
  rig.prober.dead.insert(rig.slurm.nodes["node4"].address);
  for (int i = 0; i < 5; ++i) {
    rig.engine->tick();
    rig.clock.advance(10s);
  }
  CHECK(rig.step().state == StepState::registered);
  for (int i = 0; i < 3; ++i) {
    rig.engine->tick();
    rig.clock.advance(1s);
  }
  CHECK(rig.step().state != StepState::registered);
  CHECK(
      rig.detail("detected")
          .find(
              "its slurmd did not answer 3 probes in a row (no node agent to cross-check with)") !=
      std::string::npos);
}

TEST_CASE("an ended step waits past end_window for a node its probes still suspect",
          "[engine][cross_check]") {
  ProbeRig rig;
  rig.config.end_window = 2000ms;
  auto step = rig.step();
  REQUIRE(rig.store->mark_ended(step, rig.clock.unix_now(), {EventKind::ended, "ended"}));
  rig.prober.dead.insert(rig.address("node2"));
  rig.run_for(3);  // end_window is over with node2 silent twice, its cross-check pending
  CHECK(rig.step().state == StepState::ended);
  rig.keeper->peer_work("node1", {{"node2", ProbeResult::silent}});
  rig.run_for(1);
  CHECK(rig.step().state != StepState::ended);
  CHECK(rig.detail("detected")
            .find("node2: its slurmd did not answer 4 probes in a row, and the "
                  "agent of node1 cannot reach it either") != std::string::npos);
}

TEST_CASE("two nodes failing in the same second are one repair and one attempt",
          "[engine][faults]") {
  Rig rig;
  rig.config.backoff = 0ms;
  rig.protect();
  rig.slurm.nodes["node2"].down = true;
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  const auto step = rig.step();
  REQUIRE(step.verdict == Verdict::relaunch);
  CHECK(step.repair["relaunch"]["nodelist"] == "node[1,4-6]");
  CHECK(rig.detail("detected") == "step 10.0 attempt 0: node2: it is DOWN, node3: it is DOWN");
  CHECK(std::ranges::count(rig.kinds(), "detected") == 1);
  CHECK(rig.store->job_steps(10).size() == 1);
}

TEST_CASE("a flapping slurmd that never misses probe_failures probes in a row is not taken",
          "[engine][faults]") {
  Rig rig;  // no agents: the controller's own view
  rig.config.probe_failures = 3;
  rig.config.probe_interval = 1000ms;
  rig.protect();
  const auto address = rig.slurm.nodes["node4"].address;
  for (int i = 0; i < 30; ++i) {
    if (i % 3 == 2)
      rig.prober.dead.erase(address);  // answers every third probe
    else
      rig.prober.dead.insert(address);
    rig.engine->tick();
    rig.clock.advance(1s);
  }
  CHECK(rig.step().state == StepState::registered);
  CHECK(rig.slurm.updates.empty());
  // Once it stays silent, or Slurm marks it, it is taken.
  rig.prober.dead.insert(address);
  for (int i = 0; i < 3; ++i) {
    rig.engine->tick();
    rig.clock.advance(1s);
  }
  CHECK(rig.step().state != StepState::registered);
}
