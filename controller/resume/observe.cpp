// The resume engine held back by the guard rails (gate.hpp, docs/guard.md):
// a fault found under a protected step is said as what the repair would do,
// and the step is left alone.

#include <fmt/core.h>

#include "autoresume/resume.hpp"
#include "autoresume/text.hpp"
#include "gate.hpp"
#include "resume/detail.hpp"
#include "resume/engine.hpp"
#include "slurm_adapter.hpp"  // hostlists

namespace ar {

using namespace resume_detail;  // NOLINT: the engine's own helpers

namespace {

// Why the run would be given up rather than relaunched (check_policy's
// reasons), or nothing.
std::string give_up_reason(const StoredStep& step, const slurm::JobInfo& job,
                           const DaemonConfig& config, std::int64_t now) {
  if (step.step.attempt + 1 > config.max_attempts)
    return fmt::format("max_attempts={} reached", config.max_attempts);
  if (job.end_time > 0 && job.end_time - now < whole_seconds(config.min_time_left))
    return fmt::format("less than min_time_left={} s left", whole_seconds(config.min_time_left));
  return "";
}

}  // namespace

std::vector<std::string> Engine::marks_of(const StoredStep& step, const slurm::JobInfo& job,
                                          const std::vector<FailedNode>& failed) {
  // What check_policy and take_out mark: a requeue sets the failed nodes of
  // the job DOWN; a repair, or a give_up where Slurm cannot requeue, sets
  // FAIL those that no check marked already.
  const bool requeue =
      plan_for(step, job, failed_nodes(failed)).how == Refill::requeue && job.batch && job.requeue;
  std::vector<std::string> out;
  for (const auto& f : failed) {
    if (!contains(job.hosts, f.node)) continue;
    if (requeue || !f.why.starts_with(kCheckFailed)) out.push_back(f.node);
  }
  return out;
}

std::string Engine::would_do(const StoredStep& step, const slurm::JobInfo& job,
                             const std::vector<FailedNode>& failed) {
  const auto nodes = failed_nodes(failed);
  std::vector<std::string> why;
  for (const auto& f : failed) why.push_back(fmt::format("{}: {}", f.node, f.why));
  const auto give_up = give_up_reason(step, job, config_, clock_.unix_now());
  const auto marks = marks_of(step, job, failed);
  const auto plan = plan_for(step, job, nodes);
  const auto the_step = fmt::format("step {}.{}", job.job_id, step.step.step_id);
  std::string what;
  if (plan.how == Refill::requeue) {
    what = !give_up.empty() || !job.batch || !job.requeue
               ? fmt::format("cancel {} and give the run up ({})", the_step,
                             give_up.empty() ? "its job cannot be requeued" : give_up)
               : fmt::format("requeue job {}{}", job.job_id,
                             marks.empty() ? "" : " and set " + join(marks, ", ") + " DOWN");
  } else {
    std::vector<std::string> keep;
    for (const auto& host : job.hosts)
      if (!contains(nodes, host)) keep.push_back(host);
    const auto with =
        plan.how == Refill::replace
            ? fmt::format("with {} replacement node{}", nodes.size(), nodes.size() == 1 ? "" : "s")
            : fmt::format("on {} of the job's nodes", plan.step_nodes);
    const auto hosts = step_hosts(step);
    const bool spares_only =
        std::ranges::none_of(nodes, [&](const std::string& node) { return contains(hosts, node); });
    what = keep.empty() ? fmt::format("give the run up: every node of job {} failed", job.job_id)
           : spares_only
               ? fmt::format(
                     "{}shrink job {} to {} (the protected step does not run on {}); {} runs on",
                     marks.empty() ? "" : "mark " + join(marks, ", ") + " FAIL, ", job.job_id,
                     slurm::compress_hostlist(keep), join(nodes, ", "), the_step)
               : fmt::format("{}shrink job {} to {}, cancel {} and {}",
                             marks.empty() ? "" : "mark " + join(marks, ", ") + " FAIL, ",
                             job.job_id, slurm::compress_hostlist(keep), the_step,
                             give_up.empty()
                                 ? fmt::format("relaunch run {} as attempt {} {}", step.step.run_id,
                                               step.step.attempt + 1, with)
                                 : "give the run up (" + give_up + ")");
  }
  return what + " (" + join(why, ", ") + ")";
}

bool Engine::held_back(StoredStep& step, const slurm::JobInfo& job,
                       const std::vector<FailedNode>& failed) {
  auto& gate = keeper_.gate();
  if (failed.empty()) {
    gate.settle(step);  // the episode, if any, is over
    return false;
  }
  if (gate.allow(Gate::Counted::mark, marks_of(step, job, failed))) return false;
  const auto what = would_do(step, job, failed);
  gate.would(step, join(failed_nodes(failed), ","), what);
  // The step is left alone. Once srun says it ended, it keeps the step's
  // own exit status: what it would be had nothing been done.
  if (step.state == StepState::ended)
    decide(step, Verdict::no_fault,
           fmt::format("the controller did not act ({}): it would {}; srun keeps the step's own "
                       "exit status",
                       gate.held().value_or("held back"), what));
  return true;
}

}  // namespace ar
