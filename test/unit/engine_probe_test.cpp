// The resume engine's probes and their guards, through the fakes: a node
// only the controller cannot reach is cross-checked by other nodes' agents;
// many silent at once, or the prober's own failures, take no node.

#include "engine_rig.hpp"

namespace {

using ar::ProbeResult;

// A rig whose step's nodes run agents: node1-4 heard (every second, as
// their agents say), probes every second. A node killed in a test is
// `mute`: its agent died with it.
struct ProbeRig : Rig {
  ProbeRig() {
    config.probe_failures = 3;
    config.probe_interval = 1000ms;
    protect();
    engine->tick();  // the keeper's first look: heartbeats are taken from now
    beat_all();
    clock.advance(1s);
  }
  std::set<std::string> mute;
  void beat_all() {
    for (const auto* node : {"node1", "node2", "node3", "node4"})
      if (!mute.contains(node)) keeper->heartbeat(node, false, slurm.nodes.at(node).address, 1s);
  }
  // A node killed: its slurmd does not answer, its agent is silent.
  void kill(const char* node) {
    prober.dead.insert(address(node));
    mute.insert(node);
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

TEST_CASE("a killed node an agent cannot reach either is taken once its own agent is silent",
          "[engine][cross_check]") {
  ProbeRig rig;
  rig.config.backoff = 0ms;
  rig.kill("node3");  // its agent's last heartbeat came 1 s ago
  rig.run_for(1);
  rig.keeper->peer_work("node2", {{"node3", ProbeResult::silent}});
  rig.run_for(1);
  CHECK(rig.step().state == StepState::registered);  // 2 probes of 3
  rig.run_for(1);
  // 3 probes, and its agent's heartbeat is 3 s old: two of its 1 s
  // intervals and a second, not more.
  CHECK(rig.step().state == StepState::registered);
  rig.run_for(1);
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.detail("detected")
            .find("node3: its slurmd did not answer 4 probes in a row, and the "
                  "agent of node2 cannot reach it either; its own agent has been silent for "
                  "4.0 s") != std::string::npos);
  // Watched for the one look where its agent's silence was not long enough.
  CHECK(std::ranges::count(rig.kinds(), "suspected") == 1);
}

TEST_CASE("a node whose slurmd is silent while its own agent beats is watched, not taken",
          "[engine][cross_check][evidence]") {
  // slurmd restarting (a package upgrade), or stopped: the host lives.
  ProbeRig rig;
  rig.prober.dead.insert(rig.address("node3"));
  rig.run_for(1);
  rig.keeper->peer_work("node2", {{"node3", ProbeResult::silent}});
  rig.run_for(30);
  CHECK(rig.step().state == StepState::registered);
  CHECK(rig.slurm.updates.empty());
  CHECK(std::ranges::count(rig.kinds(), "suspected") == 1);
  CHECK(rig.detail("suspected")
            .starts_with("node3: its slurmd did not answer 3 probes in a row, and the agent of "
                         "node2 cannot reach it either, but its own agent's last heartbeat came "));
  CHECK(rig.detail("suspected").ends_with(" ago: watched, not taken"));
  // Slurm's not responding as well: still its agent's word against it.
  rig.slurm.nodes["node3"].not_responding = true;
  rig.run_for(10);
  CHECK(rig.step().state == StepState::registered);
  CHECK(rig.slurm.updates.empty());
  // slurmd back: the episode ends; a later one is said again.
  rig.prober.dead.clear();
  rig.slurm.nodes["node3"].not_responding = false;
  rig.run_for(2);
  CHECK(rig.detail("suspect_cleared") == "node3: its slurmd answers again: no longer suspected");
  rig.slurm.nodes["node3"].not_responding = true;
  rig.run_for(2);
  CHECK(std::ranges::count(rig.kinds(), "suspected") == 2);
  CHECK(rig.last_detail("suspected")
            .starts_with("node3: its slurmd is not responding, but its own agent's last "));
  // Then the node dies: its agent falls silent, and it is taken.
  rig.mute.insert("node3");
  rig.run_for(4);
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.detail("detected")
            .find("node3: its slurmd is not responding; its own agent has been silent for") !=
        std::string::npos);
}

TEST_CASE("Slurm's DOWN takes a node whose agent beats", "[engine][evidence]") {
  ProbeRig rig;
  rig.slurm.nodes["node3"].down = true;
  rig.slurm.nodes["node3"].reason = "Not responding";
  rig.run_for(1);
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.detail("detected").find("node3: it is DOWN (Not responding)") != std::string::npos);
}

TEST_CASE(
    "a slurmd restarting under a beating agent is not taken, and an older instance's silent "
    "agent says nothing of the new one",
    "[engine][evidence]") {
  ProbeRig rig;
  // The heartbeat watch on (it forgets an older instance's agent).
  rig.config.heartbeat_timeout = 10s;
  rig.run_for(1);
  // slurmd restarts (a package upgrade): its new instance registers before
  // the agent's next heartbeat, while the probes still count its silence.
  rig.prober.dead.insert(rig.address("node3"));
  rig.run_for(3);
  rig.keeper->peer_work("node2", {{"node3", ProbeResult::silent}});
  rig.slurm.nodes["node3"].slurmd_start_time += 100;
  rig.slurm.nodes["node3"].not_responding = true;
  rig.run_for(3);
  CHECK(rig.step().state == StepState::registered);
  CHECK(rig.slurm.updates.empty());
  // slurmd back; then the agent stops while slurmd answers, and later the
  // node comes back as a new instance whose slurmd does not respond: the
  // old agent's silence is not held against the new instance, and no
  // agent of it says it lives: Slurm's word stands alone.
  rig.prober.dead.clear();
  rig.slurm.nodes["node3"].not_responding = false;
  rig.run_for(1);
  rig.mute.insert("node3");
  rig.run_for(4);
  CHECK(rig.step().state == StepState::registered);
  rig.slurm.nodes["node3"].slurmd_start_time += 100;
  rig.slurm.nodes["node3"].not_responding = true;
  rig.prober.dead.insert(rig.address("node3"));
  rig.run_for(4);
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.detail("detected").find("node3: its slurmd is not responding") != std::string::npos);
  CHECK(rig.detail("detected").find("own agent") == std::string::npos);
}

TEST_CASE("a node that dies right after its slurmd restarted is taken on its agent's silence",
          "[engine][evidence]") {
  ProbeRig rig;
  rig.config.heartbeat_timeout = 10s;
  rig.run_for(1);
  // slurmd restarts: the new instance registers, and the host dies before
  // its agent's next heartbeat.
  rig.beat_all();
  rig.slurm.nodes["node3"].slurmd_start_time += 100;
  rig.kill("node3");
  for (int i = 0; i < 5; ++i) {
    rig.beat_all();
    rig.engine->tick();
    if (i == 0) rig.keeper->peer_work("node2", {{"node3", ProbeResult::silent}});
    rig.clock.advance(1s);
  }
  // The agent heard fresh when the new instance came speaks for it: its
  // silence counts.
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.detail("detected").find("node3: its slurmd did not answer") != std::string::npos);
  CHECK(rig.detail("detected").find("its own agent has been silent for") != std::string::npos);
}

TEST_CASE("four nodes suspected at once are a crowd: none is taken on suspicion alone",
          "[engine][evidence]") {
  // A management-network blip with no agents to tell: every slurmd of the
  // job stops answering slurmctld's pings at once.
  Rig rig;
  rig.config.probe_failures = 3;
  rig.config.probe_interval = 1000ms;
  rig.protect();
  for (const auto* node : {"node1", "node2", "node3", "node4"})
    rig.slurm.nodes[node].not_responding = true;
  for (int i = 0; i < 20; ++i) {
    rig.engine->tick();
    rig.clock.advance(1s);
  }
  CHECK(rig.step().state == StepState::registered);
  CHECK(rig.slurm.updates.empty());
  CHECK(std::ranges::count(rig.kinds(), "suspect_crowd") == 1);
  CHECK(rig.detail("suspect_crowd")
            .starts_with("4 of the 4 nodes under protected steps are suspected at once "
                         "(node1,node2,node3,node4: "));
  CHECK(std::ranges::count(rig.kinds(), "suspected") == 4);
  // Slurm's DOWN is evidence, crowd or not.
  rig.slurm.nodes["node2"].down = true;
  rig.engine->tick();
  CHECK(rig.step().state != StepState::registered);
  CHECK(rig.detail("detected").find("node2: it is DOWN") != std::string::npos);
  CHECK(rig.detail("detected").find("node1") == std::string::npos);
}

TEST_CASE("Slurm ending a job for a node the controller did not take says so",
          "[engine][evidence]") {
  ProbeRig rig;
  rig.slurm.nodes["node3"].not_responding = true;
  rig.run_for(2);
  REQUIRE(rig.has_event("suspected"));
  rig.slurm.jobs[10].running = false;
  rig.slurm.jobs[10].state = "NODE_FAIL";
  rig.slurm.nodes["node3"].down = true;
  rig.run_for(1);
  CHECK(rig.step().verdict == Verdict::cancelled);
  CHECK(rig.step().message.starts_with(
      "job 10 is NODE_FAIL (Slurm's own doing: the controller had not taken node3: its slurmd "
      "is not responding, but its own agent's last heartbeat came "));
}

TEST_CASE("a cross-check no agent answers holds a node back 5 s at most", "[engine][cross_check]") {
  ProbeRig rig;
  rig.kill("node3");
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
  // The crowd ends: node3 alone stays silent (it died: its agent too),
  // counted from then on.
  rig.prober.dead = {rig.address("node3")};
  rig.mute = {"node3"};
  rig.run_for(1);
  rig.keeper->peer_work("node1", {{"node3", ProbeResult::silent}});
  rig.run_for(1);
  CHECK(rig.step().state == StepState::registered);
  rig.run_for(2);  // 3 probes, and its agent silent for more than 3 s
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
  rig.kill("node4");
  rig.run_for(1);
  rig.keeper->peer_work("node2", {{"node4", ProbeResult::silent}});
  rig.run_for(3);
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
  REQUIRE(rig.store->mark_ended(step, rig.clock.stamp(), {EventKind::ended, "ended"}));
  rig.kill("node2");
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
  CHECK(step.repair.relaunch.value().nodelist == "node[1,4-6]");
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

TEST_CASE(
    "while slurmctld cannot be asked the heartbeat watch goes on: no stall, no deadline "
    "reset",
    "[engine][evidence]") {
  ProbeRig rig;
  rig.config.heartbeat_timeout = 10s;
  rig.run_for(2);
  rig.slurm.reachable = false;
  // node3 freezes meanwhile: its agent falls silent, its slurmd does not answer.
  rig.kill("node3");
  for (int i = 0; i < 40; ++i) {  // 20 s of looks, twice a second
    rig.beat_all();
    rig.engine->tick();
    rig.clock.advance(500ms);
  }
  rig.slurm.reachable = true;
  CHECK_FALSE(rig.has_event("stalled"));
  // A slow Slurm is said as such, once.
  CHECK(rig.has_event("slurm_slow"));
  CHECK_FALSE(rig.has_event("slurm_back"));
  // The marks Slurm refused meanwhile were not counted: no breaker.
  CHECK_FALSE(rig.has_event("breaker_tripped"));
  // Its deadline ran on while slurmctld was away: marked as soon as Slurm
  // takes the mark (the cross-check's 5 s have passed), not heartbeat_timeout later.
  rig.engine->tick();
  CHECK(rig.slurm.updated("fail node3 Action:Replace heartbeat: no heartbeat for"));
  rig.run_for(2);
  CHECK(rig.step().verdict == Verdict::relaunch);
  // Out of the job, DOWN (Slurm drops the job's abort it would resend to
  // the node).
  CHECK(rig.slurm.updated("down node3 "));
}

TEST_CASE(
    "a node list slurmctld is slow to give holds no tick: the watch and the probes go on, "
    "nothing is asked of slurmctld meanwhile, and the repair follows at its answer",
    "[engine][evidence]") {
  ProbeRig rig;
  rig.config.heartbeat_timeout = 10s;
  rig.run_for(2);
  rig.engine->start_reads(1ms);  // a look waits 1 ms for the read under way
  // slurmctld stopped (SIGSTOP): a read waits for it, here until released.
  rig.slurm.node_lists.set(true);
  rig.kill("node3");
  const auto updates = rig.slurm.updates.size();
  rig.beat_all();
  rig.engine->tick();  // starts a read, and returns without it
  REQUIRE(rig.slurm.node_lists.wait_for_waiter(5s));
  for (int i = 0; i < 40; ++i) {  // 20 s of looks, twice a second
    rig.beat_all();
    rig.engine->tick();
    rig.clock.advance(500ms);
  }
  CHECK(rig.slurm.node_lists.waiting());  // still the one read
  CHECK_FALSE(rig.has_event("stalled"));
  CHECK(rig.has_event("slurm_slow"));
  CHECK_FALSE(rig.has_event("slurm_back"));
  CHECK(rig.step().state == StepState::registered);  // nothing done without slurmctld
  CHECK(rig.slurm.updates.size() == updates);
  // slurmctld answers: the probes and the silence counted meanwhile decide
  // at the next look (node3 is marked then, not after heartbeat_timeout).
  rig.slurm.node_lists.set(false);
  REQUIRE(rig.engine->reads_settled(5s));
  rig.engine->start_reads(5s);  // from now on each look waits for its read
  rig.engine->tick();
  CHECK(rig.slurm.updated("fail node3 Action:Replace heartbeat: no heartbeat for"));
  CHECK(rig.detail("slurm_back").starts_with("slurmctld answers again after 2"));
  rig.run_for(2);
  CHECK(rig.step().verdict == Verdict::relaunch);
}

TEST_CASE("a round of probes slow to return holds up no look, and counts once it is in",
          "[engine][probe]") {
  ProbeRig rig;
  rig.engine->start_probes();
  rig.prober.rounds.set(true);  // a round waits out its timeout, and more
  rig.kill("node3");
  rig.engine->tick();  // starts a round, and returns while it waits
  REQUIRE(rig.prober.rounds.wait_for_waiter(5s));
  // The looks go on meanwhile, with no second round while one is out (the
  // clock stands still: a round that outlived its timeout is not counted).
  for (int i = 0; i < 3; ++i) {
    rig.beat_all();
    rig.engine->tick();
  }
  CHECK(rig.prober.rounds.waiting());
  CHECK(rig.step().state == StepState::registered);
  CHECK(rig.keeper->peer_work("node1", {}).empty());  // nothing counted yet
  rig.prober.rounds.set(false);
  REQUIRE(rig.engine->probes_settled(5s));
  // The next look counts the round: node3 was silent, its peers are asked.
  rig.engine->tick();
  const auto work = rig.keeper->peer_work("node1", {});
  REQUIRE(work.size() == 1);
  CHECK(work[0].node == "node3");
}
