// The guard rails (controller/gate.hpp, docs/guard.md) as the resume engine
// meets them: mode=observe, a pause and the circuit breaker each leave a
// faulty step alone, say what would be done once, and survive a restart.

#include "engine_rig.hpp"

namespace {

using Catch::Matchers::StartsWith;

std::size_t count(Rig& rig, const std::string& kind) {
  const auto all = rig.kinds();
  return static_cast<std::size_t>(std::count(all.begin(), all.end(), kind));
}

// A few looks, a second apart.
void looks(Rig& rig, int n) {
  for (int i = 0; i < n; ++i) {
    rig.engine->tick();
    rig.clock.advance(1s);
  }
}

}  // namespace

TEST_CASE("observe: a node fault under a step is said once as what would be done and nothing is",
          "[guard]") {
  Rig rig;
  rig.config.mode = ar::ActionMode::observe;
  rig.protect();
  rig.slurm.nodes["node3"].down = true;
  looks(rig, 5);
  CHECK(rig.slurm.updates.empty());
  CHECK(rig.step().state == StepState::registered);  // the step keeps running
  CHECK(count(rig, "would") == 1);
  CHECK(rig.detail("would") ==
        "observe: would mark node3 FAIL, shrink job 10 to node[1-2,4], cancel step 10.0 and "
        "relaunch run r as attempt 1 with 1 replacement node (node3: it is DOWN)");
  // srun's step ends: it keeps its own exit status, as if nothing were there.
  REQUIRE(rig.store->mark_ended(rig.step(), rig.clock.stamp(), {EventKind::ended, "ended"}));
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::no_fault);
  CHECK_THAT(rig.step().message,
             StartsWith("the controller did not act (observe): it would mark node3 FAIL"));
  CHECK(rig.slurm.updates.empty());
  CHECK(rig.runner.calls().empty());
}

TEST_CASE("observe: a node a health check marked is neither repaired nor replaced", "[guard]") {
  Rig rig;
  rig.config.mode = ar::ActionMode::observe;
  rig.config.local_restart_command = {"/bin/restart", "{node}"};
  rig.protect();
  rig.slurm.nodes["node3"].fail = true;
  rig.slurm.nodes["node3"].reason = "Action:Replace healthcheck: gpu lost";
  looks(rig, 5);
  CHECK(rig.slurm.updates.empty());
  CHECK(rig.runner.calls().empty());
  std::vector<std::string> said;
  for (const auto& e : rig.store->events(std::nullopt, 0))
    if (e.kind == "would") said.push_back(e.detail);
  // The keeper looks first, then the engine.
  CHECK(said == std::vector<std::string>{
                    "observe: would have the local provider replace node3 once no job runs on it",
                    "observe: would shrink job 10 to node[1-2,4], cancel step 10.0 and relaunch "
                    "run r as attempt 1 with 1 replacement node (node3: a health check failed: "
                    "Action:Replace healthcheck: gpu lost)"});
}

TEST_CASE("a fault said in observe mode is said again once its node was healthy in between",
          "[guard]") {
  Rig rig;
  rig.config.mode = ar::ActionMode::observe;
  rig.protect();
  rig.slurm.nodes["node3"].down = true;
  looks(rig, 3);
  rig.slurm.nodes["node3"].down = false;
  looks(rig, 3);
  rig.slurm.nodes["node3"].down = true;
  looks(rig, 3);
  CHECK(count(rig, "would") == 2);
  CHECK(rig.slurm.updates.empty());
}

TEST_CASE("paused: a fault is left alone across a restart, and unpause lets the repair go",
          "[guard]") {
  Rig rig;
  rig.protect();
  rig.keeper->gate().pause(0, "maintenance");
  rig.start();  // the pause is in the store
  CHECK(rig.keeper->gate().held() == "paused");
  rig.slurm.nodes["node3"].down = true;
  looks(rig, 3);
  CHECK(rig.slurm.updates.empty());
  CHECK_THAT(rig.detail("would"), StartsWith("paused: would mark node3 FAIL"));
  CHECK(rig.detail("paused") ==
        "paused by uid 0 (maintenance): the controller acts on nothing until auto-resume unpause");
  CHECK(rig.keeper->gate().unpause(0) == "unpaused by uid 0: the controller acts again");
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.slurm.updated("fail node3"));
}

TEST_CASE(
    "the breaker trips past max_marks_per_hour, holds across a restart, and resume-actions "
    "resets it",
    "[guard]") {
  Rig rig;
  rig.config.max_marks_per_hour = {1, false};
  REQUIRE(rig.keeper->gate().allow(ar::Gate::Counted::mark, {"node6"}));  // a mark this hour
  rig.protect();
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  CHECK(rig.slurm.updates.empty());
  CHECK(rig.detail("breaker_tripped") ==
        "the circuit breaker tripped on node marks: 1 within the last hour whose repair has not "
        "succeeded and 1 more now (node3) would pass max_marks_per_hour=1; the controller acts on "
        "nothing until auto-resume resume-actions, or by itself after breaker_reset_after=3600 s "
        "with nothing held back");
  CHECK_THAT(rig.detail("would"), StartsWith("breaker: would mark node3 FAIL"));
  rig.start();  // tripped, in the store
  looks(rig, 3);
  CHECK(rig.slurm.updates.empty());
  const auto state = rig.keeper->gate().state();
  CHECK(state.tripped);
  CHECK(state.marks == 1);
  CHECK(state.max_marks == 1);
  CHECK_THAT(rig.keeper->gate().resume_actions(0),
             StartsWith("the circuit breaker was reset by uid 0"));
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.slurm.updated("fail node3"));
  // node3's mark, counted from the reset, no longer counts: its repair
  // succeeded (the step relaunched).
  CHECK(rig.keeper->gate().state().marks == 0);
}

TEST_CASE("marks and replacements whose repair succeeded do not count toward the breaker",
          "[guard]") {
  // Six nodes, a fault a minute after each relaunch: at the default limits
  // (5%, at least 2 an hour) every repair goes through (counting marks,
  // the breaker tripped at the third). The relaunch budget (max_attempts=3)
  // is what ends the run at the fourth.
  Rig rig;
  rig.config.backoff = 0ms;
  rig.protect();
  for (std::uint32_t attempt = 0; attempt < 3; ++attempt) {
    REQUIRE(rig.step(attempt).state == StepState::registered);
    // A node of the step's job fails; a free node replaces it.
    auto& job = rig.slurm.jobs.at(10);
    const auto node = job.hosts.at(1);
    rig.slurm.nodes[node].down = true;
    rig.engine->tick();
    REQUIRE(rig.step(attempt).verdict == Verdict::relaunch);
    CHECK(rig.keeper->gate().state().marks == 0);
    CHECK_FALSE(rig.keeper->gate().state().tripped);
    // The failed node comes back as a new instance (replaced), and the
    // relaunch registers.
    rig.slurm.nodes[node].slurmd_start_time += 100;
    rig.slurm.nodes[node].down = false;
    rig.slurm.nodes[node].fail = false;
    rig.slurm.nodes[node].reason.clear();
    ar::proto::StepRegistration next;
    next.job_id = 10;
    next.step_id = attempt + 1;
    next.run_id = "r";
    next.attempt = attempt + 1;
    next.argv = {"srun", "--auto-resume=1", "train"};
    next.cwd = "/w";
    next.nodelist = job.nodes;
    rig.slurm.add_step(10, attempt + 1, job.nodes);
    REQUIRE(rig.store->register_step(next, 1000) == ar::Store::Insert::created);
    rig.clock.advance(60s);
  }
  CHECK_FALSE(rig.has_event("breaker_tripped"));
  // A requeue or a give_up is no success: its marks count.
  REQUIRE(rig.keeper->gate().allow(ar::Gate::Counted::mark, {"node9"}));
  CHECK(rig.keeper->gate().state().marks == 1);
}

TEST_CASE("a tripped breaker resets itself after breaker_reset_after with nothing held back",
          "[guard]") {
  Rig rig;
  rig.config.max_marks_per_hour = {1, false};
  rig.config.breaker_reset_after = 600s;
  REQUIRE(rig.keeper->gate().allow(ar::Gate::Counted::mark, {"node6"}));
  CHECK_FALSE(rig.keeper->gate().allow(ar::Gate::Counted::mark, {"node5"}));  // trips
  CHECK(rig.keeper->gate().state().tripped);
  rig.clock.advance(500s);
  // Something held back meanwhile: the quiet period starts again.
  CHECK_FALSE(rig.keeper->gate().allow(ar::Gate::Counted::mark, {"node5"}));
  rig.clock.advance(500s);
  CHECK(rig.keeper->gate().state().tripped);
  CHECK(rig.keeper->gate().breaker().tripped);
  CHECK(rig.keeper->gate().breaker().resets_in == 100);  // the metrics' countdown
  rig.clock.advance(101s);
  CHECK_FALSE(rig.keeper->gate().state().tripped);
  CHECK(rig.last_detail("actions_resumed") ==
        "the circuit breaker reset itself: nothing was held back for breaker_reset_after=600 s; "
        "the counts start again from 0; the controller acts again");
  CHECK(rig.keeper->gate().allow(ar::Gate::Counted::mark, {"node5"}));
  CHECK(rig.keeper->gate().breaker().resets_in == 0);
  // breaker_reset_after=0: only the admin resets it.
  Rig admin;
  admin.config.max_marks_per_hour = {1, false};
  admin.config.breaker_reset_after = 0ms;
  REQUIRE(admin.keeper->gate().allow(ar::Gate::Counted::mark, {"node6"}));
  CHECK_FALSE(admin.keeper->gate().allow(ar::Gate::Counted::mark, {"node5"}));
  admin.clock.advance(24h);
  CHECK(admin.keeper->gate().state().tripped);
  CHECK(admin.keeper->gate().breaker().resets_in == -1);
  CHECK_THAT(admin.detail("breaker_tripped"),
             Catch::Matchers::EndsWith("until auto-resume resume-actions"));
}

TEST_CASE("the default limits are 5% of the nodes slurmctld lists, and at least 2", "[guard]") {
  const ar::DaemonConfig config;
  CHECK(config.max_marks_per_hour.of(0) == 2);
  CHECK(config.max_marks_per_hour.of(40) == 2);
  CHECK(config.max_marks_per_hour.of(41) == 3);
  CHECK(config.max_replacements_per_hour.of(1000) == 50);
  Rig rig(60);  // the keeper counts the nodes at each look
  rig.engine->tick();
  CHECK(rig.keeper->gate().state().max_marks == 3);
}
