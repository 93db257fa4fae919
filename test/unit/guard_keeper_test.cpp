// The guard rails (controller/gate.hpp, docs/guard.md) as the node keeper
// meets them: heartbeats' marks and the provider's replacements held back
// and said, the replacement limit, and an admin's replace refused.

#include "keeper_rig.hpp"

TEST_CASE("observe: a silent node is said once as a mark it would get, and not marked", "[guard]") {
  KeeperRig k;
  k.config.mode = ar::ActionMode::observe;
  k.tick();
  k.beat("node1");
  k.prober.dead.insert(kNode1Address);
  k.run_for(35);
  CHECK(k.slurm.updates.empty());
  CHECK(k.count(EventKind::marked) == 0);
  CHECK(k.prober.probes >= 2);  // looked at again each heartbeat_timeout, said once
  CHECK(k.details(EventKind::would) ==
        Strings{"observe: would mark node1 FAIL: no heartbeat for over heartbeat_timeout=10 s and "
                "its slurmd does not answer (no node agent to cross-check with)"});
  CHECK(k.node_of(EventKind::would) == "node1");
}

TEST_CASE(
    "observe: a node marked for replacement is not replaced, and an admin's replace is "
    "refused",
    "[guard]") {
  KeeperRig k;
  k.config.mode = ar::ActionMode::observe;
  k.mark("node1", "Action:Replace");
  for (int i = 0; i < 3; ++i) {
    k.tick();
    k.clock.advance(20s);
  }
  CHECK(k.runner.calls().empty());
  CHECK(k.slurm.updates.empty());
  CHECK(k.details(EventKind::would) ==
        Strings{"observe: would have the local provider replace node1 once no job runs on it"});
  CHECK_THROWS_MATCHES(
      k.keeper.request_replace("node2", RepairMode::wait), ar::ActionsHeld,
      Catch::Message("observe: would mark node2 FAIL (Action:Replace) and have the local provider "
                     "replace it; nothing was done (mode=observe in the controller's "
                     "configuration)"));
  CHECK(k.slurm.updates.empty());
  CHECK(k.state("node2") == "none");
}

TEST_CASE(
    "the breaker trips past max_replacements_per_hour and stops replacements until "
    "resume-actions",
    "[guard]") {
  KeeperRig k;
  k.config.max_replacements_per_hour = {1, false};
  k.mark("node1", "Action:Replace");
  k.tick();
  k.clock.advance(1s);
  k.mark("node2", "Action:Replace");
  k.tick();
  REQUIRE(k.tick_until([&] { return !k.runner.calls().empty(); }));  // node1's call, on its thread
  CHECK(k.runner.calls() == std::vector<Strings>{{"/bin/restart", "node1"}});
  CHECK(k.details(EventKind::breaker_tripped) ==
        Strings{"the circuit breaker tripped on node replacements: 1 within the last hour whose "
                "repair has not succeeded and 1 more now (node2) would pass "
                "max_replacements_per_hour=1; the controller acts on nothing until auto-resume "
                "resume-actions, or by itself after breaker_reset_after=3600 s with nothing held "
                "back"});
  // A heartbeat's mark is held back too.
  k.beat("node3");
  k.prober.dead.insert(kNode3Address);
  k.run_for(15);
  CHECK(k.runner.calls().size() == 1);
  CHECK(k.count(EventKind::marked) == 0);
  CHECK_FALSE(k.slurm.updated("fail node3"));
  k.keeper.gate().resume_actions(0);
  REQUIRE(k.tick_until([&] { return k.runner.calls().size() == 2; }));
  CHECK(k.runner.calls().back() == Strings{"/bin/restart", "node2"});
}

TEST_CASE("a breaker's detail names a few nodes and counts the rest", "[guard]") {
  KeeperRig k;
  k.config.max_marks_per_hour = {50, true};  // 2 of 4 nodes
  k.tick();
  Strings nodes;
  for (int i = 1; i <= 10; ++i) nodes.push_back("gpu" + std::to_string(i));
  CHECK_FALSE(k.keeper.gate().allow(ar::Gate::Counted::mark, nodes));
  CHECK(k.details(EventKind::breaker_tripped) ==
        Strings{"the circuit breaker tripped on node marks: 0 within the last hour whose repair "
                "has not succeeded and 10 more now (gpu1, gpu2, gpu3, gpu4, gpu5, gpu6, gpu7, "
                "gpu8 and 2 more) would pass max_marks_per_hour=50% (2 of 4 nodes); the "
                "controller acts on nothing until auto-resume resume-actions, or by itself after "
                "breaker_reset_after=3600 s with nothing held back"});
  CHECK(k.keeper.gate().state().marks == 0);  // nothing counted: nothing was done
  CHECK_FALSE(k.keeper.gate().allow(ar::Gate::Counted::replacement, {"node1"}));  // held
}
