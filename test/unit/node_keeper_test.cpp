// The node keeper driven through the fakes (heartbeats and their guards). These pin what the
// keeper does today; a test whose name ends in "(today and issue 11 flips
// it)" pins behaviour that looks wrong and that issue changes.

#include <functional>
#include <thread>

#include "full_store.hpp"
#include "keeper_rig.hpp"
#include "stderr_capture.hpp"

// Heartbeats

TEST_CASE("a node heard and then silent past the timeout whose slurmd does not answer is marked",
          "[node_keeper]") {
  KeeperRig k;
  k.tick();
  k.beat("node1");
  k.prober.dead.insert(kNode1Address);
  k.run_for(10);  // silent for the timeout itself: not yet
  CHECK(k.slurm.updates.empty());
  CHECK(k.prober.probes == 1);  // looked at from 3 s before the deadline (arm_lead)
  k.run_for(1);
  CHECK(k.prober.probes == 1);
  CHECK(k.slurm.updates == Strings{"fail node1 " + heartbeat_reason(11)});
  CHECK(k.details(EventKind::marked) == Strings{"node1 marked FAIL: " + heartbeat_reason(11) +
                                                " (no node agent to cross-check with)"});
  CHECK(k.node_of(EventKind::marked) == "node1");
  CHECK(k.keeper.heartbeat_ages().empty());  // watched again once heard again
  // The next look finds the mark: a replacement whose steps move at once.
  k.tick();
  const auto repair = k.store.node_repair("node1");
  REQUIRE(repair);
  CHECK(repair->mode == RepairMode::now);
  CHECK(repair->reason == heartbeat_reason(11));
}

TEST_CASE(
    "a slurmctld slow to take a silent node's FAIL mark holds up no look, and the mark's "
    "event follows its answer",
    "[node_keeper]") {
  KeeperRig k;
  k.keeper.start_calls();  // the deep probe and the mark on threads of their own
  k.watch_look_thread();
  k.tick();
  k.beat("node1");
  k.prober.dead.insert(kNode1Address);
  k.slurm.fail_marks_of = "node1";
  k.slurm.fail_marks.set(true);
  k.run_for(11);  // silent past the timeout: the deep probe goes out
  // Looks (the clock standing still) until the mark waits for slurmctld.
  auto look_until = [&](const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      k.tick();
      std::this_thread::sleep_for(10ms);
    }
    return true;
  };
  REQUIRE(look_until([&] { return k.slurm.fail_marks.waiting(); }));
  k.tick();  // returns while the mark waits
  CHECK(k.slurm.fail_marks.waiting());
  CHECK(k.details(EventKind::marked).empty());
  k.slurm.fail_marks.set(false);
  REQUIRE(look_until([&] { return !k.details(EventKind::marked).empty(); }));
  CHECK(k.slurm.updates == Strings{"fail node1 " + heartbeat_reason(11)});
  CHECK(k.details(EventKind::marked) == Strings{"node1 marked FAIL: " + heartbeat_reason(11) +
                                                " (no node agent to cross-check with)"});
  CHECK(k.look_thread_calls() == 0);  // neither the probe nor the mark
}

TEST_CASE("a silent node whose slurmd answers is not marked but has one heartbeat_late event",
          "[node_keeper]") {
  KeeperRig k;
  k.tick();
  k.beat("node1");
  k.run_for(10);
  CHECK(k.prober.probes == 1);  // 3 s before the deadline: it answers, nothing said
  CHECK(k.details(EventKind::heartbeat_late).empty());
  k.run_for(1);
  CHECK(k.prober.probes == 2);  // silent now: looked at again
  CHECK(k.details(EventKind::heartbeat_late) ==
        Strings{"no heartbeat from node1 for 11 s, but its slurmd answers: not marked (is its "
                "agent running?)"});
  k.run_for(9);
  CHECK(k.prober.probes == 2);  // probed again once per heartbeat_timeout
  k.run_for(1);
  CHECK(k.prober.probes == 3);
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
  k.beat("node1");
  k.run_for(3);
  k.beat("node1", true);
  CHECK(k.keeper.heartbeat_ages().empty());
  k.run_for(30);
  CHECK(k.slurm.updates.empty());
  CHECK(k.prober.probes == 0);
  k.beat("node1");
  k.run_for(11);
  CHECK(k.slurm.updates == Strings{"fail node1 " + heartbeat_reason(11)});
}

TEST_CASE("a heartbeat for a node slurmctld does not know is refused", "[node_keeper]") {
  KeeperRig k;
  k.tick();
  CHECK_THROWS_AS(k.beat("nodeY"), std::invalid_argument);
  CHECK_THROWS_WITH(k.beat("nodeY"),
                    "slurmctld does not know node 'nodeY' (start the agent with --node NAME as "
                    "slurm.conf names it)");
  CHECK_THROWS_AS(k.beat("nodeY", true), std::invalid_argument);
  CHECK_NOTHROW(k.beat("node1"));
  CHECK(k.keeper.heartbeat_ages() == std::map<std::string, double>{{"node1", 0.0}});
}

// Where heartbeats come from

// The reason a refused heartbeat gives, or "taken".
std::string refusal(KeeperRig& k, const std::string& node, const std::string& peer) {
  try {
    k.keeper.heartbeat(node, false, peer);
    return "taken";
  } catch (const ar::HeartbeatRefused& e) {
    return std::string(e.why() == ar::HeartbeatRefused::Why::not_yet ? "not yet: " : "") + e.what();
  }
}

TEST_CASE("a heartbeat before the first look at the nodes is refused as not yet", "[origin]") {
  KeeperRig k;
  CHECK(refusal(k, "node1", kNode1Address) ==
        "not yet: the controller has not loaded the nodes from slurmctld yet");
  CHECK(k.keeper.heartbeat_ages().empty());
  k.tick();
  CHECK(refusal(k, "node1", kNode1Address) == "taken");
}

TEST_CASE("a heartbeat from another node's address is refused and hides nothing", "[origin]") {
  KeeperRig k;
  k.tick();
  k.beat("node2");
  // node1's agent started with a copied --node node2.
  CHECK(refusal(k, "node2", kNode1Address) ==
        "a heartbeat for node2 from 127.0.0.11, which is not the node's address: node2 is at "
        "127.0.0.12 (NodeAddr) (an agent on another host started with --node node2? An address "
        "of the node's own can be added with heartbeat_bind)");
  CHECK(refusal(k, "node2", "::ffff:127.0.0.12") == "taken");  // IPv4-mapped: the same address
  CHECK(refusal(k, "node2", "not-an-address") ==
        "a heartbeat for node2 from 'not-an-address', not a numeric address");
  // node2 freezes while node1's agent goes on speaking for it: still marked.
  k.prober.dead.insert(kNode2Address);
  for (int i = 0; i < 11; ++i) {
    k.clock.advance(1s);
    CHECK_THROWS_AS(k.keeper.heartbeat("node2", false, kNode1Address), ar::HeartbeatRefused);
    k.tick();
  }
  CHECK(k.slurm.updates == Strings{"fail node2 " + heartbeat_reason(11)});
}

TEST_CASE("a heartbeat is taken from the node's NodeHostname, resolved", "[origin]") {
  KeeperRig k;
  k.slurm.nodes.at("node3").address = "192.0.2.13";  // an address this host does not hold
  k.slurm.nodes.at("node3").hostname = "localhost";
  k.tick();
  CHECK(refusal(k, "node3", "127.0.0.1") == "taken");
  k.slurm.nodes.at("node3").hostname = "no-such-host.invalid";
  k.tick();
  CHECK_THAT(refusal(k, "node3", "127.0.0.1"),
             Catch::Contains("node3 is at 192.0.2.13 (NodeAddr), no-such-host.invalid "
                             "(NodeHostname: does not resolve: "));
}

TEST_CASE("a heartbeat is at hand when its origin is decided without a name lookup", "[origin]") {
  KeeperRig k;
  k.slurm.nodes.at("node3").address = "192.0.2.13";
  k.slurm.nodes.at("node3").hostname = "localhost";
  k.tick();
  // Numeric NodeAddr: decided at once, taken or refused.
  CHECK(k.keeper.heartbeat_at_hand("node1", kNode1Address));
  CHECK(k.keeper.heartbeat_at_hand("node2", kNode1Address));
  CHECK(k.keeper.heartbeat_at_hand("nodeY", kNode1Address));  // unknown: refused at once
  // node3 from elsewhere than its NodeAddr: its NodeHostname must be
  // looked up first, which a heartbeat answered on the io thread must not.
  CHECK_FALSE(k.keeper.heartbeat_at_hand("node3", "127.0.0.1"));
  CHECK(refusal(k, "node3", "127.0.0.1") == "taken");       // looked up, on a worker
  CHECK(k.keeper.heartbeat_at_hand("node3", "127.0.0.1"));  // in the cache now
}

TEST_CASE("heartbeat_bind adds addresses and networks per node", "[origin]") {
  KeeperRig k;
  k.config.heartbeat_bind = {{"node[1-2]", "10.1.0.0", 16, false}, {"node3", "fd00::7", 128, true}};
  ar::NodeKeeper keeper{k.store, k.config, k.slurm, k.clock, k.prober, k.runner};
  ar::NodeKeeper::NodeMap nodes;
  for (const auto& node : k.slurm.load_nodes()) nodes[node.name] = &node;
  keeper.tick(nodes, {});
  CHECK_NOTHROW(keeper.heartbeat("node1", false, "10.1.200.3"));
  CHECK_NOTHROW(keeper.heartbeat("node2", false, "10.1.0.1"));
  CHECK_NOTHROW(keeper.heartbeat("node2", false, kNode2Address));  // its NodeAddr still
  CHECK_NOTHROW(keeper.heartbeat("node3", false, "fd00::7"));
  CHECK_THROWS_WITH(keeper.heartbeat("node3", false, "10.1.0.1"),
                    Catch::Contains("node3 is at fd00::7 (heartbeat_bind), 127.0.0.13 (NodeAddr)"));
  CHECK_THROWS_WITH(keeper.heartbeat("node1", false, "10.2.0.1"),
                    Catch::Contains("node1 is at 10.1.0.0/16 (heartbeat_bind)"));
}

TEST_CASE("a heartbeat_bind entry the keeper cannot expand stops it with the entry named",
          "[origin]") {
  KeeperRig k;
  k.config.heartbeat_bind = {{"node[1-", "10.1.0.0", 16, false}};
  CHECK_THROWS_WITH((ar::NodeKeeper{k.store, k.config, k.slurm, k.clock, k.prober, k.runner}),
                    Catch::StartsWith("heartbeat_bind entry 'node[1-=10.1.0.0/16': "));
}

TEST_CASE("a zero heartbeat_timeout turns the watching off", "[node_keeper]") {
  KeeperRig k;
  k.config.heartbeat_timeout = 0ms;
  k.tick();
  k.beat("node1");
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
    "a heartbeat before the first tick is refused, so no unknown node dilutes the crowd guard",
    "[node_keeper]") {
  KeeperRig k;
  CHECK_THROWS_AS(k.beat("nodeX"), ar::HeartbeatRefused);  // no node list yet
  k.tick();
  for (const auto* node : {"node1", "node2", "node3"}) k.beat(node);
  k.prober.dead = {kNode1Address, kNode2Address};
  // 2 of the 3 nodes heard are silent: a crowd above 50 %, nothing marked.
  k.run_for(11, {"node3"});
  CHECK(k.count(EventKind::heartbeat_crowd) == 1);
  CHECK(k.slurm.updates.empty());
  CHECK_FALSE(k.keeper.heartbeat_ages().contains("nodeX"));
}

TEST_CASE("a node returned as a new instance is watched again only once its own agent is heard",
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
  // The old agent's silence is not held against the new instance: not
  // watched until its own agent is heard.
  k.tick();
  CHECK(k.keeper.heartbeat_ages().empty());
  k.run_for(30);
  CHECK(k.prober.probes == 0);
  CHECK(k.details(EventKind::heartbeat_late).empty());
  // Heard, then silent: its deadline counts from its own agent's heartbeat.
  k.run_for(3, {"node1"});
  k.run_for(7);
  CHECK(k.prober.probes == 0);
  k.run_for(1);
  CHECK(k.prober.probes == 1);  // 3 s before its deadline
  k.run_for(3);
  CHECK(k.prober.probes == 2);  // silent: again
  CHECK(k.details(EventKind::heartbeat_late) ==
        Strings{"no heartbeat from node1 for 11 s, but its slurmd answers: not marked (is its "
                "agent running?)"});
}

// The stall guard

TEST_CASE("a gap between ticks longer than half the timeout restarts every deadline",
          "[node_keeper]") {
  KeeperRig k;
  k.tick();
  k.beat("node1");
  k.prober.dead.insert(kNode1Address);
  k.run_for(9);
  CHECK(k.prober.probes == 1);  // 3 s before the deadline
  k.clock.advance(6s);          // past the timeout, but the controller stood still 6 s
  k.tick();
  CHECK(k.details(EventKind::stalled) ==
        Strings{"the controller stood still for 6.0 s: every node's heartbeat deadline starts "
                "again"});
  CHECK(k.node_of(EventKind::stalled).empty());
  CHECK(k.slurm.updates.empty());
  CHECK(k.prober.probes == 1);
  CHECK(k.keeper.heartbeat_ages() == std::map<std::string, double>{{"node1", 0.0}});
  k.run_for(10);
  CHECK(k.slurm.updates.empty());
  k.run_for(1);  // 11 s after the stall
  CHECK(k.slurm.updates == Strings{"fail node1 " + heartbeat_reason(11)});
}

TEST_CASE("the stall threshold is half the timeout but at least 2 s", "[node_keeper]") {
  KeeperRig k;
  k.tick();
  // node1's agent is heard just before every look: never late itself.
  const auto look_after = [&](std::chrono::milliseconds gap) {
    k.clock.advance(gap);
    k.beat("node1");
    k.tick();
  };
  look_after(5s);
  CHECK(k.count(EventKind::stalled) == 0);
  look_after(5001ms);
  CHECK(k.count(EventKind::stalled) == 1);
  k.config.heartbeat_timeout = 2s;  // half of it is 1 s: the floor of 2 s holds
  look_after(2s);
  CHECK(k.count(EventKind::stalled) == 1);
  look_after(2001ms);
  CHECK(k.count(EventKind::stalled) == 2);
  CHECK(k.slurm.updates.empty());
}

TEST_CASE("a stall while no node agent is heard restarts no deadline and records no event",
          "[node_keeper][stall]") {
  KeeperRig k;
  k.tick();
  // A cluster without node agents (the demo's): nothing to start again.
  k.clock.advance(60s);
  k.tick();
  CHECK(k.count(EventKind::stalled) == 0);
  CHECK(k.keeper.heartbeat_ages().empty());
  // Once an agent is heard, a stall restarts its deadline and says so.
  k.beat("node1");
  k.clock.advance(6s);
  k.tick();
  CHECK(k.details(EventKind::stalled) ==
        Strings{"the controller stood still for 6.0 s: every node's heartbeat deadline starts "
                "again"});
  CHECK(k.keeper.heartbeat_ages() == std::map<std::string, double>{{"node1", 0.0}});
  // Its agent says goodbye: none heard again, and the next stall is quiet.
  k.beat("node1", true);
  k.clock.advance(60s);
  k.tick();
  CHECK(k.count(EventKind::stalled) == 1);
  CHECK(k.slurm.updates.empty());
  CHECK(k.prober.probes == 0);
}

// The crowd guard

TEST_CASE("more than heartbeat_max_silent_percent of the heard nodes late at once marks none",
          "[node_keeper]") {
  KeeperRig k;
  k.tick();
  for (const auto* node : {"node1", "node2", "node3", "node4"}) k.beat(node);
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
  for (const auto* node : {"node1", "node2", "node3", "node4"}) k.beat(node);
  k.prober.dead = {kNode1Address, kNode2Address};
  k.run_for(11, {"node3", "node4"});  // 2 of 4 late: 50 %, not more
  CHECK(k.count(EventKind::heartbeat_crowd) == 0);
  // The live agents look first: node3's cannot reach either.
  CHECK(k.slurm.updates.empty());
  const auto work = k.keeper.peer_work("node3", {});
  REQUIRE(work.size() == 2);
  CHECK(work[0].node == "node1");
  CHECK(work[0].address == kNode1Address);
  CHECK(work[0].deep);  // as the keeper's own probe: a frozen slurmd still takes connections
  k.keeper.peer_work("node3",
                     {{"node1", ar::ProbeResult::silent}, {"node2", ar::ProbeResult::silent}});
  k.tick();
  CHECK(k.slurm.updates ==
        Strings{"fail node1 " + heartbeat_reason(11), "fail node2 " + heartbeat_reason(11)});
  CHECK(k.details(EventKind::marked).at(0) == "node1 marked FAIL: " + heartbeat_reason(11) +
                                                  " (the agent of node3 cannot reach it either)");
}

TEST_CASE(
    "a silent node whose slurmd another node's agent reaches is not marked (the controller's "
    "route to it is lost)",
    "[node_keeper][cross_check]") {
  KeeperRig k;
  k.tick();
  for (const auto* node : {"node1", "node2", "node3", "node4"}) k.beat(node);
  k.prober.dead = {kNode1Address};  // as the controller sees it
  k.run_for(11, {"node2", "node3", "node4"});
  REQUIRE(k.prober.probes == 1);
  CHECK(k.keeper.peer_work("node3", {}).size() == 1);
  CHECK(k.keeper.peer_work("node4", {}).empty());  // two agents are asked, the first two
  // node2's agent answers each time it is asked (again after each timeout).
  for (int i = 0; i < 40; ++i) {
    const auto work = k.keeper.peer_work("node2", {});
    if (!work.empty()) k.keeper.peer_work("node2", {{"node1", ar::ProbeResult::answered}});
    k.run_for(1, {"node2", "node3", "node4"});
  }
  CHECK(k.prober.probes > 2);
  CHECK(k.slurm.updates.empty());
  CHECK(k.details(EventKind::heartbeat_late) ==
        Strings{"no heartbeat from node1 for 12 s and the controller cannot reach its slurmd, but "
                "the agent of node2 reaches its slurmd: not marked (the controller's route to it "
                "is the likelier fault)"});
}

TEST_CASE("agents that do not answer a cross-check within 5 s leave the controller's view",
          "[node_keeper][cross_check]") {
  KeeperRig k;
  k.tick();
  for (const auto* node : {"node1", "node2"}) k.beat(node);
  k.prober.dead = {kNode1Address};
  k.run_for(8, {"node2"});  // asked 3 s before the deadline
  k.run_for(4, {"node2"});
  CHECK(k.slurm.updates.empty());
  k.run_for(1, {"node2"});
  CHECK(k.slurm.updates == Strings{"fail node1 " + heartbeat_reason(13)});
  CHECK(k.details(EventKind::marked).at(0) ==
        "node1 marked FAIL: " + heartbeat_reason(13) +
            " (no answer from the agents of node2 within 5 s)");
}

TEST_CASE(
    "the deep probe and the cross-check start 3 s before a silent node's deadline, so that it is "
    "marked at the deadline",
    "[node_keeper][cross_check]") {
  KeeperRig k;
  k.tick();
  for (const auto* node : {"node1", "node2", "node3"}) k.beat(node);
  k.prober.dead = {kNode1Address};
  k.run_for(8, {"node2", "node3"});  // node1 silent 8 s: past the deadline less 3 s
  CHECK(k.prober.probes == 1);
  REQUIRE(k.keeper.peer_work("node2", {}).size() == 1);
  k.keeper.peer_work("node2", {{"node1", ar::ProbeResult::silent}});
  k.run_for(2, {"node2", "node3"});  // the evidence is in; the deadline is not past
  CHECK(k.slurm.updates.empty());
  k.run_for(1, {"node2", "node3"});
  CHECK(k.slurm.updates == Strings{"fail node1 " + heartbeat_reason(11)});
  CHECK(k.details(EventKind::marked) == Strings{"node1 marked FAIL: " + heartbeat_reason(11) +
                                                " (the agent of node2 cannot reach it either)"});
  CHECK(k.prober.probes == 1);
}

TEST_CASE("with a short heartbeat_timeout a node beating at its interval is never probed early",
          "[node_keeper]") {
  KeeperRig k;
  k.config.heartbeat_timeout = 3s;  // armed at 1.5 s, were its 2 s beats not fresh
  k.tick();
  for (int i = 0; i < 10; ++i) {
    k.beat("node1");
    k.tick();
    k.clock.advance(1s);
    k.tick();
    k.clock.advance(1s);
  }
  CHECK(k.prober.probes == 0);
  k.prober.dead.insert(kNode1Address);
  k.run_for(4);  // silent past the timeout: probed and marked at the deadline
  CHECK(k.prober.probes == 1);
  CHECK(k.slurm.updates == Strings{"fail node1 " + heartbeat_reason(4)});
}

TEST_CASE("a node heard again after its cross-check and before its deadline is not marked",
          "[node_keeper][cross_check]") {
  KeeperRig k;
  k.tick();
  for (const auto* node : {"node1", "node2", "node3"}) k.beat(node);
  k.prober.dead = {kNode1Address};
  k.run_for(8, {"node2", "node3"});
  REQUIRE(k.keeper.peer_work("node2", {}).size() == 1);
  k.keeper.peer_work("node2", {{"node1", ar::ProbeResult::silent}});
  k.run_for(1, {"node1", "node2", "node3"});       // node1's agent is back
  CHECK(k.keeper.peer_work("node2", {}).empty());  // the cross-check is withdrawn
  k.run_for(5, {"node2", "node3"});
  CHECK(k.slurm.updates.empty());
  CHECK(k.count(EventKind::marked) == 0);
}

TEST_CASE("an agent's results count only for the nodes it was asked about",
          "[node_keeper][cross_check]") {
  KeeperRig k;
  k.tick();
  for (const auto* node : {"node1", "node2", "node3"}) k.beat(node);
  k.prober.dead = {kNode1Address};
  k.run_for(11, {"node2", "node3"});
  // node4 was never heard: it is not asked, and what it says is ignored.
  CHECK(k.keeper.peer_work("node4", {{"node1", ar::ProbeResult::answered}}).empty());
  k.keeper.peer_work("node2", {{"node1", ar::ProbeResult::silent}});
  k.tick();
  CHECK(k.slurm.updates == Strings{"fail node1 " + heartbeat_reason(11)});
}

// Replacement modes

TEST_CASE("a store that cannot write is said once, not at every tick, and again once it writes",
          "[node_keeper][limits]") {
  ar::test::StderrCapture log;
  KeeperRig k;
  k.tick();
  k.mark("node1", "Action:Replace gpu: XID 79 on GPU 3");
  {
    ar::test::FullStore full(k.dir.path);  // the state disk is full
    for (int i = 0; i < 10; ++i) {
      k.clock.advance(500ms);
      k.tick();
    }
    CHECK_FALSE(k.store.node_repair("node1"));
    CHECK(ar::test::lines_with(log.text(), "database or disk is full") == 1);
  }
  k.tick();
  CHECK(k.store.node_repair("node1"));
  CHECK(ar::test::lines_with(log.text(), "replacements: working again") == 1);
  CHECK(ar::test::lines_with(log.text(), "database or disk is full") == 1);
}
