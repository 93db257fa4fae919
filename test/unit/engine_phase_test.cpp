// The fault matrix's "a second fault at each repair phase" (docs/faults.md, rows 17-22): one
// table-driven test that, for every phase a repair is stored in between two looks of the engine,
// injects a fault of each kind into each node it can hit there, drives the repair to its end and
// checks what the matrix counts: one relaunch per attempt, never onto a node dead at that
// moment, no healthy node marked, the step not lost, and the attempts docs/resume.md promises.
//
// The phases and the engine's stored ones (RepairPhase, resume/engine.hpp):
//  - "detected": stored between looks only while the guard rails hold the repair (a pause) or
//    for one look after a fault joins a repair under way (no_new_faults); a first fault goes on
//    to node_out in the same look. The test pauses the controller during a repair and lets a
//    second fault join it: the repair then stays `detected` until the unpause.
//  - "marked", "shrunk", "old step cancelled": take_out does all three in one look, on the node
//    list read at its start; no fault can come between them (the engine reads Slurm's node
//    states once per look). Their stored phase is `node_out`, which lasts while no node can
//    replace the failed one (no idle node: the provider's new instance is waited for).
//  - "replacement asked", "helper pending": `replaced`, its helper allocation pending (a helper
//    is submitted in the same look its node is chosen: the two are one stored phase).
//  - "merged": `replaced` with one replacement merged and another's helper pending (two failed
//    nodes), and `expanded` (all merged; the backoff or the old step still to wait for).
//  - "relaunched": the step decided `relaunch`; a fault after it is a new repair of the next
//    attempt, once its srun has registered it.
// Which node: another node of the step; the chosen replacement (before it is merged: at
// `detected`, `replaced`); the merged replacement (`replaced` with one merged, `expanded`, and
// after the relaunch, where it runs the new attempt). A replacement does not exist yet at
// `node_out`.
// Kinds: killed with Slurm saying DOWN (its probes silent as well); killed before Slurm notices
// (probes silent only: found after probe_failures probes); frozen as Slurm sees a hang (its
// slurmd not responding while the kernel still accepts the probes' connections); frozen as the
// node keeper's heartbeat watch sees it (its mark "Action:Replace heartbeat: ..." on the node,
// as mark_unheard sets it; the agents' heartbeats themselves are node_keeper_test's).

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "engine_rig.hpp"
#include "hostlist.hpp"

namespace {

enum class Phase { detected, node_out, helper_pending, partly_merged, expanded, relaunched };
enum class Kind { killed_down, killed_silent, frozen_not_responding, frozen_heartbeat };
enum class Which { step_node, replacement, merged_replacement };

struct Case {
  Phase phase;
  Which which;
  Kind kind;
  unsigned max_attempts = 3;
};

const char* name_of(Phase phase) {
  switch (phase) {
    case Phase::detected:
      return "detected (a joined fault, the controller paused)";
    case Phase::node_out:
      return "node_out (marked, shrunk, old step cancelled; no idle node)";
    case Phase::helper_pending:
      return "replaced (replacement asked, its helper pending)";
    case Phase::partly_merged:
      return "replaced (one replacement merged, another's helper pending)";
    case Phase::expanded:
      return "expanded (merged, in the backoff)";
    case Phase::relaunched:
      return "relaunched (the next attempt runs)";
  }
  return "?";
}

const char* name_of(Kind kind) {
  switch (kind) {
    case Kind::killed_down:
      return "killed: Slurm says DOWN";
    case Kind::killed_silent:
      return "killed: only the probes are silent";
    case Kind::frozen_not_responding:
      return "frozen: Slurm says not responding, probes answer";
    case Kind::frozen_heartbeat:
      return "frozen: the heartbeat watch's mark, probes answer";
  }
  return "?";
}

const char* name_of(Which which) {
  switch (which) {
    case Which::step_node:
      return "another node of the step";
    case Which::replacement:
      return "the chosen replacement";
    case Which::merged_replacement:
      return "the merged replacement";
  }
  return "?";
}

// The nodes each phase has: a replacement is chosen from `detected` (the paused repair was at
// its helper's wait) and merged from `partly_merged` on.
std::vector<Case> all_cases() {
  const std::vector<std::pair<Phase, std::vector<Which>>> table{
      {Phase::detected, {Which::step_node, Which::replacement}},
      {Phase::node_out, {Which::step_node}},
      {Phase::helper_pending, {Which::step_node, Which::replacement}},
      {Phase::partly_merged, {Which::step_node, Which::replacement, Which::merged_replacement}},
      {Phase::expanded, {Which::step_node, Which::merged_replacement}},
      {Phase::relaunched, {Which::step_node, Which::merged_replacement}},
  };
  std::vector<Case> out;
  for (const auto& [phase, whiches] : table)
    for (const auto which : whiches)
      for (const auto kind : {Kind::killed_down, Kind::killed_silent, Kind::frozen_not_responding,
                              Kind::frozen_heartbeat}) {
        out.push_back({phase, which, kind});
        // After the relaunch, the budget runs out with max_attempts=2.
        if (phase == Phase::relaunched) out.push_back({phase, which, kind, 2});
      }
  return out;
}

// One case, from the first fault (node3 killed under step 10.1, attempt 1 of run r: its
// relaunch waits a backoff of 10 s) to the verdict.
class PhaseRun {
 public:
  explicit PhaseRun(const Case& c) : case_(c), rig_(4) {
    rig_.config.backoff = 10s;
    rig_.config.max_attempts = c.max_attempts;
    if (c.phase != Phase::node_out) rig_.slurm.add_nodes(9);  // node5-9 idle
    rig_.slurm.helpers_start = c.phase == Phase::expanded || c.phase == Phase::relaunched;
    rig_.protect(1, 1);
  }

  void run() {
    reach_phase();
    inject(case_.kind, target());
    hold();
    release();
    REQUIRE(drive([&] { return rig_.step(last_attempt()).state == StepState::decided; }));
    check_outcome();
  }

 private:
  std::uint32_t last_attempt() const { return case_.phase == Phase::relaunched ? 2 : 1; }
  bool out_of_budget() const { return case_.phase == Phase::relaunched && case_.max_attempts == 2; }

  // The node the second fault hits.
  std::string target() const {
    switch (case_.which) {
      case Which::step_node:
        return "node2";
      case Which::replacement:
        return case_.phase == Phase::partly_merged ? "node6" : "node5";
      case Which::merged_replacement:
        return "node5";
    }
    return "";
  }

  void inject(Kind kind, const std::string& node) {
    auto& n = rig_.slurm.nodes.at(node);
    faulted_.insert(node);
    switch (kind) {
      case Kind::killed_down:
        n.down = true;
        rig_.prober.dead.insert(n.address);
        break;
      case Kind::killed_silent:
        rig_.prober.dead.insert(n.address);
        break;
      case Kind::frozen_not_responding:
        n.not_responding = true;
        break;
      case Kind::frozen_heartbeat:
        n.fail = true;
        n.reason = "Action:Replace heartbeat: no heartbeat for 11 s and slurmd does not answer";
        break;
    }
  }

  // The helper allocations Slurm keeps pending start.
  void start_helpers() {
    for (auto& [id, job] : rig_.slurm.jobs)
      if (job.pending && job.name == "auto-resume-expand-10") rig_.slurm.start_job(id);
  }

  // Ticks half a second apart until `done`; false after 120 s of the clock.
  template <typename Done>
  bool drive(Done done) {
    for (int i = 0; i < 240; ++i) {
      rig_.engine->tick();
      if (done()) return true;
      if (released_) start_helpers();
      rig_.clock.advance(500ms);
    }
    return false;
  }

  // The first fault, then the repair brought to the case's phase.
  void reach_phase() {
    inject(Kind::killed_down, "node3");
    if (case_.phase == Phase::partly_merged) inject(Kind::killed_down, "node4");
    rig_.engine->tick();
    auto step = rig_.step(1);
    switch (case_.phase) {
      case Phase::detected:
        REQUIRE(step.phase == RepairPhase::replaced);
        rig_.keeper->gate().pause(0, "test");
        // A second fault joins the paused repair: it stays `detected` until the unpause.
        // (Frozen, not killed: with node3 and a silent target, three of the five nodes probed
        // would be silent at once, and the crowd guard would rightly take none of them.)
        inject(Kind::frozen_not_responding, "node4");
        rig_.engine->tick();
        REQUIRE(rig_.step(1).phase == RepairPhase::detected);
        break;
      case Phase::node_out:
        REQUIRE(step.phase == RepairPhase::node_out);
        break;
      case Phase::helper_pending:
        REQUIRE(step.phase == RepairPhase::replaced);
        REQUIRE(rig_.slurm.jobs.at(5000).pending);
        break;
      case Phase::partly_merged:
        REQUIRE(step.phase == RepairPhase::replaced);
        rig_.slurm.start_job(5000);
        rig_.engine->tick();
        REQUIRE(rig_.step(1).repair.merged == std::vector<std::string>{"node5"});
        REQUIRE(rig_.slurm.jobs.at(5001).pending);  // node6's
        break;
      case Phase::expanded:
        REQUIRE(step.phase == RepairPhase::expanded);
        break;
      case Phase::relaunched:
        REQUIRE(drive([&] { return rig_.step(1).state == StepState::decided; }));
        REQUIRE(rig_.step(1).verdict == Verdict::relaunch);
        register_next();
        break;
    }
  }

  // srun relaunched the step as attempt 2 (step 10.2) on the repaired job.
  void register_next() {
    rig_.register_attempt(2, 2, rig_.step(1).repair.relaunch.value().nodelist);
    rig_.engine->tick();
    REQUIRE(rig_.step(2).state == StepState::registered);
  }

  // The phase lasts (paused, no idle node, the helper pending, the backoff) until the second
  // fault is part of the repair; for the paused one, a few seconds.
  void hold() {
    const auto x = target();
    if (case_.phase == Phase::detected) {
      for (int i = 0; i < 8; ++i) {
        rig_.clock.advance(500ms);
        rig_.engine->tick();
      }
      CHECK(rig_.step(1).phase == RepairPhase::detected);  // nothing done while paused
      CHECK_FALSE(rig_.slurm.updated("fail " + x));
      return;
    }
    REQUIRE(drive([&] { return rig_.last_detail("detected").find(x) != std::string::npos; }));
    // Caught during the phase: the repair goes on (where the budget is spent, it ends at once).
    if (!out_of_budget()) CHECK(rig_.step(last_attempt()).state == StepState::repairing);
    if (case_.phase == Phase::relaunched) {
      CHECK(rig_.last_detail("detected").starts_with("step 10.2 attempt 2: " + x));
    } else {
      CHECK(
          rig_.last_detail("detected").starts_with("step 10.1 attempt 1, during its repair: " + x));
    }
  }

  // What held the phase lets go: the pause ends, idle nodes appear, helpers start.
  void release() {
    released_ = true;
    rig_.slurm.helpers_start = true;
    if (case_.phase == Phase::detected) rig_.keeper->gate().unpause(0);
    if (case_.phase == Phase::node_out) rig_.slurm.add_nodes(9);
    start_helpers();
  }

  bool alive(const std::string& host) {
    const auto& n = rig_.slurm.nodes.at(host);
    return !n.down && !n.fail && !n.not_responding && !rig_.prober.dead.contains(n.address);
  }

  std::size_t count(const std::vector<std::string>& list, const std::string& item) {
    return static_cast<std::size_t>(std::count(list.begin(), list.end(), item));
  }

  void check_outcome() {
    const auto step = rig_.step(last_attempt());
    const auto kinds = rig_.kinds();
    // No healthy node marked: every FAIL or DOWN set is on a node a fault was injected into.
    for (const auto& update : rig_.slurm.updates) {
      INFO(update);
      if (update.starts_with("fail ") || update.starts_with("down ")) {
        const auto node = update.substr(5, update.find(' ', 5) - 5);
        CHECK(faulted_.contains(node));
      }
      CHECK_FALSE(update.starts_with("drain "));
    }
    // The old steps were cancelled; no helper is left over.
    CHECK(rig_.slurm.updated("kill_step 10.1"));
    CHECK_FALSE(rig_.slurm.steps.contains({10, 1}));
    CHECK(rig_.slurm.live_jobs_named("auto-resume-expand-10", 1000).empty());
    // One repair per attempt: a fault during a repair joins it.
    CHECK(rig_.store->job_steps(10).size() == last_attempt());
    if (out_of_budget()) {
      // The budget runs out: give_up naming it (docs/resume.md), the node out of the job.
      CHECK(step.verdict == Verdict::give_up);
      CHECK(step.message ==
            "run r was relaunched 2 times within attempt_window=86400 s (max_attempts=2), none "
            "of them running healthy_after=1800 s; the failed node left the job");
      CHECK(count(kinds, "relaunch") == 1);
      CHECK(rig_.slurm.updated("kill_step 10.2"));
      CHECK(count(rig_.slurm.jobs.at(10).hosts, target()) == 0);
      return;
    }
    REQUIRE(step.verdict == Verdict::relaunch);
    CHECK(count(kinds, "relaunch") == last_attempt());
    const std::string nodelist = step.repair.relaunch.value().nodelist;
    const auto hosts = ar::slurm::expand_hostlist(nodelist);
    CHECK(hosts.size() == 4);  // as many nodes as the step started with
    CHECK(step.repair.relaunch.value().num_nodes == 4);
    for (const auto& host : hosts) {
      INFO("relaunched on " << host);
      CHECK(alive(host));
    }
    CHECK(nodelist == rig_.slurm.jobs.at(10).nodes);
    // The attempts: a second fault during the repair is the same attempt (attempt 2 after the
    // backoff of 10 s); after the relaunch it is the next one (attempt 3, 20 s).
    CHECK(step.message ==
          (case_.phase == Phase::relaunched
               ? "relaunching run r as attempt 3 on " + nodelist + " after a backoff of 20 s"
               : "relaunching run r as attempt 2 on " + nodelist + " after a backoff of 10 s"));
  }

  Case case_;
  Rig rig_;
  std::set<std::string> faulted_;
  bool released_ = false;
};

}  // namespace

TEST_CASE("a node killed or frozen at each repair phase is taken into the repair or the next one",
          "[engine][phases]") {
  const auto c = GENERATE(from_range(all_cases()));
  INFO("phase: " << name_of(c.phase) << "; node: " << name_of(c.which)
                 << "; fault: " << name_of(c.kind) << "; max_attempts=" << c.max_attempts);
  PhaseRun(c).run();
}
