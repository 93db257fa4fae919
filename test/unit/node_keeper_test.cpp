// The node keeper driven through the fakes: Slurm in memory, a clock moved
// by hand, a prober and a provider runner whose answers the tests choose.
// These pin what the keeper does today; a test whose name ends in "(today)"
// pins behaviour that looks wrong and is expected to change.

#include "nodes/node_keeper.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fakes.hpp"

namespace {

using namespace std::chrono_literals;
using ar::EventKind;
using ar::NodeRepairState;
using ar::RepairMode;
using Strings = std::vector<std::string>;

// The addresses FakeSlurm::add_nodes gives node1..node4.
constexpr const char* kNode1Address = "127.0.0.11";
constexpr const char* kNode2Address = "127.0.0.12";
constexpr const char* kNode3Address = "127.0.0.13";

// What mark_silent writes for a node silent `seconds` long.
std::string heartbeat_reason(int seconds) {
  return "Action:Replace heartbeat: no heartbeat for " + std::to_string(seconds) +
         " s and slurmd does not answer";
}

struct KeeperRig {
  ar::test::TempDir dir;
  ar::test::ManualClock clock;
  ar::test::FakeSlurm slurm;
  ar::test::FakeProber prober;
  ar::test::FakeRunner runner;
  ar::DaemonConfig config;
  ar::Store store{dir.path, clock};
  // Last: it is destroyed first (it waits for its provider calls).
  ar::NodeKeeper keeper{store, config, slurm, clock, prober, runner};

  // node1..node4 of partition "main", idle; provider=local with a restart
  // command; every other setting its default (heartbeat_timeout 10 s,
  // provider_retries 3, provider_backoff 10 s, register_timeout 900 s).
  KeeperRig() {
    slurm.add_nodes(4);
    config.provider = ar::ProviderKind::local;
    config.local_restart_command = {"/bin/restart", "{node}"};
  }

  // One look of the engine thread, with the node list as just loaded.
  void tick(const std::set<std::string>& protected_nodes = {}) {
    ar::NodeKeeper::NodeMap nodes;
    for (const auto& node : slurm.load_nodes()) nodes[node.name] = &node;
    keeper.tick(nodes, protected_nodes);
  }
  // `seconds` of time, one look a second; each node of `beating` is heard
  // before each look.
  void run_for(int seconds, const std::set<std::string>& beating = {}) {
    for (int i = 0; i < seconds; ++i) {
      clock.advance(1s);
      for (const auto& node : beating) keeper.heartbeat(node, false);
      tick();
    }
  }
  // Looks (the clock standing still) until `done`: for a provider call on
  // the keeper's own thread. False after a few seconds of real time.
  bool tick_until(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (std::chrono::steady_clock::now() < deadline) {
      tick();
      if (done()) return true;
      std::this_thread::sleep_for(1ms);  // a poll, not a wait for the result
    }
    return false;
  }

  // The details of the events of `kind`, oldest first.
  Strings details(EventKind kind) {
    Strings out;
    for (const auto& e : store.events(std::nullopt, 0))
      if (e.kind == ar::name_of(kind)) out.push_back(e.detail);
    return out;
  }
  std::size_t count(EventKind kind) { return details(kind).size(); }
  // The node the first event of `kind` names.
  std::string node_of(EventKind kind) {
    for (const auto& e : store.events(std::nullopt, 0))
      if (e.kind == ar::name_of(kind)) return e.node;
    return "(no such event)";
  }
  // The state of the node's replacement, or "none".
  std::string state(const std::string& node) {
    const auto repair = store.node_repair(node);
    return repair ? std::string(ar::name_of(repair->state)) : "none";
  }
  // A mark set in Slurm directly (an admin's scontrol, a health check).
  void mark(const std::string& node, const std::string& reason, bool down = false) {
    auto& n = slurm.nodes.at(node);
    (down ? n.down : n.fail) = true;
    n.reason = reason;
  }
  // Back in service by hand (scontrol update state=resume).
  void resume_by_hand(const std::string& node) {
    auto& n = slurm.nodes.at(node);
    n.fail = n.down = n.drain = false;
    n.reason.clear();
  }
  // Marks node1 for replacement and lets the provider's first call end
  // (with the runner's result as set).
  void replace_node1(EventKind until) {
    mark("node1", "Action:Replace");
    tick();
    REQUIRE(tick_until([&] { return count(until) == 1; }));
  }
};

}  // namespace

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

TEST_CASE("an unknown node heard before the first tick stays and counts in the crowd guard (today)",
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

TEST_CASE("a node returned after a health check mark is probed for its old agent silence (today)",
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
  CHECK(k.details(EventKind::waiting) == Strings{"waiting for the jobs on node1 to end"});
  CHECK(k.count(EventKind::provider) == 0);
  CHECK(k.runner.calls().empty());
  k.slurm.jobs.erase(10);
  k.tick();
  CHECK(k.details(EventKind::jobs_gone) == Strings{"no job runs on node1: replacing it"});
  CHECK(k.details(EventKind::provider) ==
        Strings{"asking the local provider to replace node1 (try 1 of 3)"});
  REQUIRE(k.tick_until([&] { return k.state("node1") == "returning"; }));
  CHECK(k.runner.calls() == std::vector<Strings>{{"/bin/restart", "node1"}});
  CHECK(k.slurm.updates == Strings{"fail node1 Action:Replace"});
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

TEST_CASE("replace with a mode name refuses an unknown mode naming it", "[node_keeper]") {
  KeeperRig k;
  CHECK_THROWS_AS(k.keeper.request_replace("node1", "later"), std::invalid_argument);
  CHECK_THROWS_WITH(k.keeper.request_replace("node1", "later"),
                    "unknown mode 'later' (known: wait, now, force)");
  CHECK(k.slurm.updates.empty());
  CHECK(k.state("node1") == "none");
  k.keeper.request_replace("node1", "force");
  REQUIRE(k.store.node_repair("node1"));
  CHECK(k.store.node_repair("node1").value().mode == RepairMode::force);
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

TEST_CASE(
    "a new instance Slurm returned to service by itself is reported as an admin change "
    "(today)",
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
                ") replaced the old one, left as an admin set it meanwhile ()"});
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
