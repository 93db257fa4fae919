// The node keeper driven through the fakes (heartbeats and their guards). These pin what the
// keeper does today; a test whose name ends in "(today and issue 11 flips
// it)" pins behaviour that looks wrong and that issue changes.

#include "keeper_rig.hpp"

// Heartbeats

TEST_CASE("a node heard and then silent past the timeout whose slurmd does not answer is marked",
          "[node_keeper]") {
  KeeperRig k;
  k.tick();
  k.keeper.heartbeat("node1", false);
  k.prober.dead.insert(kNode1Address);
  k.run_for(10);  // silent for the timeout itself: not yet
  CHECK(k.slurm.updates.empty());
  CHECK(k.prober.probes == 0);
  k.run_for(1);
  CHECK(k.prober.probes == 1);
  CHECK(k.slurm.updates == Strings{"fail node1 " + heartbeat_reason(11)});
  CHECK(k.details(EventKind::marked) == Strings{"node1 marked FAIL: " + heartbeat_reason(11)});
  CHECK(k.node_of(EventKind::marked) == "node1");
  CHECK(k.keeper.heartbeat_ages().empty());  // watched again once heard again
  // The next look finds the mark: a replacement whose steps move at once.
  k.tick();
  const auto repair = k.store.node_repair("node1");
  REQUIRE(repair);
  CHECK(repair->mode == RepairMode::now);
  CHECK(repair->reason == heartbeat_reason(11));
}

TEST_CASE("a silent node whose slurmd answers is not marked but has one heartbeat_late event",
          "[node_keeper]") {
  KeeperRig k;
  k.tick();
  k.keeper.heartbeat("node1", false);
  k.run_for(11);
  CHECK(k.prober.probes == 1);
  CHECK(k.details(EventKind::heartbeat_late) ==
        Strings{"no heartbeat from node1 for 11 s, but its slurmd answers: not marked (is its "
                "agent running?)"});
  k.run_for(9);
  CHECK(k.prober.probes == 1);  // probed again once per heartbeat_timeout
  k.run_for(1);
  CHECK(k.prober.probes == 2);
  CHECK(k.count(EventKind::heartbeat_late) == 1);
  CHECK(k.count(EventKind::marked) == 0);
  CHECK(k.slurm.updates.empty());
}

TEST_CASE("a node never heard is never marked", "[node_keeper]") {
  KeeperRig k;
  k.prober.dead = {kNode1Address, kNode2Address, kNode3Address, "127.0.0.14"};
  k.tick();
  k.run_for(60);
  CHECK(k.slurm.updates.empty());
  CHECK(k.prober.probes == 0);
  CHECK(k.count(EventKind::marked) == 0);
  CHECK(k.keeper.heartbeat_ages().empty());
}

TEST_CASE("a stopping heartbeat unwatches the node until it is heard again", "[node_keeper]") {
  KeeperRig k;
  k.tick();
  k.prober.dead.insert(kNode1Address);
  k.keeper.heartbeat("node1", false);
  k.run_for(3);
  k.keeper.heartbeat("node1", true);
  CHECK(k.keeper.heartbeat_ages().empty());
  k.run_for(30);
  CHECK(k.slurm.updates.empty());
  CHECK(k.prober.probes == 0);
  k.keeper.heartbeat("node1", false);
  k.run_for(11);
  CHECK(k.slurm.updates == Strings{"fail node1 " + heartbeat_reason(11)});
}

TEST_CASE("a heartbeat for a node slurmctld does not know is refused once the keeper has ticked",
          "[node_keeper]") {
  KeeperRig k;
  // Before the first look there is no node list to check against.
  CHECK_NOTHROW(k.keeper.heartbeat("nodeX", false));
  k.tick();
  CHECK_THROWS_AS(k.keeper.heartbeat("nodeY", false), std::invalid_argument);
  CHECK_THROWS_WITH(k.keeper.heartbeat("nodeY", false),
                    "slurmctld does not know node 'nodeY' (start the agent with --node NAME as "
                    "slurm.conf names it)");
  CHECK_THROWS_AS(k.keeper.heartbeat("nodeY", true), std::invalid_argument);
  CHECK_NOTHROW(k.keeper.heartbeat("node1", false));
  // The unknown node taken before the first look stays watched.
  CHECK(k.keeper.heartbeat_ages() == std::map<std::string, double>{{"node1", 0.0}, {"nodeX", 0.0}});
}

TEST_CASE("a zero heartbeat_timeout turns the watching off", "[node_keeper]") {
  KeeperRig k;
  k.config.heartbeat_timeout = 0ms;
  k.tick();
  k.keeper.heartbeat("node1", false);
  k.prober.dead.insert(kNode1Address);
  k.run_for(60);
  k.clock.advance(60s);
  k.tick();
  CHECK(k.slurm.updates.empty());
  CHECK(k.prober.probes == 0);
  CHECK(k.count(EventKind::marked) == 0);
  CHECK(k.count(EventKind::stalled) == 0);
}

TEST_CASE(
    "an unknown node heard before the first tick stays and counts in the crowd guard (today and "
    "issue 11 flips it)",
    "[node_keeper]") {
  KeeperRig k;
  k.keeper.heartbeat("nodeX", false);  // taken: no node list yet
  k.tick();
  for (const auto* node : {"node1", "node2", "node3"}) k.keeper.heartbeat(node, false);
  k.prober.dead = {kNode1Address, kNode2Address};
  // 2 of the 3 nodes slurmctld knows are silent (a crowd at 50 %), but
  // nodeX counts as a fourth heard node: 2 of 4 is not more than 50 %.
  k.run_for(11, {"node3"});
  CHECK(k.count(EventKind::heartbeat_crowd) == 0);
  CHECK(k.slurm.updates ==
        Strings{"fail node1 " + heartbeat_reason(11), "fail node2 " + heartbeat_reason(11)});
  CHECK(k.keeper.heartbeat_ages().contains("nodeX"));
}

TEST_CASE(
    "a node returned after a health check mark is probed for its old agent silence (today and "
    "issue 11 flips it)",
    "[node_keeper]") {
  KeeperRig k;
  k.tick();
  k.run_for(2, {"node1"});
  // A health check's mark: the node's agent goes with the old instance.
  k.mark("node1", "Action:Replace gpu: XID 79 on GPU 3");
  k.tick();
  REQUIRE(k.tick_until([&] { return k.count(EventKind::provider_done) == 1; }));
  k.run_for(30);
  CHECK(k.prober.probes == 0);  // out of service: not watched
  k.slurm.nodes.at("node1").slurmd_start_time = k.store.node_repair("node1").value().called_at;
  k.tick();
  REQUIRE(k.slurm.updates == Strings{"resume node1"});
  // The next look holds the old agent's silence against the new instance.
  k.tick();
  CHECK(k.prober.probes == 1);
  CHECK(k.details(EventKind::heartbeat_late) ==
        Strings{"no heartbeat from node1 for 30 s, but its slurmd answers: not marked (is its "
                "agent running?)"});
}

// The stall guard

TEST_CASE("a gap between ticks longer than half the timeout restarts every deadline",
          "[node_keeper]") {
  KeeperRig k;
  k.tick();
  k.keeper.heartbeat("node1", false);
  k.prober.dead.insert(kNode1Address);
  k.run_for(9);
  k.clock.advance(6s);  // past the timeout, but the controller stood still 6 s
  k.tick();
  CHECK(k.details(EventKind::stalled) ==
        Strings{"the controller stood still for 6.0 s: every node's heartbeat deadline starts "
                "again"});
  CHECK(k.node_of(EventKind::stalled).empty());
  CHECK(k.slurm.updates.empty());
  CHECK(k.prober.probes == 0);
  CHECK(k.keeper.heartbeat_ages() == std::map<std::string, double>{{"node1", 0.0}});
  k.run_for(10);
  CHECK(k.slurm.updates.empty());
  k.run_for(1);  // 11 s after the stall
  CHECK(k.slurm.updates == Strings{"fail node1 " + heartbeat_reason(11)});
}

TEST_CASE("the stall threshold is half the timeout but at least 2 s even with no node watched",
          "[node_keeper]") {
  KeeperRig k;
  k.tick();
  k.clock.advance(5s);
  k.tick();
  CHECK(k.count(EventKind::stalled) == 0);
  k.clock.advance(5001ms);
  k.tick();
  CHECK(k.count(EventKind::stalled) == 1);
  k.config.heartbeat_timeout = 2s;  // half of it is 1 s: the floor of 2 s holds
  k.clock.advance(2s);
  k.tick();
  CHECK(k.count(EventKind::stalled) == 1);
  k.clock.advance(2001ms);
  k.tick();
  CHECK(k.count(EventKind::stalled) == 2);
}

// The crowd guard

TEST_CASE("more than heartbeat_max_silent_percent of the heard nodes late at once marks none",
          "[node_keeper]") {
  KeeperRig k;
  k.tick();
  for (const auto* node : {"node1", "node2", "node3", "node4"}) k.keeper.heartbeat(node, false);
  k.prober.dead = {kNode1Address, kNode2Address, kNode3Address};
  k.run_for(30, {"node4"});
  CHECK(k.slurm.updates.empty());
  CHECK(k.prober.probes == 0);
  CHECK(k.details(EventKind::heartbeat_crowd) ==
        Strings{"3 of 4 nodes are silent at once (node1,node2,node3): the controller's own "
                "network is the likelier fault; none is marked (heartbeat_max_silent_percent=50)"});
  CHECK(k.node_of(EventKind::heartbeat_crowd).empty());
  // All heard again ends the episode; the next crowd has its own event.
  k.run_for(1, {"node1", "node2", "node3", "node4"});
  k.run_for(10, {"node4"});
  CHECK(k.count(EventKind::heartbeat_crowd) == 2);
  CHECK(k.slurm.updates.empty());
}

TEST_CASE("at the heartbeat_max_silent_percent limit the silent nodes are marked",
          "[node_keeper]") {
  KeeperRig k;
  k.tick();
  for (const auto* node : {"node1", "node2", "node3", "node4"}) k.keeper.heartbeat(node, false);
  k.prober.dead = {kNode1Address, kNode2Address};
  k.run_for(11, {"node3", "node4"});  // 2 of 4 late: 50 %, not more
  CHECK(k.count(EventKind::heartbeat_crowd) == 0);
  CHECK(k.slurm.updates ==
        Strings{"fail node1 " + heartbeat_reason(11), "fail node2 " + heartbeat_reason(11)});
  CHECK(k.count(EventKind::marked) == 2);
}

// Replacement modes
