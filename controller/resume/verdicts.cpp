#include "resume/verdicts.hpp"

#include <fmt/core.h>

#include <utility>

#include "hostlist.hpp"
#include "log.hpp"
#include "resume/deadline.hpp"
#include "store/step_moves.hpp"

namespace ar {

std::vector<std::string> registered_hosts(const StoredStep& step) {
  try {
    return slurm::expand_hostlist(step.step.nodelist);
  } catch (const std::exception&) {
    return {};
  }
}

void audit_step(const StoredStep& step, EventKind kind, const std::string& detail) {
  log::audit({step.uid, "register", step.step.run_id}, name_of(kind),
             fmt::format("job {}: {}", step.step.job_id, detail));
}

bool Verdicts::decide(StoredStep& step, Verdict verdict, const std::string& message) {
  auto decided = step;
  move_to(decided, StepState::decided);
  decided.verdict = verdict;
  decided.message = message;
  const auto kind = event_of(verdict);
  if (!store_.save(decided, EventSpec{kind, message})) return false;
  step = std::move(decided);
  reports_.exits.forget(step.key());
  audit_step(step, kind, message);
  return true;
}

bool Verdicts::clean_end(StoredStep& step) {
  const auto k = step.key();
  const auto hosts = registered_hosts(step);
  if (!reports_.exits.all_clean(k, hosts)) return false;
  const auto message = fmt::format(
      "every node of step {}.{} ({}) reported its tasks exited 0; srun keeps the "
      "step's own exit status",
      step.step.job_id, step.step.step_id,
      hosts.size() == 1 ? std::string("1 node") : fmt::format("{} nodes", hosts.size()));
  try {
    const bool decided = store_.no_fault_if_ended(step, message);
    step = store_.find(step.step.run_id, step.step.attempt).value();
    if (!decided) return false;
  } catch (const std::exception& e) {
    std::lock_guard lock(mutex_);
    if (clean_end_failed_.insert(k).second)
      log::warn("step {}: cannot store its no_fault (it waits end_window): {}", k, e.what());
    return false;
  }
  reports_.exits.forget(k);
  audit_step(step, EventKind::no_fault, message);
  return true;
}

Verdicts::Overdue Verdicts::overdue(StoredStep& step) {
  const auto by = decide_by(step, config_);
  if (!by || !by->past(clock_)) return Overdue::not_due;
  const auto k = step.key();
  const bool repairing = step.state == StepState::repairing;
  const auto message = ar::overdue(step, config_);  // worded by the state it was in
  bool was_unstored = false;
  {
    std::lock_guard lock(mutex_);
    was_unstored = unstored_.contains(k);
  }
  Overdue outcome = Overdue::decided;
  try {
    if (!decide(step, Verdict::give_up, message)) {
      step = store_.find(step.step.run_id, step.step.attempt).value();
      std::lock_guard lock(mutex_);
      unstored_.erase(k);
      return Overdue::decided_meanwhile;
    }
    if (was_unstored) log::info("step {}: its give_up is stored now", k);
  } catch (const std::exception& e) {
    // srun hears give_up all the same; the store is asked again at each
    // call, and this is said once.
    outcome = Overdue::unstored;
    if (!was_unstored)
      log::warn(
          "step {}: past its deadline, but its give_up cannot be stored (srun hears it "
          "all the same): {}",
          k, e.what());
    move_to(step, StepState::decided);
    step.verdict = Verdict::give_up;
    step.message = message;
  }
  std::lock_guard lock(mutex_);
  if (outcome == Overdue::unstored)
    unstored_.insert(k);
  else
    unstored_.erase(k);
  // Once, at the first call past the deadline.
  if (!was_unstored) given_up_.insert_or_assign(k, GivenUp{step, repairing});
  return outcome;
}

std::vector<Verdicts::GivenUp> Verdicts::take_given_up() {
  std::lock_guard lock(mutex_);
  std::vector<GivenUp> out;
  for (auto& [k, given_up] : given_up_) out.push_back(std::move(given_up));
  given_up_.clear();
  return out;
}

}  // namespace ar
