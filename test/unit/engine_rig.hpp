#pragma once
// A controller's resume engine and node keeper over the fakes, for the
// engine's unit tests: job 10 of uid 1000 on node1-4 protected as run "r".

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <thread>

#include "fakes.hpp"
#include "nodes/node_keeper.hpp"
#include "resume/engine.hpp"

namespace ar::test {

using namespace std::chrono_literals;

struct EngineRig : ar::test::Fakes {
  std::unique_ptr<ar::Store> store;
  std::unique_ptr<ar::NodeKeeper> keeper;
  std::unique_ptr<ar::Verdicts> verdicts;
  std::unique_ptr<ar::Engine> engine;

  explicit EngineRig(int nodes = 6) {
    slurm.add_nodes(nodes);
    config.heartbeat_timeout = 0ms;  // no agents in these tests
    // Every look reads slurmctld: the tests change the fake between looks
    // (engine_test's "slurm_read_interval" test paces them).
    config.slurm_read_interval = 0ms;
    start();
  }
  // A controller (re)started on the same store.
  void start() {
    engine.reset();
    verdicts.reset();
    keeper.reset();
    store.reset();
    store = std::make_unique<ar::Store>(dir.path, clock);
    keeper = std::make_unique<ar::NodeKeeper>(*store, config, slurm, clock, prober, runner);
    verdicts = std::make_unique<ar::Verdicts>(*store, reports, clock, config);
    engine = std::make_unique<ar::Engine>(*store, config, *keeper, slurm, clock, prober, reports,
                                          *verdicts);
  }
  // Job 10 of uid 1000 on node1-4, its step 10.0 protected as run "r".
  void protect(std::uint32_t attempt = 0, std::uint32_t step_id = 0) {
    slurm.add_job(10, 1000, {"node1", "node2", "node3", "node4"});
    register_attempt(attempt, step_id, "node[1-4]");
  }
  // Step 10.STEP_ID of job 10 runs on `nodelist`, registered as attempt
  // ATTEMPT of run "r" (as srun registers a relaunch), with the hang
  // options given.
  void register_attempt(std::uint32_t attempt, std::uint32_t step_id, const std::string& nodelist,
                        ar::HangTimeout hang = {}, std::uint32_t hang_signal = 0) {
    slurm.add_step(10, step_id, nodelist);
    ar::proto::StepRegistration step;
    step.job_id = 10;
    step.step_id = step_id;
    step.run_id = "r";
    step.attempt = attempt;
    step.argv = {"srun", "--auto-resume=1", "train"};
    step.cwd = "/w";
    step.nodelist = nodelist;
    step.hang_timeout = hang;
    step.hang_signal = hang_signal;
    REQUIRE(store->register_step(step, 1000) == ar::Store::Insert::created);
  }
  ar::StoredStep step(std::uint32_t attempt = 0) { return store->find("r", attempt).value(); }
  // Every outside call on threads of their own, as in the controller; the
  // calls the fakes get on this thread (the looks') are counted
  // (look_thread_calls: there must be none).
  void start_calls() {
    engine->start_calls(std::chrono::seconds{5});
    watch_look_thread();
  }
  // The calls started settled, the outbox's posts done.
  void settle_calls() {
    REQUIRE(engine->writes_settled(std::chrono::seconds{5}));
    REQUIRE(engine->submits_settled(std::chrono::seconds{5}));
    engine->outbox().drain();
  }
  // node3 of the protected step fails; the repair then waits for its helper
  // job (5000, for node5), which Slurm keeps pending.
  void fault_with_pending_helper() {
    slurm.helpers_start = false;
    slurm.nodes["node3"].down = true;
    engine->tick();
    REQUIRE(step().phase == ar::RepairPhase::replaced);
  }
  std::vector<std::string> kinds() {
    std::vector<std::string> out;
    for (const auto& e : store->events(std::nullopt, 0)) out.push_back(e.kind);
    return out;
  }
  bool has_event(const std::string& kind) {
    const auto all = kinds();
    return std::find(all.begin(), all.end(), kind) != all.end();
  }
  // The first event of `kind`'s detail.
  std::string detail(const std::string& kind) {
    for (const auto& e : store->events(std::nullopt, 0))
      if (e.kind == kind) return e.detail;
    return "";
  }
  // The last event of `kind`'s detail.
  std::string last_detail(const std::string& kind) {
    std::string out;
    for (const auto& e : store->events(std::nullopt, 0))
      if (e.kind == kind) out = e.detail;
    return out;
  }
  // Ticks (moving the clock a little each time) until `done` or a real deadline.
  template <typename Done>
  bool tick_until(Done done, std::chrono::milliseconds step = 500ms) {
    const auto deadline = std::chrono::steady_clock::now() + 30s;  // a loaded machine
    while (std::chrono::steady_clock::now() < deadline) {
      engine->tick();
      if (done()) return true;
      clock.advance(step);
    }
    return false;
  }
};

}  // namespace ar::test

// The names the engine's tests use.
using ar::EventKind;
using ar::RepairPhase;
using ar::StepState;
using ar::Verdict;
using Rig = ar::test::EngineRig;
using namespace std::chrono_literals;
