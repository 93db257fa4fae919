// The resume engine's hung steps (docs/resume.md, "Hangs and crashes"): a
// step whose tasks stopped beating is repaired like a node fault with no
// node at fault. The `hung` event names who stopped first; the hang signal
// (if asked for) reaches every task, and after its grace the step is
// cancelled and relaunched in place from its checkpoint, counted in the
// relaunch budget; hangs in a row with no new highest step end in give_up.

#include <fmt/core.h>

#include <algorithm>

#include "autoresume/progress.hpp"
#include "gate.hpp"
#include "log.hpp"
#include "resume/detail.hpp"
#include "resume/engine.hpp"

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
  const auto seen = reports_.progress.seen(step.step.job_id, step.step.step_id);
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
  for (const auto interval : reports_.progress.take_intervals(step.step.job_id, step.step.step_id))
    samples.push_back(interval);
  if (samples.size() > kHangSamples)
    samples.erase(samples.begin(),
                  samples.begin() + static_cast<std::ptrdiff_t>(samples.size() - kHangSamples));
  const HangRule rule{step.step.hang_timeout, config_.hang_first_beat_timeout,
                      config_.hang_timeout_floor};
  const auto seen = reports_.progress.seen(step.step.job_id, step.step.step_id);
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
  return hang_of(seen, hosts, rule, samples, beat_before, clock_.since(step.created()),
                 clock_.now());
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
  const auto key = hang_signal_key(step);
  if (!writes_.has(key))
    writes_.run(key, [this, job_id = job.job_id, step_id = step.step.step_id, signal] {
      slurm_.signal_step(job_id, step_id, signal);
      return NodeOut{};
    });
  auto outcome = writes_.take(key);
  if (!outcome) return false;  // under way: the other steps go on
  outcome->get();              // a failed signal is sent again at the next look
  step.repair.signalled = clock_.stamp();
  save(step, EventKind::hang_signal,
       fmt::format("SIG{} sent to every task of step {}.{}; it is cancelled in {} s "
                   "(hang_signal_grace)",
                   signal_text(signal), job.job_id, step.step.step_id,
                   whole_seconds(config_.hang_signal_grace)));
  return config_.hang_signal_grace.count() == 0;
}

}  // namespace ar
