// The node keeper driven through the fakes (replacements, providers and spares). These pin what the
// keeper does today; a test whose name ends in "(today and issue 11 flips
// it)" pins behaviour that looks wrong and that issue changes.

#include "keeper_rig.hpp"

TEST_CASE("replace wait marks the node FAIL and calls the provider once its jobs ended",
          "[node_keeper]") {
  KeeperRig k;
  k.slurm.add_job(10, 1000, {"node1"});
  CHECK(k.keeper.request_replace("node1", RepairMode::wait) ==
        "node1 marked FAIL with reason 'Action:Replace': running jobs finish first, then the "
        "local provider replaces it");
  CHECK(k.slurm.updates == Strings{"fail node1 Action:Replace"});
  const auto repair = k.store.node_repair("node1");
  REQUIRE(repair);
  CHECK(repair->state == NodeRepairState::waiting);
  CHECK(repair->mode == RepairMode::wait);
  CHECK(repair->reason == "Action:Replace");
  CHECK(repair->instance == 1001);
  CHECK(k.details(EventKind::replace_requested) ==
        Strings{"node1 marked FAIL (Action:Replace): running jobs finish first"});
  k.tick();
  k.clock.advance(60s);
  k.tick();
  CHECK(k.state("node1") == "waiting");
  CHECK_FALSE(k.keeper.replacing());  // a slurmctld restart may go ahead
  CHECK(k.details(EventKind::waiting) == Strings{"waiting for the jobs on node1 to end"});
  CHECK(k.count(EventKind::provider) == 0);
  CHECK(k.runner.calls().empty());
  k.slurm.jobs.erase(10);
  k.tick();
  CHECK(k.details(EventKind::jobs_gone) == Strings{"no job runs on node1: replacing it"});
  CHECK(k.details(EventKind::provider) ==
        Strings{"asking the local provider to replace node1 (try 1 of 3)"});
  CHECK(k.keeper.replacing());
  REQUIRE(k.tick_until([&] { return k.state("node1") == "returning"; }));
  k.tick();
  CHECK(k.keeper.replacing());  // until the node is back
  CHECK(k.runner.calls() == std::vector<Strings>{{"/bin/restart", "node1"}});
  CHECK(k.slurm.updates == Strings{"fail node1 Action:Replace"});
}

TEST_CASE(
    "a replacement asked for after the node list was read waits for a list read after it (a job "
    "started on the node just before would be missed)",
    "[node_keeper]") {
  KeeperRig k;
  const auto read_before = k.clock.now();
  k.clock.advance(1s);
  k.keeper.request_replace("node1", RepairMode::wait);
  k.slurm.add_job(10, 1000, {"node1"});  // started just before the mark
  ar::NodeKeeper::NodeMap nodes;
  const auto& listed = k.slurm.load_nodes();
  for (const auto& node : listed) nodes[node.name] = &node;
  k.keeper.tick(nodes, {}, false, read_before);
  CHECK(k.keeper.busy());  // the engine's next look reads
  CHECK(k.count(EventKind::waiting) == 0);
  k.keeper.tick(nodes, {}, false, k.clock.now());
  CHECK(k.details(EventKind::waiting) == Strings{"waiting for the jobs on node1 to end"});
  CHECK(k.runner.calls().empty());
  CHECK_FALSE(k.keeper.busy());
}

TEST_CASE("replace now marks the node with the admin reason the resume engine acts on",
          "[node_keeper]") {
  KeeperRig k;
  k.slurm.add_job(10, 1000, {"node1"});
  CHECK(k.keeper.request_replace("node1", RepairMode::now) ==
        "node1 marked FAIL with reason 'Action:Replace admin: replacement requested (--now)': "
        "protected steps on it are resumed elsewhere now, other jobs finish, then the local "
        "provider replaces it");
  CHECK(k.slurm.updates ==
        Strings{"fail node1 Action:Replace admin: replacement requested (--now)"});
  k.tick();
  const auto repair = k.store.node_repair("node1");
  REQUIRE(repair);
  CHECK(repair->mode == RepairMode::now);
  CHECK(repair->state == NodeRepairState::waiting);  // the other jobs finish
  CHECK(k.slurm.updates.size() == 1);
}

TEST_CASE("replace force sets the node DOWN at once when no protected step is on it",
          "[node_keeper]") {
  KeeperRig k;
  k.slurm.add_job(10, 1000, {"node1"});
  k.keeper.request_replace("node1", RepairMode::force);
  CHECK(k.slurm.updates ==
        Strings{"fail node1 Action:Replace admin: replacement forced (--force)"});
  k.tick();
  CHECK(k.slurm.updates ==
        Strings{"fail node1 Action:Replace admin: replacement forced (--force)",
                "down node1 Action:Replace admin: replacement forced (--force)"});
  CHECK(k.details(EventKind::forced) == Strings{"node1 set DOWN: the jobs left on it are killed"});
  CHECK(k.state("node1") == "waiting");
  k.slurm.jobs.erase(10);  // Slurm kills the jobs of a DOWN node
  k.tick();
  CHECK(k.count(EventKind::provider) == 1);
  CHECK(k.slurm.updates.size() == 2);
}

TEST_CASE("replace force waits up to 30 s for a protected step to leave the node",
          "[node_keeper]") {
  KeeperRig k;
  k.slurm.add_job(10, 1000, {"node1"});
  k.keeper.request_replace("node1", RepairMode::force);
  const std::string down = "down node1 Action:Replace admin: replacement forced (--force)";
  k.tick({"node1"});
  k.clock.advance(29s);
  k.tick({"node1"});
  CHECK_FALSE(k.slurm.updated("down "));
  CHECK(k.count(EventKind::forced) == 0);
  SECTION("the protected step stays on it") {
    k.clock.advance(1s);
    k.tick({"node1"});
    CHECK(k.slurm.updates.back() == down);
  }
  SECTION("the protected step moved off it") {
    k.tick();
    CHECK(k.slurm.updates.back() == down);
  }
  CHECK(k.count(EventKind::forced) == 1);
  CHECK(k.state("node1") == "waiting");
}

TEST_CASE("replace refuses an unknown node and answers a second request as being replaced already",
          "[node_keeper]") {
  KeeperRig k;
  CHECK_THROWS_AS(k.keeper.request_replace("nodeX", RepairMode::wait), std::invalid_argument);
  CHECK_THROWS_WITH(k.keeper.request_replace("nodeX", RepairMode::wait),
                    "slurmctld does not know node 'nodeX'");
  CHECK(k.slurm.updates.empty());
  k.keeper.request_replace("node1", RepairMode::now);
  CHECK(k.keeper.request_replace("node1", RepairMode::force) ==
        "node1 is being replaced already (waiting, requested as 'now')");
  CHECK(k.slurm.updates.size() == 1);
  CHECK(k.store.node_repair("node1").value().mode == RepairMode::now);
  CHECK(k.count(EventKind::replace_requested) == 1);
}

TEST_CASE("a provider that cannot replace refuses replace and records no_provider for a mark",
          "[node_keeper]") {
  KeeperRig k;
  k.config.local_restart_command.clear();
  CHECK_THROWS_WITH(k.keeper.request_replace("node1", RepairMode::wait),
                    "provider=local cannot replace nodes (set local_restart_command or use "
                    "provider=command)");
  CHECK(k.slurm.updates.empty());
  k.mark("node2", "Action:Replace");
  k.tick();
  k.tick();
  CHECK(k.state("node2") == "none");
  CHECK(k.details(EventKind::no_provider) ==
        Strings{"node2 is marked for replacement (Action:Replace), but provider=local cannot "
                "replace nodes; it stays out"});
}

TEST_CASE("a failed replacement may be asked for again", "[node_keeper]") {
  KeeperRig k;
  k.config.provider_retries = 1;
  k.runner.set_result({1, "", ""});
  k.replace_node1(EventKind::replace_failed);
  CHECK(k.state("node1") == "failed");
  k.slurm.add_job(10, 1000, {"node1"});  // holds the new request in waiting
  CHECK(k.keeper.request_replace("node1", RepairMode::now).starts_with("node1 marked FAIL"));
  const auto repair = k.store.node_repair("node1");
  REQUIRE(repair);
  CHECK(repair->state == NodeRepairState::waiting);
  CHECK(repair->mode == RepairMode::now);
  CHECK(repair->attempts == 0);
  CHECK(k.slurm.updates ==
        Strings{"fail node1 Action:Replace admin: replacement requested (--now)"});
}

// An admin's own mark found in Slurm

namespace {

// The mode of the replacement a node marked so in Slurm gets, or "none".
std::string found_mode(bool down, const std::string& reason) {
  KeeperRig k;
  k.slurm.add_job(10, 1000, {"node1"});  // holds the replacement in waiting
  k.mark("node1", reason, down);
  k.tick();
  const auto repair = k.store.node_repair("node1");
  return repair ? std::string(ar::name_of(repair->mode)) : "none";
}

}  // namespace

TEST_CASE("a node marked for replacement in Slurm gets a replacement in the mode its mark says",
          "[node_keeper]") {
  CHECK(found_mode(false, "Action:Replace") == "wait");
  CHECK(found_mode(false, "Action:Replace gpu: XID 79 on GPU 3") == "now");
  CHECK(found_mode(false, "auto-resume: it is DOWN (job 10)") == "now");
  CHECK(found_mode(false, "Action:Replace admin: replacement forced (--force)") == "force");
  CHECK(found_mode(true, "Action:Replace") == "force");
  CHECK(found_mode(true, "auto-resume: it is DOWN (job 10)") == "force");

  KeeperRig k;
  k.slurm.add_job(10, 1000, {"node1"});
  k.mark("node1", "Action:Replace");
  k.tick();
  CHECK(k.details(EventKind::replace_requested) ==
        Strings{"node1 is FAIL (Action:Replace): the local provider replaces it once no job "
                "runs on it"});
  CHECK(k.state("node1") == "waiting");
  CHECK(k.slurm.updates.empty());
}

TEST_CASE("a plain FAIL or DOWN with another reason gets no replacement", "[node_keeper]") {
  CHECK(found_mode(false, "maintenance") == "none");
  CHECK(found_mode(true, "Not responding") == "none");
  CHECK(found_mode(false, "Replace later: Action:Replace") == "none");
  KeeperRig k;
  k.slurm.nodes.at("node1").drain = true;  // drained, not failed
  k.slurm.nodes.at("node1").reason = "Action:Replace";
  k.tick();
  CHECK(k.state("node1") == "none");
  CHECK(k.count(EventKind::replace_requested) == 0);
}

// The provider

TEST_CASE("a successful provider call is followed by the new instance and the node resumed",
          "[node_keeper]") {
  KeeperRig k;
  k.mark("node1", "Action:Replace");
  k.tick();
  CHECK(k.details(EventKind::provider) ==
        Strings{"asking the local provider to replace node1 (try 1 of 3)"});
  REQUIRE(k.tick_until([&] { return k.count(EventKind::provider_done) == 1; }));
  CHECK(k.runner.calls() == std::vector<Strings>{{"/bin/restart", "node1"}});
  CHECK(k.details(EventKind::provider_done) ==
        Strings{"the provider replaced node1; waiting for its new instance to register"});
  const auto repair = k.store.node_repair("node1");
  REQUIRE(repair);
  CHECK(repair->state == NodeRepairState::returning);
  CHECK(repair->attempts == 1);
  const auto called_at = repair->called_at;
  CHECK(called_at == k.clock.unix_now());
  auto& node = k.slurm.nodes.at("node1");
  // A slurmd that restarted by itself before the call is not the new instance.
  node.slurmd_start_time = called_at - 1;
  k.clock.advance(5s);
  k.tick();
  CHECK(k.state("node1") == "returning");
  // The new instance, not answering slurmctld yet.
  node.slurmd_start_time = called_at;
  node.not_responding = true;
  k.tick();
  CHECK(k.state("node1") == "returning");
  CHECK(k.slurm.updates.empty());
  node.not_responding = false;
  k.tick();
  CHECK(k.state("node1") == "none");
  CHECK(k.slurm.updates == Strings{"resume node1"});
  CHECK_FALSE(node.fail);
  CHECK(k.details(EventKind::node_replaced) ==
        Strings{"node1 is back in service: a new instance (slurmd started at " +
                std::to_string(called_at) + ") replaced the old one"});
  CHECK(k.node_of(EventKind::node_replaced) == "node1");
}

TEST_CASE("a failing provider is retried after a doubling backoff until replace_failed",
          "[node_keeper]") {
  KeeperRig k;
  k.runner.set_result({1, "no capacity\n", ""});
  k.replace_node1(EventKind::provider_failed);
  const std::string why = "/bin/restart exited 1; output: no capacity\n";
  auto repair = k.store.node_repair("node1");
  REQUIRE(repair);
  CHECK(repair->state == NodeRepairState::replacing);
  CHECK(repair->attempts == 1);
  CHECK(repair->next_try == k.clock.unix_now() + 10);
  CHECK(k.details(EventKind::provider_failed) ==
        Strings{"replacing node1 failed (try 1 of 3; again in 10 s): " + why});
  k.clock.advance(9s);
  k.tick();
  CHECK(k.count(EventKind::provider) == 1);
  k.clock.advance(1s);
  k.tick();
  CHECK(k.details(EventKind::provider).back() ==
        "asking the local provider to replace node1 (try 2 of 3)");
  REQUIRE(k.tick_until([&] { return k.count(EventKind::provider_failed) == 2; }));
  CHECK(k.details(EventKind::provider_failed).back() ==
        "replacing node1 failed (try 2 of 3; again in 20 s): " + why);
  k.clock.advance(19s);
  k.tick();
  CHECK(k.count(EventKind::provider) == 2);
  k.clock.advance(1s);
  k.tick();
  CHECK(k.count(EventKind::provider) == 3);
  REQUIRE(k.tick_until([&] { return k.count(EventKind::replace_failed) == 1; }));
  CHECK(k.count(EventKind::provider_failed) == 2);
  CHECK(k.details(EventKind::replace_failed) ==
        Strings{"the replacement of node1 failed after 3 tries; the node stays out for an admin: " +
                why});
  repair = k.store.node_repair("node1");
  REQUIRE(repair);
  CHECK(repair->state == NodeRepairState::failed);
  CHECK(repair->attempts == 3);
  k.clock.advance(3600s);
  k.tick();
  CHECK(k.runner.calls().size() == 3);
  CHECK(k.state("node1") == "failed");
  CHECK(k.slurm.updates.empty());  // the node stays out
}

TEST_CASE("a hung provider call does not hold up the ticks and fails once it ends",
          "[node_keeper]") {
  KeeperRig k;
  k.runner.set_hang(true);
  k.mark("node1", "Action:Replace");
  k.tick();
  REQUIRE(k.tick_until([&] { return k.runner.calls().size() == 1; }));
  // Half an hour of looks, on a thread of their own so that a look that
  // blocks fails the test instead of hanging it.
  auto looks = std::async(std::launch::async, [&] {
    for (int i = 0; i < 30; ++i) {
      k.clock.advance(60s);
      k.tick();
    }
  });
  const bool returned = looks.wait_for(5s) == std::future_status::ready;
  if (!returned) k.runner.release();
  looks.get();
  REQUIRE(returned);
  CHECK(k.state("node1") == "replacing");
  CHECK(k.store.node_repair("node1").value().attempts == 1);
  CHECK(k.count(EventKind::provider) == 1);
  CHECK(k.count(EventKind::provider_failed) == 0);
  k.runner.release();
  REQUIRE(k.tick_until([&] { return k.count(EventKind::provider_failed) == 1; }));
  CHECK(k.details(EventKind::provider_failed) ==
        Strings{"replacing node1 failed (try 1 of 3; again in 10 s): /bin/restart did not finish "
                "within 600 s; output: "});
  CHECK(k.state("node1") == "replacing");
  CHECK(k.runner.calls().size() == 1);
}

TEST_CASE("a provider that exits 0 but whose node never registers fails after register_timeout",
          "[node_keeper]") {
  KeeperRig k;
  k.config.register_timeout = 60s;
  k.replace_node1(EventKind::provider_done);
  CHECK(k.store.node_repair("node1").value().next_try == k.clock.unix_now() + 60);
  k.clock.advance(59s);
  k.tick();
  CHECK(k.state("node1") == "returning");
  CHECK(k.count(EventKind::provider_failed) == 0);
  k.clock.advance(1s);
  k.tick();
  CHECK(k.details(EventKind::provider_failed) ==
        Strings{"replacing node1 failed (try 1 of 3; again in 10 s): node1 did not register "
                "again within register_timeout=60 s"});
  CHECK(k.state("node1") == "replacing");
  CHECK(k.store.node_repair("node1").value().attempts == 1);
  k.clock.advance(10s);
  k.tick();
  CHECK(k.count(EventKind::provider) == 2);
  REQUIRE(k.tick_until([&] { return k.count(EventKind::provider_done) == 2; }));
  CHECK(k.runner.calls().size() == 2);
}

// Replacements dropped

TEST_CASE("a node put back in service while its replacement waits is dropped once 5 s old",
          "[node_keeper]") {
  KeeperRig k;
  k.slurm.add_job(10, 1000, {"node1"});
  k.keeper.request_replace("node1", RepairMode::wait);
  k.tick();
  k.clock.advance(4s);
  k.resume_by_hand("node1");
  k.tick();
  CHECK(k.state("node1") == "waiting");  // the record may be newer than the node list
  k.clock.advance(1s);
  k.tick();
  CHECK(k.state("node1") == "none");
  CHECK(k.details(EventKind::replace_dropped) ==
        Strings{"node1 was put back in service before it was replaced"});
  CHECK(k.node_of(EventKind::replace_dropped) == "node1");
  CHECK(k.runner.calls().empty());
  CHECK(k.slurm.updates == Strings{"fail node1 Action:Replace"});
}

TEST_CASE("a node put back in service between provider calls is dropped", "[node_keeper]") {
  KeeperRig k;
  k.runner.set_result({1, "", ""});
  k.replace_node1(EventKind::provider_failed);
  k.clock.advance(5s);
  k.resume_by_hand("node1");
  k.tick();
  CHECK(k.state("node1") == "none");
  CHECK(k.details(EventKind::replace_dropped) ==
        Strings{"node1 was put back in service before it was replaced"});
  k.clock.advance(60s);
  k.tick();
  CHECK(k.count(EventKind::provider) == 1);
}

TEST_CASE("a node put back in service after its replacement failed is dropped once 5 s old",
          "[node_keeper]") {
  KeeperRig k;
  k.config.provider_retries = 1;
  k.runner.set_result({1, "", ""});
  k.replace_node1(EventKind::replace_failed);
  k.resume_by_hand("node1");
  k.tick();
  CHECK(k.state("node1") == "failed");
  k.clock.advance(5s);
  k.tick();
  CHECK(k.state("node1") == "none");
  CHECK(k.details(EventKind::replace_dropped) ==
        Strings{"node1 was put back in service after its replacement failed"});
}

TEST_CASE("a node removed from slurm.conf is dropped", "[node_keeper]") {
  KeeperRig k;
  k.slurm.add_job(10, 1000, {"node1"});
  k.keeper.request_replace("node1", RepairMode::wait);
  k.tick();
  k.slurm.nodes.erase("node1");
  k.tick();
  CHECK(k.state("node1") == "none");
  CHECK(k.details(EventKind::replace_dropped) == Strings{"node1 is no longer in slurm.conf"});
}

// The new instance

TEST_CASE("an admin drain set during the replacement is not lifted when the new instance returns",
          "[node_keeper]") {
  KeeperRig k;
  k.replace_node1(EventKind::provider_done);
  const auto called_at = k.store.node_repair("node1").value().called_at;
  auto& node = k.slurm.nodes.at("node1");
  node.drain = true;
  node.reason = "bad dimm";
  node.slurmd_start_time = called_at;
  k.tick();
  CHECK(k.state("node1") == "none");
  CHECK(k.slurm.updates.empty());
  CHECK(node.drain);
  CHECK(node.fail);
  CHECK(node.reason == "bad dimm");
  // The event says "back in service" of a node left FAIL and drained.
  CHECK(k.details(EventKind::node_replaced) ==
        Strings{"node1 is back in service: a new instance (slurmd started at " +
                std::to_string(called_at) +
                ") replaced the old one, left as an admin set it meanwhile (bad dimm)"});
}

TEST_CASE("a new instance Slurm returned to service by itself is reported as Slurm's doing",
          "[node_keeper]") {
  KeeperRig k;
  k.mark("node1", "Action:Replace", true);
  k.tick();
  REQUIRE(k.tick_until([&] { return k.count(EventKind::provider_done) == 1; }));
  const auto called_at = k.store.node_repair("node1").value().called_at;
  // ReturnToService=2: the new slurmd's registration clears DOWN and the reason.
  k.resume_by_hand("node1");
  k.slurm.nodes.at("node1").slurmd_start_time = called_at;
  k.tick();
  CHECK(k.state("node1") == "none");
  CHECK(k.slurm.updates.empty());
  CHECK(k.details(EventKind::node_replaced) ==
        Strings{"node1 is back in service: a new instance (slurmd started at " +
                std::to_string(called_at) +
                ") replaced the old one; Slurm had returned it to service when it registered"});
}

// Spares

TEST_CASE("spares: an idle node of each partition is drained as a spare", "[node_keeper]") {
  KeeperRig k;
  k.config.provider = ar::ProviderKind::spares;
  k.config.spares = 1;
  k.slurm.partition_nodes = {{"a", {"node1", "node2"}}, {"b", {"node3", "node4"}}};
  k.slurm.add_job(10, 1000, {"node1"}, "a");
  k.tick();
  CHECK(k.slurm.updates == Strings{"drain node2 spare", "drain node3 spare"});
  CHECK(k.details(EventKind::spare_added) ==
        Strings{"node2 drained as a spare of partition a (1 of 1)",
                "node3 drained as a spare of partition b (1 of 1)"});
  CHECK(k.node_of(EventKind::spare_added) == "node2");
  CHECK(ar::NodeKeeper::is_spare(*k.slurm.load_node("node2")));
  k.tick();
  CHECK(k.slurm.updates.size() == 2);
  // A new partition is seen when the partitions are read again, each minute.
  k.slurm.partition_nodes["c"] = {"node4"};
  k.clock.advance(60s);
  k.tick();
  CHECK(k.slurm.updates.size() == 2);
  k.clock.advance(1s);
  k.tick();
  CHECK(k.slurm.updates.back() == "drain node4 spare");
  CHECK(k.slurm.updates.size() == 3);
  CHECK(k.count(EventKind::spares_short) == 0);
}

TEST_CASE("spares: a partition with no idle node gets one spares_short event", "[node_keeper]") {
  KeeperRig k;
  k.config.provider = ar::ProviderKind::spares;
  k.slurm.partition_nodes = {{"a", {"node1", "node2"}}, {"b", {"node3", "node4"}}};
  k.slurm.add_job(10, 1000, {"node1", "node2"}, "a");
  k.tick();
  k.tick();
  k.run_for(3);
  CHECK(k.slurm.updates == Strings{"drain node3 spare"});
  CHECK(k.details(EventKind::spares_short) ==
        Strings{"partition a has 0 of 1 spares and no idle node to add"});
  CHECK(k.node_of(EventKind::spares_short).empty());
  k.slurm.jobs.erase(10);
  k.slurm.add_job(11, 1000, {"node2"}, "a");
  k.tick();
  CHECK(k.slurm.updates == Strings{"drain node3 spare", "drain node1 spare"});
  // Its spare taken by a job, the partition is short again: said again.
  k.slurm.add_job(12, 1000, {"node1"}, "a");
  k.tick();
  k.tick();
  CHECK(k.count(EventKind::spares_short) == 2);
  CHECK(k.slurm.updates.size() == 2);
}

TEST_CASE("spares: a replaced node rejoins a pool that is short", "[node_keeper]") {
  KeeperRig k;
  k.config.provider = ar::ProviderKind::spares;
  k.slurm.partition_nodes = {{"main", {"node1", "node2"}}};
  k.slurm.add_job(10, 1000, {"node2"});
  k.replace_node1(EventKind::provider_done);
  CHECK(k.count(EventKind::spares_short) == 1);
  CHECK(k.runner.calls() == std::vector<Strings>{{"/bin/restart", "node1"}});
  const auto called_at = k.store.node_repair("node1").value().called_at;
  k.slurm.nodes.at("node1").slurmd_start_time = called_at;
  k.tick();
  CHECK(k.state("node1") == "none");
  CHECK(k.slurm.updates == Strings{"resume node1", "drain node1 spare"});
  CHECK(k.details(EventKind::node_replaced) ==
        Strings{"node1 is back in service: a new instance (slurmd started at " +
                std::to_string(called_at) + ") replaced the old one, kept as a spare of main"});
  k.tick();
  CHECK(k.slurm.updates.size() == 2);
}

TEST_CASE("a wall clock step moves neither register_timeout nor the provider's backoff",
          "[node_keeper][clock]") {
  KeeperRig k;
  k.config.register_timeout = 60s;
  k.replace_node1(EventKind::provider_done);
  // Forward an hour: the new instance still has its 60 s.
  k.clock.step_wall(1h);
  k.tick();
  CHECK(k.state("node1") == "returning");
  // Back two hours: it has no more than its 60 s either.
  k.clock.step_wall(-2h);
  k.clock.advance(59s);
  k.tick();
  CHECK(k.state("node1") == "returning");
  k.clock.advance(1s);
  k.tick();
  CHECK(k.count(EventKind::provider_failed) == 1);
  // The 10 s backoff before the second try, across a step forward.
  k.clock.step_wall(1h);
  k.tick();
  CHECK(k.count(EventKind::provider) == 1);
  k.clock.advance(10s);
  k.tick();
  CHECK(k.count(EventKind::provider) == 2);
}

TEST_CASE("across a reboot of the controller's host register_timeout counts by wall time",
          "[node_keeper][clock]") {
  KeeperRig k;
  k.config.register_timeout = 60s;
  k.replace_node1(EventKind::provider_done);
  k.clock.reboot(30s);
  k.tick();
  CHECK(k.state("node1") == "returning");
  k.clock.reboot(30s);
  k.tick();
  CHECK(k.count(EventKind::provider_failed) == 1);
}

TEST_CASE("a returned node whose old mark slurmctld shows again is resumed again, not replaced",
          "[node_keeper]") {
  KeeperRig k;
  const auto marked_at = k.clock.unix_now();
  k.clock.advance(3s);
  auto& node = k.return_node1();
  REQUIRE(k.slurm.updates == Strings{"resume node1"});
  // slurmctld restarted from state saved before the resume: the new
  // instance shows the finished replacement's mark, set when it was, again.
  k.clock.advance(2s);
  k.mark("node1", "Action:Replace", false, marked_at);
  k.tick();
  CHECK(k.state("node1") == "none");
  CHECK(k.count(EventKind::replace_requested) == 1);
  CHECK(k.slurm.updates == Strings{"resume node1", "resume node1"});
  CHECK_FALSE(node.fail);
  // Lost once more, and slurmctld refusing the resume at first: it is
  // tried again at a later look, never taken for a new mark.
  k.mark("node1", "Action:Replace", false, marked_at);
  ar::NodeKeeper::NodeMap nodes;
  for (const auto& n : k.slurm.load_nodes()) nodes[n.name] = &n;
  k.slurm.reachable = false;
  k.keeper.tick(nodes, {});
  k.slurm.reachable = true;
  k.tick();
  CHECK(k.count(EventKind::replace_requested) == 1);
  CHECK(k.slurm.updates == Strings{"resume node1", "resume node1", "resume node1"});
  CHECK_FALSE(node.fail);
  // The same reason set now, after the replacement: a new mark, replaced.
  k.mark("node1", "Action:Replace");
  k.tick();
  CHECK(k.state("node1") != "none");
  CHECK(k.count(EventKind::replace_requested) == 2);
}

TEST_CASE("a returned node marked with another reason is replaced again at once", "[node_keeper]") {
  KeeperRig k;
  k.return_node1();
  k.mark("node1", "Action:Replace gpu: lost");
  k.tick();
  CHECK(k.count(EventKind::replace_requested) == 2);
  CHECK(k.slurm.updates == Strings{"resume node1"});
}

TEST_CASE("a node someone else replaces (a provisioned group's) is never replaced by the keeper",
          "[node_keeper]") {
  KeeperRig k;
  // The controller wires the provisioner's owns() in at construction.
  ar::NodeKeeper keeper{
      k.store, k.config, k.slurm, k.clock, k.prober, k.runner, [](const std::string& node) {
        return node == "node2";
      }};
  for (const auto* name : {"node1", "node2"}) {
    k.slurm.nodes[name].fail = true;
    k.slurm.nodes[name].reason = "Action:Replace";
  }
  ar::NodeKeeper::NodeMap nodes;
  const auto& listed = k.slurm.load_nodes();
  for (const auto& node : listed) nodes[node.name] = &node;
  keeper.tick(nodes, {});
  CHECK(k.store.node_repair("node1"));
  CHECK_FALSE(k.store.node_repair("node2"));
}
