#pragma once
// The node keeper over the fakes, for its unit tests: Slurm in memory, a
// clock moved by hand, a prober and a provider runner whose answers the
// tests choose.

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
#include "nodes/node_keeper.hpp"

// Helpers of the node keeper tests (each test file gets its own copy).
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
[[maybe_unused]] std::string heartbeat_reason(int seconds) {
  return "Action:Replace heartbeat: no heartbeat for " + std::to_string(seconds) +
         " s and slurmd does not answer";
}

struct KeeperRig : ar::test::Fakes {
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
    const auto listed = [&] {
      const ar::test::RigCall rig_call;  // the engine's read, in the controller
      return slurm.load_nodes();
    }();
    for (const auto& node : listed) nodes[node.name] = &node;
    keeper.tick(nodes, protected_nodes);
  }
  // A heartbeat for `node` from its NodeAddr (127.0.0.1 for a node
  // slurmctld does not know).
  void beat(const std::string& node, bool stopping = false) {
    const auto it = slurm.nodes.find(node);
    keeper.heartbeat(node, stopping, it == slurm.nodes.end() ? "127.0.0.1" : it->second.address);
  }
  // `seconds` of time, one look a second; each node of `beating` is heard
  // before each look.
  void run_for(int seconds, const std::set<std::string>& beating = {}) {
    for (int i = 0; i < seconds; ++i) {
      clock.advance(1s);
      for (const auto& node : beating) beat(node);
      tick();
    }
  }
  // Looks (the clock standing still) until `done`: for a provider call on
  // the keeper's own thread. False after a few seconds of real time.
  bool tick_until(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;  // a loaded machine
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
  // A mark set in Slurm directly (an admin's scontrol, a health check),
  // now or at `reason_time` (Unix seconds).
  void mark(const std::string& node, const std::string& reason, bool down = false,
            std::int64_t reason_time = 0) {
    auto& n = slurm.nodes.at(node);
    (down ? n.down : n.fail) = true;
    n.reason = reason;
    n.reason_time = reason_time != 0 ? reason_time : clock.unix_now();
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
  // node1 replaced and back in service as a new instance; its node.
  ar::slurm::NodeInfo& return_node1() {
    replace_node1(EventKind::provider_done);
    auto& node = slurm.nodes.at("node1");
    node.slurmd_start_time = store.node_repair("node1")->called_at;
    tick();
    REQUIRE(state("node1") == "none");
    return node;
  }
};

}  // namespace
