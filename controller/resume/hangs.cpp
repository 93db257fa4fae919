// The resume engine's failures that Slurm does not see (docs/resume.md,
// "Hangs and crashes"). A step whose tasks stopped beating is repaired like
// a node fault with no node at fault: the `hung` event names who stopped
// first; the hang signal (if asked for) reaches every task, after its grace
// the nodes' agents run their quick checks (a node that fails one is a
// fault), and the step is cancelled and relaunched from its checkpoint,
// counted in the relaunch budget; hangs in a row with no new highest step
// end in give_up. A step that failed with no node at fault waits for the
// quick checks of its nodes' agents: a node that fails one is a fault.

#include <fmt/core.h>

#include <algorithm>

#include "autoresume/progress.hpp"
#include "autoresume/text.hpp"
#include "gate.hpp"
#include "log.hpp"
#include "resume/detail.hpp"
#include "resume/engine.hpp"
#include "slurm_adapter.hpp"  // hostlists

namespace ar {

using namespace resume_detail;  // NOLINT: the engine's own helpers

std::vector<StoredStep> Engine::run_attempts(const StoredStep& step) {
  std::vector<StoredStep> attempts;
  if (step.step.attempt > 0)
    for (auto& s : store_.job_steps(step.step.job_id))
      if (s.step.run_id == step.step.run_id && s.step.attempt < step.step.attempt)
        attempts.push_back(std::move(s));
  std::sort(attempts.begin(), attempts.end(),
            [](const auto& a, const auto& b) { return a.step.attempt < b.step.attempt; });
  attempts.push_back(step);
  return attempts;
}

std::vector<bool> Engine::progressed(const std::vector<StoredStep>& attempts) {
  std::vector<bool> out;
  std::optional<std::uint64_t> best;
  for (const auto& a : attempts) {
    const auto& high = a.repair.highest_step;
    out.push_back(high && (!best || *high > *best));
    if (high && (!best || *high > *best)) best = high;
  }
  return out;
}

unsigned Engine::hangs_in_a_row(const StoredStep& step) {
  const auto attempts = run_attempts(step);
  const auto moved_on = progressed(attempts);
  unsigned count = 0;
  for (std::size_t i = attempts.size(); i-- > 0;) {
    if (attempts[i].repair.hang.empty()) break;
    ++count;
    if (moved_on[i]) break;
  }
  return count;
}

void Engine::note_progress(StoredStep& step) {
  const auto seen = of_attempt(reports_.progress.seen(step.step.job_id, step.step.step_id),
                               clock_.since(step.created()), clock_.now());
  if (!seen) return;
  const auto hosts = step_hosts(step);
  for (const auto& [number, rank] : seen->ranks) {
    if (!contains(hosts, rank.node)) continue;  // only what slurmctld runs there
    step.repair.beat = true;
    const auto& high = step.repair.highest_step;
    if (rank.beat.step && (!high || *rank.beat.step > *high))
      step.repair.highest_step = rank.beat.step;
  }
}

std::optional<Hang> Engine::hung(const StoredStep& step) {
  auto& samples = hang_samples_[step.step.run_id];
  const auto since_start = clock_.since(step.created());
  // One that spans the attempt's start ends a beat left by an earlier step
  // with the same ids (of_attempt): not the run's pace.
  for (const auto interval : reports_.progress.take_intervals(step.step.job_id, step.step.step_id))
    if (interval <= since_start) samples.push_back(interval);
  if (samples.size() > kHangSamples)
    samples.erase(samples.begin(),
                  samples.begin() + static_cast<std::ptrdiff_t>(samples.size() - kHangSamples));
  const HangRule rule{step.step.hang_timeout, config_.hang_first_beat_timeout,
                      config_.hang_timeout_floor};
  const auto seen = of_attempt(reports_.progress.seen(step.step.job_id, step.step.step_id),
                               since_start, clock_.now());
  // Whether an earlier attempt beat: asked of the store only when this one
  // has not beaten yet.
  bool beat_before = false;
  const auto hosts = step_hosts(step);
  const bool beats_now = seen && std::ranges::any_of(seen->ranks, [&](const auto& r) {
                           return contains(hosts, r.second.node);
                         });
  if (!beats_now && step.step.attempt > 0) {
    const auto attempts = run_attempts(step);
    beat_before = std::any_of(attempts.begin(), attempts.end() - 1,
                              [](const StoredStep& a) { return a.repair.beat; });
  }
  return hang_of(seen, hosts, rule, samples, beat_before, since_start, clock_.now());
}

void Engine::start_hang_repair(StoredStep& step, const slurm::JobInfo& job, const NodeMap& nodes,
                               const Hang& hang) {
  const auto what = fmt::format("step {}.{} attempt {} hung: {}", step.step.job_id,
                                step.step.step_id, step.step.attempt, hang.detail);
  if (keeper_.gate().held()) {
    keeper_.gate().would(step, "hung",
                         fmt::format("cancel step {}.{} and relaunch run {} in place ({})",
                                     job.job_id, step.step.step_id, step.step.run_id, what));
    return;
  }
  move_to(step, StepState::repairing, RepairPhase::detected);
  step.repair = RepairFacts{};
  step.repair.hang = hang.detail;
  step.repair.started = clock_.stamp();
  note_progress(step);
  log::warn("{}", what);
  save(step, EventKind::hung, what);
  repair(step, job, nodes);
}

bool Engine::hang_signalled(StoredStep& step, const slurm::JobInfo& job) {
  const int signal = static_cast<int>(step.step.hang_signal);
  if (signal == 0) return true;
  if (step.repair.signalled)
    return clock_.since(*step.repair.signalled) >= config_.hang_signal_grace;
  // On the repair's own thread; a failed signal is sent again at the next look.
  const auto sent = written(step, "hang signal",
                            [this, job_id = job.job_id, step_id = step.step.step_id, signal] {
                              slurm_.signal_step(job_id, step_id, signal);
                              return NodeOut{};
                            });
  if (!sent) return false;  // under way: the other steps go on
  step.repair.signalled = clock_.stamp();
  save(step, EventKind::hang_signal,
       fmt::format("SIG{} sent to every task of step {}.{}; it is cancelled in {} s "
                   "(hang_signal_grace)",
                   signal_text(signal), job.job_id, step.step.step_id,
                   whole_seconds(config_.hang_signal_grace)));
  return config_.hang_signal_grace.count() == 0;
}

void Engine::close_check(const std::string& key, FailureCheck& check) {
  for (const auto& [host, id] : check.asked) reports_.checks.forget(host, id);
  reports_.checks.checked(key);
  check.settled = true;
}

void Engine::end_failure_check(const StoredStep& step, const std::vector<FailedNode>& found) {
  const auto k = step.key();
  const auto it = failure_checks_.find(k);
  if (it == failure_checks_.end() || it->second.settled) return;
  auto& check = it->second;
  std::vector<std::string> what;
  for (const auto& f : found)
    if (check.asked.contains(f.node) && f.why.starts_with(kCheckFailed))
      what.push_back(fmt::format("{}: {}", f.node, f.why.substr(kCheckFailed.size())));
  close_check(k, check);
  if (what.empty()) return;  // another fault: the checks are not waited for
  check.found = "quick checks after the step failed: failed on " + join(what, ", ");
  log::info("step {}: {}", k, check.found);
  store_.add_event(step, {EventKind::check_failed, check.found});
}

bool Engine::hang_checked(StoredStep& step, const NodeMap& nodes) {
  std::vector<FailedNode> found;
  if (!failure_checked(step, nodes, found, true)) return false;
  const auto failed = step.repair.failed_nodes();
  std::vector<std::string> out;
  for (auto& f : found)
    if (!contains(failed, f.node)) {
      out.push_back(f.node);
      step.repair.failed.push_back(std::move(f));
    }
  if (!out.empty())
    save(step, EventKind::detected,
         fmt::format("step {}.{} attempt {} hung, and the quick checks failed on {}: out of the "
                     "job, replaced",
                     step.step.job_id, step.step.step_id, step.step.attempt, join(out, ", ")));
  return true;
}

bool Engine::failure_checked(const StoredStep& step, const NodeMap& nodes,
                             std::vector<FailedNode>& failed, bool hung) {
  const char* after = hung ? "after the step hung" : "after the step failed";
  // Held back (observe, paused, the breaker): nothing is asked that could
  // mark a node.
  if (!config_.failure_check) return true;
  const auto k = step.key();
  if (!failure_checks_.contains(k) && keeper_.gate().held()) return true;
  const auto hosts = step_hosts(step);
  auto it = failure_checks_.find(k);
  if (it == failure_checks_.end()) {
    // Only a hung step, or one a node of which said a task failed; only
    // nodes whose agent beats (no agent, no check: said in the verdict).
    if (!hung && !reports_.exits.any_failed(k, hosts)) return true;
    FailureCheck check;
    check.since = clock_.now();
    for (const auto& host : hosts)
      if (keeper_.life_of(host).view == AgentView::beating)
        check.asked[host] = reports_.checks.ask(host, config_.failure_check_timeout);
    if (check.asked.empty()) {
      check.settled = true;  // no agent: no check, as where none runs
    } else {
      std::vector<std::string> asked;
      for (const auto& [host, id] : check.asked) asked.push_back(host);
      log::info("step {}: it {}; checking {} (failure_check=quick, {} s at most)", k,
                hung ? "hung" : "failed", slurm::compress_hostlist(asked),
                whole_seconds(config_.failure_check_timeout));
      reports_.checks.checking(k, slurm::compress_hostlist(asked));
    }
    it = failure_checks_.emplace(k, std::move(check)).first;
  }
  auto& check = it->second;
  if (check.settled) return true;
  std::vector<std::string> passed;
  std::vector<std::string> unknown;
  std::vector<std::string> what;
  std::vector<FailedNode> found;
  for (const auto& [host, id] : check.asked) {
    const auto done = reports_.checks.outcome(host, id);
    if (!done) {
      if (clock_.now() - check.since < config_.failure_check_timeout) return false;
      unknown.push_back(host);
      continue;
    }
    if (done->passed) {
      passed.push_back(host);
      continue;
    }
    std::int64_t instance = 0;
    health_of(host, true, nodes, instance);
    // The checker marked the node (as a health check does): the repair
    // keeps its mark.
    const auto why =
        fmt::format("{}quick check {}: {}", kCheckFailed, after, printable(done->detail));
    found.push_back({host, why, instance});
    what.push_back(fmt::format("{}: {}", host, printable(done->detail)));
  }
  close_check(k, check);
  std::vector<std::string> parts;
  if (!found.empty()) parts.push_back("failed on " + join(what, ", "));
  if (!passed.empty()) parts.push_back("passed on " + slurm::compress_hostlist(passed));
  if (!unknown.empty())
    parts.push_back(fmt::format("no answer from {} within {} s", slurm::compress_hostlist(unknown),
                                whole_seconds(config_.failure_check_timeout)));
  check.found = fmt::format("quick checks {}: {}", after, join(parts, "; "));
  log::info("step {}: {}", k, check.found);
  store_.add_event(step,
                   {found.empty() ? EventKind::checked : EventKind::check_failed, check.found});
  failed = std::move(found);
  return true;
}

}  // namespace ar
