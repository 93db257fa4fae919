// The resume engine's repair of a step: the policy's checks, the failed
// nodes out of the job, replacements chosen, the job expanded, the relaunch
// (engine.hpp has the phases).

#include <fmt/core.h>

#include <algorithm>

#include "autoresume/resume.hpp"
#include "autoresume/text.hpp"
#include "log.hpp"
#include "resume/detail.hpp"
#include "resume/engine.hpp"
#include "slurm_adapter.hpp"  // hostlists

namespace ar {

using namespace resume_detail;  // NOLINT: the engine's own helpers

namespace {

// The nodes set DOWN once out of the job, for a message.
std::string downed_text(const std::vector<std::string>& downed) {
  return downed.empty() ? "" : ", then DOWN: " + join(downed, ", ");
}

// The reason the engine marks a failed node with.
std::string mark_reason(const FailedNode& f, const slurm::JobInfo& job) {
  return fmt::format("auto-resume: {} (job {})", f.why, job.job_id);
}

// Whether the engine marks `f`: a node a health check, a heartbeat or an
// admin marked keeps that reason (the node keeper replaces it by that
// mark). One the
// job no longer holds is not the engine's to mark (Slurm dropped it, and
// shows it DOWN or FAIL already).
bool engine_marks(const FailedNode& f, const slurm::JobInfo& job) {
  return !f.why.starts_with(kCheckFailed) && contains(job.hosts, f.node);
}

}  // namespace

void Engine::repair(StoredStep& step, const slurm::JobInfo& job, const NodeMap& nodes) {
  if (step.phase != RepairPhase::detected) redo_lost_updates(step, job);
  // Paused or tripped since the fault was detected: nothing is done yet.
  if (step.phase == RepairPhase::detected && keeper_.gate().held()) {
    keeper_.gate().would(step, "detected", would_do(step, job, step.repair.failed));
    return;
  }
  // A hung step's tasks get the hang signal first, and its grace; then
  // its nodes' quick checks (a node that fails one leaves the job).
  if (step.phase == RepairPhase::detected && !step.repair.hang.empty() &&
      (!hang_signalled(step, job) || !hang_checked(step, nodes)))
    return;
  if (step.phase == RepairPhase::detected && (!check_policy(step, job) || !take_out(step, job)))
    return;
  if (!no_new_faults(step, job, nodes)) return;
  if (step.phase == RepairPhase::node_out && step.repair.step_nodes) go_on_in_job(step, job);
  if (step.phase == RepairPhase::node_out && !replace(step, job, nodes)) return;
  if (step.phase == RepairPhase::replaced && !expand(step, job)) return;
  if (step.phase == RepairPhase::expanded) relaunch(step, job);
}

bool Engine::no_new_faults(StoredStep& step, const slurm::JobInfo& job, const NodeMap& nodes) {
  auto& repair = step.repair;
  const auto failed = repair.failed_nodes();
  const auto chosen = repair.replacements;
  std::vector<FailedNode> found;
  std::vector<std::string> dropped;  // replacements that failed before they joined the job
  std::vector<std::string> what;
  auto look = [&](const std::string& host, bool joined) {
    std::int64_t instance = 0;
    const auto why = fault_of(host, health_of(host, true, nodes, instance));
    if (!why) return;
    what.push_back(
        fmt::format("{}{}: {}", host, contains(chosen, host) ? " (a replacement)" : "", *why));
    if (joined)
      found.push_back({host, *why, instance});
    else
      dropped.push_back(host);
  };
  // The nodes the relaunch may run on: every node still in the job (the
  // step's, its spares, merged replacements), and the replacements not
  // merged yet.
  for (const auto& host : job.hosts)
    if (!contains(failed, host)) look(host, true);
  for (const auto& host : chosen)
    if (!contains(job.hosts, host) && !contains(failed, host)) look(host, false);
  if (found.empty() && dropped.empty()) return true;
  for (const auto& node : dropped) {
    if (const auto it = repair.helpers.find(node); it != repair.helpers.end()) {
      // In the outbox: one gone already, or left over, is cancelled by
      // name at the repair's end.
      outbox_.post(fmt::format("cancel helper job {}", it->second),
                   [this, id = it->second] { slurm_.cancel_job(id); });
      repair.helpers.erase(it);
    }
    repair.helper_since.erase(node);
    pass_over(step, node);
  }
  // A node of the job failed: it leaves the job in this same repair (the
  // policy's checks and node_out again), and a replacement is chosen for
  // it. A merged replacement that failed stays counted among the
  // replacements (it was merged), so one more is chosen for it as well.
  for (const auto& f : found) repair.failed.push_back(f);
  if (!found.empty()) move_to(step, StepState::repairing, RepairPhase::detected);
  save(step, EventKind::detected,
       fmt::format("step {}.{} attempt {}, during its repair: {}", step.step.job_id,
                   step.step.step_id, step.step.attempt, join(what, ", ")));
  return false;
}

void Engine::redo_lost_updates(StoredStep& step, const slurm::JobInfo& job) {
  // A slurmctld killed before it saved its state comes back with the job
  // as it was: a failed node in it again (one not chosen as its own
  // replacement), a merged replacement out of it. What was lost is done
  // again: the failed nodes leave the job, the lost replacements are merged.
  auto& repair = step.repair;
  const auto failed = repair.failed_nodes();
  const auto& chosen = repair.replacements;
  std::vector<std::string> what;
  bool back = false;
  for (const auto& host : job.hosts)
    if (contains(failed, host) && !contains(chosen, host)) {
      what.push_back(host + " is in the job again");
      back = true;
    }
  auto merged = repair.merged;
  for (const auto& node : repair.merged)
    if (!contains(job.hosts, node) && !contains(failed, node)) {
      what.push_back(node + " is out of it");
      merged.erase(std::remove(merged.begin(), merged.end(), node), merged.end());
    }
  if (what.empty()) return;
  repair.merged = merged;
  if (back)
    move_to(step, StepState::repairing, RepairPhase::detected);
  else if (step.phase == RepairPhase::expanded)
    move_to(step, StepState::repairing, RepairPhase::replaced);
  save(step, EventKind::detected,
       fmt::format("step {}.{} attempt {}, during its repair: job {} lost updates ({}; slurmctld "
                   "restarted from an older state): done again",
                   step.step.job_id, step.step.step_id, step.step.attempt, job.job_id,
                   join(what, ", ")));
}

RelaunchBudget Engine::budget_of(const StoredStep& step) {
  // Each attempt ran from its registration to its fault (the repair's
  // start), or to its end; the one failing now until now.
  auto times = [this](const StoredStep& s) {
    const auto end = s.repair.started.value_or(s.ended_at > 0 ? s.ended() : clock_.stamp());
    return AttemptTimes{s.step.attempt, clock_.since(s.created()), elapsed(s.created(), end)};
  };
  std::vector<AttemptTimes> attempts;
  // An attempt that passed the run's highest training step made progress:
  // healthy, however short it ran.
  const auto run = run_attempts(step);
  const auto moved_on = progressed(run);
  for (std::size_t i = 0; i < run.size(); ++i) {
    attempts.push_back(times(run[i]));
    attempts.back().progressed = moved_on[i];
  }
  return relaunch_budget(attempts, config_.attempt_window, config_.healthy_after);
}

Engine::Plan Engine::plan_for(const StoredStep& step, const slurm::JobInfo& job,
                              const std::vector<std::string>& failed) {
  std::uint32_t healthy = 0;
  for (const auto& host : job.hosts)
    if (!contains(failed, host)) ++healthy;
  const auto hosts = step_hosts(step);
  const auto size = static_cast<std::uint32_t>(hosts.size());
  const auto min = step.step.min_nodes;
  // The batch script runs on the batch host: it cannot leave its job.
  if (job.batch && contains(failed, job.batch_host))
    return {Refill::requeue, 0, fmt::format("the batch host {} failed", job.batch_host)};
  // A step of unknown size (no node list at all) is not sized here.
  if (size > 0 && healthy >= size) return {Refill::in_job, size, ""};
  if (size > 0 && min > 0 && healthy >= min) return {Refill::shrink, healthy, ""};
  if (!job.has_gres) return {Refill::replace, 0, ""};
  // Slurm shrinks a job holding GRES, but never gives it a node.
  return {Refill::requeue, 0,
          fmt::format("job {} holds GRES, which Slurm cannot move to other nodes, and has no "
                      "spare node left (its {}-node step, {} healthy node{} in the job{})",
                      job.job_id, size, healthy, healthy == 1 ? "" : "s",
                      min > 0 ? fmt::format(", --auto-resume-min-nodes={}", min) : "")};
}

bool Engine::check_policy(StoredStep& step, const slurm::JobInfo& job) {
  const auto failed = step.repair.failed_nodes();
  const auto budget = budget_of(step);
  // No relaunch, but the failed node still leaves the job (so that Slurm
  // does not kill it) and the step ends at once: the batch script goes on
  // with srun's give_up status.
  std::string give_up;
  const auto hangs = step.repair.hang.empty() ? 0U : hangs_in_a_row(step);
  if (hangs > config_.max_hang_restarts)
    give_up = fmt::format(
        "run {} hung {} times in a row with no new highest step between the hangs "
        "(max_hang_restarts={})",
        step.step.run_id, hangs, config_.max_hang_restarts);
  else if (budget.in_window >= config_.max_attempts)
    give_up = fmt::format(
        "run {} was relaunched {} times within attempt_window={} s (max_attempts={}){}",
        step.step.run_id, budget.in_window, whole_seconds(config_.attempt_window),
        config_.max_attempts,
        config_.healthy_after.count() > 0 ? fmt::format(", none of them running healthy_after={} s",
                                                        whole_seconds(config_.healthy_after))
                                          : "");
  else if (job.end_time > 0 &&
           job.end_time - clock_.unix_now() < whole_seconds(config_.min_time_left))
    give_up = fmt::format("only {} s of job {}'s time limit are left (min_time_left={} s)",
                          std::max<std::int64_t>(0, job.end_time - clock_.unix_now()), job.job_id,
                          whole_seconds(config_.min_time_left));
  const bool batch_host_failed = job.batch && contains(failed, job.batch_host);
  if (!give_up.empty()) {
    // A batch host cannot leave its job; the step still ends, so that srun
    // does not wait for a dead node.
    if (batch_host_failed) {
      give_up_keeping_nodes(step, job, give_up);
    } else if (take_out(step, job)) {
      decide(step, Verdict::give_up,
             give_up + (failed.empty() ? fmt::format("; step {}.{} was cancelled", job.job_id,
                                                     step.step.step_id)
                                       : "; the failed node left the job"));
    }
    return false;
  }
  const auto plan = plan_for(step, job, failed);
  if (plan.how == Refill::requeue) {
    requeue_or_give_up(step, job, failed, plan.why);
    return false;
  }
  if (plan.how == Refill::replace)
    step.repair.step_nodes.reset();
  else
    step.repair.step_nodes = plan.step_nodes;
  step.repair.streak = budget.streak;  // the relaunch's backoff
  return true;
}

void Engine::requeue_or_give_up(StoredStep& step, const slurm::JobInfo& job,
                                const std::vector<std::string>& failed, const std::string& why) {
  if (!job.batch || !job.requeue) {
    // The job keeps the dead node (Slurm cannot shrink it here), but no
    // other job may be given it.
    give_up_keeping_nodes(step, job,
                          why + (job.batch ? "; the job was submitted with --no-requeue"
                                           : "; a salloc job cannot be requeued"));
    return;
  }
  // Taken by requeue_written: at once where calls run on the caller's
  // thread (tests), else at a later look, when the job is pending.
  const auto key = call_key(step, "requeue");
  if (writes_.has(key)) return;
  writes_.run(key, [this, job, failed, why] {
    slurm_.requeue(job.job_id);
    // DOWN, not FAIL: the requeued job would otherwise wait for the dead
    // node's epilog until Slurm itself gives up on the node.
    for (const auto& node : failed)
      if (contains(job.hosts, node))
        slurm_.set_node_down(node, fmt::format("auto-resume: failed under job {}", job.job_id));
    NodeOut did;
    did.verdict =
        why + fmt::format(": job {} was requeued and restarts from its batch script", job.job_id);
    return did;
  });
  requeue_written(step);
}

bool Engine::requeue_written(StoredStep& step) {
  if (!writes_.has(call_key(step, "requeue"))) return false;
  const auto out = written(step, "requeue", nullptr);
  if (out) decide(step, Verdict::requeued, out->verdict);
  return true;  // else under way: this repair waits, the others go on
}

void Engine::give_up_keeping_nodes(StoredStep& step, const slurm::JobInfo& job,
                                   const std::string& why) {
  const auto out =
      written(step, "give up", [this, marked = step.repair.failed, job, id = step.step.step_id] {
        NodeOut did;
        mark_failed(marked, job, did.notes);
        slurm_.kill_step(job.job_id, id);
        return did;
      });
  if (out) decide(step, Verdict::give_up, why + notes_text(out->notes));
}

std::optional<Engine::NodeOut> Engine::written(const StoredStep& step, std::string_view what,
                                               std::function<NodeOut()> writes) {
  const auto key = call_key(step, what);
  if (!writes_.has(key)) writes_.run(key, std::move(writes));
  auto outcome = writes_.take(key);
  if (!outcome) return std::nullopt;
  return outcome->get();
}

void Engine::go_on_in_job(StoredStep& step, const slurm::JobInfo& job) {
  // `job` is as the tick read it, before take_out shrank it.
  const auto failed = step.repair.failed_nodes();
  std::vector<std::string> keep;
  for (const auto& host : job.hosts)
    if (!contains(failed, host)) keep.push_back(host);
  const std::uint32_t size = step.repair.step_nodes.value_or(0);
  move_to(step, StepState::repairing, RepairPhase::expanded);
  step.repair.expanded = clock_.stamp();
  save(step, EventKind::expanded,
       fmt::format("job {} goes on without a new node: the step runs again on {} of its {} "
                   "healthy nodes ({}){}",
                   job.job_id, size, keep.size(), slurm::compress_hostlist(keep),
                   size < step_hosts(step).size()
                       ? fmt::format(", {} fewer than before (--auto-resume-min-nodes={})",
                                     step_hosts(step).size() - size, step.step.min_nodes)
                       : ""));
}

bool Engine::take_out(StoredStep& step, const slurm::JobInfo& job) {
  const auto failed = step.repair.failed_nodes();
  std::vector<std::string> keep;
  for (const auto& host : job.hosts)
    if (!contains(failed, host)) keep.push_back(host);
  if (keep.empty() && !writes_.has(call_key(step, "node_out"))) {
    decide(step, Verdict::give_up, fmt::format("every node of job {} failed", job.job_id));
    return false;
  }
  // In order, on the repair's own thread: the look goes on meanwhile.
  const auto written_out = written(
      step, "node_out", [this, marked = step.repair.failed, job, keep, id = step.step.step_id] {
        NodeOut did;
        did.kept = slurm::compress_hostlist(keep);
        mark_failed(marked, job, did.notes);
        if (keep.size() != job.hosts.size()) {
          slurm_.shrink_job(job.job_id, did.kept);
          did.downed = down_released(marked, job, did.notes);
        }
        slurm_.kill_step(job.job_id, id);
        return did;
      });
  if (!written_out) return false;  // under way: this repair waits, the others go on
  const auto& out = *written_out;
  if (!failed.empty()) step.repair.out = clock_.stamp();
  move_to(step, StepState::repairing, RepairPhase::node_out);
  // A hang with every node healthy: the step alone goes.
  if (failed.empty())
    save(step, EventKind::node_out,
         fmt::format("step {}.{} cancelled; job {} keeps its nodes ({}){}", job.job_id,
                     step.step.step_id, job.job_id, out.kept, notes_text(out.notes)));
  else
    save(step, EventKind::node_out,
         fmt::format("{} set FAIL and out of job {} (now on {}){}; step {}.{} cancelled{}",
                     join(failed, ", "), job.job_id, out.kept, downed_text(out.downed), job.job_id,
                     step.step.step_id, notes_text(out.notes)));
  return true;
}

template <typename T>
void Engine::drop_unwanted(
    Calls<T>& calls, const std::vector<StoredStep>& steps,
    const std::function<bool(const StoredStep&, const std::string&)>& wanted) {
  for (const auto& call : calls.finished()) {
    if (std::ranges::any_of(steps, [&](const StoredStep& step) {
          return call.starts_with(call_prefix(step)) && (!wanted || wanted(step, call));
        }))
      continue;
    try {
      calls.take(call)->get();
      log::info("{}: no longer wanted (the step moved on meanwhile)", call);
    } catch (const std::exception& e) {
      log::info("{}: no longer wanted (the step moved on meanwhile): {}", call, e.what());
    }
  }
}

void Engine::drop_unwanted_calls(const std::vector<StoredStep>& steps) {
  drop_unwanted_submits(steps);
  drop_unwanted(writes_, steps);
  // A helper's look is wanted while its node is a replacement not merged.
  drop_unwanted(merges_, steps, [](const StoredStep& step, const std::string& call) {
    const auto& repair = step.repair;
    return std::ranges::any_of(repair.replacements, [&](const std::string& node) {
      return call == merge_key(step, node) && !contains(repair.merged, node);
    });
  });
  drop_unwanted(checks_, steps);
  drop_unwanted(places_, steps);
}

void Engine::mark_failed(const std::vector<FailedNode>& failed, const slurm::JobInfo& job,
                         std::vector<std::string>& notes) {
  for (const auto& f : failed) {
    if (!engine_marks(f, job)) continue;
    try {
      slurm_.set_node_fail(f.node, mark_reason(f, job));
    } catch (const slurm::SlurmUnreachable&) {
      throw;  // every next call would wait the same: the write is tried again
    } catch (const slurm::SlurmError& e) {
      notes.push_back(e.what());  // the node may be gone from slurm.conf: the step matters
    }
  }
}

std::vector<std::string> Engine::down_released(const std::vector<FailedNode>& failed,
                                               const slurm::JobInfo& job,
                                               std::vector<std::string>& notes) {
  std::vector<std::string> downed;
  for (const auto& f : failed) {
    if (!contains(job.hosts, f.node)) continue;
    try {
      // Another job on it would end with it: that node stays FAIL.
      const auto node = slurm_.load_node(f.node);
      if (!node || node->allocated) continue;
      // A check's or a heartbeat's mark keeps its reason (the node keeper
      // replaces the node by it): a frozen node's abort is resent too.
      slurm_.set_node_down(f.node, engine_marks(f, job) ? mark_reason(f, job) : node->reason);
      downed.push_back(f.node);
    } catch (const slurm::SlurmUnreachable&) {
      throw;
    } catch (const slurm::SlurmError& e) {
      notes.push_back(e.what());
    }
  }
  return downed;
}

std::multimap<std::string, std::int64_t> Engine::failed_instances(std::uint32_t job_id) {
  std::multimap<std::string, std::int64_t> out;
  for (const auto& s : store_.job_steps(job_id))
    for (const auto& f : s.repair.failed) out.emplace(f.node, f.instance);
  return out;
}

const slurm::NodeInfo* Engine::pick_replacement(StoredStep& step, const slurm::JobInfo& job,
                                                const NodeMap& nodes, const Candidates& candidates,
                                                const std::vector<std::string>& chosen) {
  auto is_banned = [&](const slurm::NodeInfo& node) {
    const auto [first, last] = candidates.banned.equal_range(node.name);
    return std::any_of(first, last,
                       [&](const auto& entry) { return entry.second == node.slurmd_start_time; });
  };
  // A spare of the job's partition (kept for this), else an idle node of
  // it; one that never failed this job, nor was given up in this repair.
  const auto& passed_over = step.repair.passed_over;
  for (const bool spare : {true, false}) {
    for (const auto& [name, node] : nodes) {
      if (spare ? !NodeKeeper::is_spare(*node)
                : (!node->idle || node->fail || node->drain || node->not_responding ||
                   node->completing))
        continue;
      // One not registered since slurmctld started has no known instance
      // yet (see nodes_registered): chosen once it registers.
      // Nor one another repair chose (its helper may not hold it yet: the
      // node list may still show it idle).
      const auto claim = claimed_.find(name);
      if (node->slurmd_start_time == 0 || contains(job.hosts, name) || contains(chosen, name) ||
          (claim != claimed_.end() && claim->second != step.key()) || is_banned(*node) ||
          contains(passed_over, name) || !contains(candidates.partition, name) ||
          candidates.reserved.contains(name) ||
          (candidates.reservation && !candidates.reservation->contains(name)))
        continue;
      if (spare) {
        // Out of its drain with the helper's submit (expand_one).
        save(step, EventKind::spare_taken,
             fmt::format("spare {} of partition {} taken for job {}", node->name, job.partition,
                         job.job_id));
      }
      return node;
    }
  }
  return nullptr;
}

Engine::Candidates Engine::candidates_for(const slurm::JobInfo& job, const Places& places) {
  Candidates out;
  if (const auto it = places.partitions.find(job.partition); it != places.partitions.end())
    out.partition = it->second;
  out.banned = failed_instances(job.job_id);
  // A reserved node is for its reservation's jobs; a job in a reservation
  // gets its nodes from it (the helper is submitted into it as well).
  for (const auto& [name, hosts] : places.reservations) {
    if (name == job.reservation)
      out.reservation = std::set<std::string>(hosts.begin(), hosts.end());
    else
      out.reserved.insert(hosts.begin(), hosts.end());
  }
  if (!job.reservation.empty() && !out.reservation) out.reservation.emplace();
  return out;
}

bool Engine::replace(StoredStep& step, const slurm::JobInfo& job, const NodeMap& nodes) {
  auto& repair = step.repair;
  const auto failed = repair.failed;
  auto chosen = repair.replacements;
  // One a failed node of the step, and one a chosen replacement that failed
  // itself. A failed node outside the step (a node of the job the step had
  // gone on without, say after slurmctld came back from an older state)
  // needs none, nor does one whose new instance is itself chosen.
  const auto hosts = step_hosts(step);
  const auto needed =
      static_cast<std::size_t>(std::ranges::count_if(failed, [&](const FailedNode& f) {
        if (hosts.empty() || contains(hosts, f.node)) return true;
        if (!contains(chosen, f.node)) return false;
        const auto it = nodes.find(f.node);
        const bool new_instance = it != nodes.end() && it->second->slurmd_start_time != 0 &&
                                  it->second->slurmd_start_time != f.instance;
        return !new_instance;
      }));
  std::optional<Candidates> candidates;
  if (chosen.size() < needed) {
    // Read on a thread of its own: this repair waits, the others go on.
    const auto key = call_key(step, "places");
    if (!places_.has(key))
      places_.run(key, [this] { return Places{slurm_.partitions(), slurm_.reservations()}; });
    auto outcome = places_.take(key);
    if (!outcome) return false;
    candidates = candidates_for(job, outcome->get());
  }
  while (chosen.size() < needed) {
    const auto* pick = pick_replacement(step, job, nodes, *candidates, chosen);
    if (pick == nullptr) break;
    chosen.push_back(pick->name);
    repair.replacements.push_back(pick->name);
    claimed_.emplace(pick->name, step.key());
    save(step, EventKind::replaced,
         fmt::format("{} (instance {}) joins job {}", pick->name, pick->slurmd_start_time,
                     job.job_id));
  }
  if (chosen.size() >= needed) {
    move_to(step, StepState::repairing, RepairPhase::replaced);
    save(step, EventKind::replaced_all,
         fmt::format("replacements for job {}: {}", job.job_id, join(chosen, ", ")));
    return true;
  }
  // No idle node: the node keeper has the provider replace the failed
  // nodes, which then come back idle as new instances (chosen above at a
  // later tick). A replacement that failed for good ends the wait.
  for (const auto& f : failed) {
    const auto& node = f.node;
    if (contains(chosen, node)) continue;
    if (const auto r = store_.node_repair(node); r && r->state == NodeRepairState::failed) {
      decide(step, Verdict::give_up,
             fmt::format("no node can replace {} (no idle node in partition {}, and the "
                         "provider failed: {})",
                         node, job.partition, r->detail));
      return false;
    }
  }
  return false;
}

void Engine::pass_over(StoredStep& step, const std::string& node) {
  auto& repair = step.repair;
  auto& chosen = repair.replacements;
  chosen.erase(std::remove(chosen.begin(), chosen.end(), node), chosen.end());
  if (!contains(repair.passed_over, node)) repair.passed_over.push_back(node);
  move_to(step, StepState::repairing, RepairPhase::node_out);
}

bool Engine::expand(StoredStep& step, const slurm::JobInfo& job) {
  auto& repair = step.repair;
  auto nodes = job.nodes;  // as the look read them, or after a merge of its own
  for (const auto& node : std::vector<std::string>(repair.replacements)) {
    if (contains(repair.merged, node)) continue;
    // Merged before a restart of the controller (a merge of this one's is
    // taken by expand_one, for its event).
    if (contains(job.hosts, node) && !merges_.has(merge_key(step, node))) {
      repair.merged.push_back(node);
      continue;
    }
    if (!expand_one(step, job, node, nodes)) return false;
  }
  move_to(step, StepState::repairing, RepairPhase::expanded);
  step.repair.expanded = clock_.stamp();
  save(step, EventKind::expanded, fmt::format("job {} is on {} again", job.job_id, nodes));
  return true;
}

bool Engine::expand_one(StoredStep& step, const slurm::JobInfo& job, const std::string& node,
                        std::string& nodes) {
  auto& repair = step.repair;
  const auto name = helper_name(job.job_id);
  auto choose_again = [&](const std::string& why) {
    pass_over(step, node);
    save(step, EventKind::expand_retry, why);
    return false;
  };
  if (!repair.helpers.contains(node)) {
    // The submit runs on a thread of its own (auto-resume-submit runs as
    // the job's owner, for up to 30 s): this tick goes on with the other
    // steps, and a later one takes its outcome.
    const auto call = submit_key(step, node);
    if (!submits_.has(call))
      submits_.run(call, [this, job, node, name] {
        // A helper submitted before a restart of the controller but not recorded.
        for (const auto id : slurm_.live_jobs_named(name, job.uid)) slurm_.cancel_job(id);
        // A spare of the pool taken for the job leaves its drain.
        if (const auto info = slurm_.load_node(node); info && NodeKeeper::is_spare(*info))
          slurm_.undrain_node(node);
        return slurm_.submit_expand_helper(job, node, name);
      });
    auto outcome = submits_.take(call);
    if (!outcome) return false;  // under way
    std::uint32_t id = 0;
    try {
      id = outcome->get();
    } catch (const slurm::SlurmError& e) {
      return choose_again(fmt::format("{}: choosing another node", e.what()));
    }
    repair.helpers[node] = id;
    save(step, EventKind::expand_helper,
         fmt::format("helper job {} allocates {} for job {}", id, node, job.job_id));
  }
  const std::uint32_t helper = repair.helpers.at(node);
  // The helper looked at, and merged once it runs, on a thread of its own.
  // Its patience counts from the first look; the wait's start is stored,
  // since every look reads the step from the store anew.
  const auto key = merge_key(step, node);
  if (!merges_.has(key)) {
    if (const auto left = abort_in_flight(step, node); left.count() > 0) {
      if (said_abort_wait_.say(key))
        log::info(
            "step {}: {} left job {} {} s ago, and slurmctld keeps trying to deliver the job's "
            "end to its slurmd for MessageTimeout ({} s): a new instance answering there "
            "would get it once it is in the job again; merging it in {} s",
            step.key(), node, job.job_id,
            std::chrono::duration_cast<seconds>(clock_.since(*repair.out)).count(),
            view_ ? view_->message_timeout.count() : 0, left.count());
      return false;
    }
    const bool first = !repair.helper_since.contains(node);
    const auto waited = waited_since(repair.helper_since[node], first, clock_);
    if (first && !store_.save(step, std::nullopt)) throw DecidedMeanwhile{};
    merges_.run(key, [this, helper, id = job.job_id, give_up = waited >= kHelperPatience] {
      return merge(helper, id, give_up);
    });
  }
  auto outcome = merges_.take(key);
  if (!outcome) return false;  // under way
  const auto looked = outcome->get();
  const auto waited =
      std::chrono::duration_cast<seconds>(clock_.since(repair.helper_since[node])).count();
  switch (looked.how) {
    case Merge::How::pending:
      return false;  // looked at again at the next look
    case Merge::How::cancelled:
      // The node went elsewhere or does not fit: choose again.
      repair.helpers.erase(node);
      repair.helper_since.erase(node);
      return choose_again(
          fmt::format("helper job {} waited {} s for {} ({}): choosing another node", helper,
                      waited, node, looked.detail));
    case Merge::How::ended:
      repair.helpers.erase(node);  // ended without merging: try again
      repair.helper_since.erase(node);
      save(step, EventKind::expand_retry,
           fmt::format("helper job {} for {} ended ({}) before the merge", helper, node,
                       looked.detail));
      return false;
    case Merge::How::unlinked:
      // slurmctld restarted since the helper started: a new one is
      // submitted at the next look, for the same node.
      repair.helpers.erase(node);
      repair.helper_since.erase(node);
      save(step, EventKind::expand_retry,
           fmt::format("{} (slurmctld restarted since helper job {} started): a new helper",
                       looked.detail, helper));
      return false;
    case Merge::How::merged:
      break;
  }
  repair.merged.push_back(node);
  nodes = looked.nodes;
  save(step, EventKind::merged,
       fmt::format("{} merged into job {} (helper job {})", node, job.job_id, helper));
  return true;
}

seconds Engine::abort_in_flight(const StoredStep& step, const std::string& node) const {
  const auto& repair = step.repair;
  if (!repair.out || !contains(repair.failed_nodes(), node) || !view_) return seconds(0);
  const auto wait = view_->message_timeout + kAbortMargin;
  const auto since = std::chrono::duration_cast<seconds>(clock_.since(*repair.out));
  return since >= wait ? seconds(0) : wait - since;
}

Engine::Merge Engine::merge(std::uint32_t helper, std::uint32_t job_id, bool give_up) {
  const auto info = slurm_.load_job(helper);
  if (info && info->pending) {
    if (!give_up) return {Merge::How::pending, info->reason, ""};
    slurm_.cancel_job(helper);
    return {Merge::How::cancelled, info->reason, ""};
  }
  if (!info || !info->running) return {Merge::How::ended, info ? info->state : "gone", ""};
  try {
    slurm_.merge_expand_helper(helper, job_id);
  } catch (const slurm::HelperUnlinked& e) {
    slurm_.cancel_job(helper);
    return {Merge::How::unlinked, e.what(), ""};
  }
  const auto now = slurm_.load_job(job_id);
  return {Merge::How::merged, "", now ? now->nodes : std::string("?")};
}

void Engine::drop_unwanted_submits(const std::vector<StoredStep>& steps) {
  for (const auto& call : submits_.finished()) {
    // Still wanted: its step repairs on, waiting for that node's helper.
    const bool wanted = std::ranges::any_of(steps, [&](const StoredStep& step) {
      if (step.state != StepState::repairing || step.phase != RepairPhase::replaced) return false;
      for (const auto& node : step.repair.replacements)
        if (submit_key(step, node) == call) return !step.repair.helpers.contains(node);
      return false;
    });
    if (wanted) continue;
    auto outcome = submits_.take(call);
    try {
      const auto id = outcome->get();
      log::info("{}: helper job {} is no longer wanted (the repair moved on): cancelled", call, id);
      outbox_.post(fmt::format("cancel helper job {}", id), [this, id] { slurm_.cancel_job(id); });
    } catch (const std::exception& e) {
      log::info("{}: a helper no longer wanted: {}", call, e.what());
    }
  }
}

void Engine::relaunch(StoredStep& step, const slurm::JobInfo& before) {
  const auto waited = clock_.since(step.repair.expanded.value_or(clock_.stamp()));
  const auto waited_s = std::chrono::duration_cast<seconds>(waited).count();
  const auto next = step.step.attempt + 1;
  // A repair stored before the budget has no streak: every attempt counts.
  const std::uint32_t streak = step.repair.streak.value_or(next);
  const auto delay = relaunch_backoff(streak, std::chrono::duration_cast<seconds>(config_.backoff),
                                      DaemonConfig::kMaxBackoff);
  // What slurmctld says now, asked on a thread of its own; decided here
  // once it is in (see kOldStepGrace).
  const auto key = call_key(step, "relaunch");
  if (!checks_.has(key)) {
    RelaunchAsk ask;
    ask.job_id = before.job_id;
    ask.step_id = step.step.step_id;
    if (waited_s >= kOldStepGrace.count()) {
      // When the step's first node died, its record stays for minutes
      // (the other nodes' completions go through that node); --overlap
      // allows for it.
      const auto registered = slurm::expand_hostlist(step.step.nodelist);
      const bool head_died =
          !registered.empty() && contains(step.repair.failed_nodes(), registered.front());
      ask.anyway = head_died || waited_s >= kOldStepGone.count();
      // Its slurmstepds may be slow to end: cancelled again, once per grace.
      const auto last = step.repair.old_step_cancelled;
      ask.cancel_again = !ask.anyway && (!last || clock_.since(*last) >= kOldStepGrace);
    }
    ask.backoff_over = waited >= delay;
    ask.step_hosts = step_hosts(step);
    ask.failed = step.repair.failed_nodes();
    // The evidence that needs no record to go: each surviving node's step
    // daemon said its tasks exited (a record whose node died mid-tree stays
    // until the daemons above it give up waiting for it: a minute).
    std::vector<std::string> survivors;
    for (const auto& host : ask.step_hosts)
      if (!contains(ask.failed, host)) survivors.push_back(host);
    ask.tasks_gone = reports_.exits.all_reported(step.key(), survivors);
    checks_.run(key, [this, ask = std::move(ask)] { return relaunch_facts(ask); });
  }
  auto outcome = checks_.take(key);
  if (!outcome) return;  // under way: this repair waits, the others go on
  const auto facts = outcome->get();
  if (!facts.job || !facts.job->running) return;  // the next look decides what happened
  const auto& job = *facts.job;
  const auto id = step.step.step_id;
  if (facts.cancelled) {
    const bool first = !step.repair.old_step_cancelled;
    step.repair.old_step_cancelled = clock_.stamp();
    if (!store_.save(step, std::nullopt)) throw DecidedMeanwhile{};
    if (first)
      log::info("step {}: step {}.{} still listed {} s after the merge: cancelled again",
                step.key(), job.job_id, id, waited_s);
  }
  switch (facts.old_step) {
    case OldStep::listed:
      return;
    case OldStep::anyway:
      if (said_old_step_.say(step.key()))
        log::warn(
            "step {}: slurmctld still lists step {}.{} {} s after the merge; relaunching "
            "anyway",
            step.key(), job.job_id, id, waited_s);
      break;
    case OldStep::tasks_gone:
      if (said_old_step_.say(step.key()))
        log::info(
            "step {}: slurmctld still lists step {}.{}, but every surviving node reported its "
            "tasks exited: relaunching",
            step.key(), job.job_id, id);
      break;
    case OldStep::abandoned:
      if (said_old_step_.say(step.key()))
        log::info(
            "step {}: slurmctld still lists step {}.{}, but none of its nodes runs it (a "
            "record slurmctld recovered after a restart): relaunching",
            step.key(), job.job_id, id);
      break;
    case OldStep::gone:
      break;
  }
  if (waited < delay) return;
  if (!facts.unregistered.empty()) {
    if (said_unregistered_.say(step.key()))
      log::info(
          "step {}: relaunch waits for {} (and any node after it) to register with "
          "slurmctld (restarted lately)",
          step.key(), facts.unregistered);
    return;
  }
  step.repair.relaunch = RelaunchPlan{job.nodes, static_cast<std::uint32_t>(job.hosts.size()),
                                      step.repair.step_nodes.value_or(0)};
  decide(
      step, Verdict::relaunch,
      fmt::format("relaunching run {} as attempt {} on {}{}{}", step.step.run_id, next, job.nodes,
                  delay.count() > 0 ? fmt::format(" after a backoff of {} s", delay.count()) : "",
                  step.repair.hang.empty() ? "" : "; the step hung: " + step.repair.hang));
}

Engine::RelaunchFacts Engine::relaunch_facts(const RelaunchAsk& ask) {
  RelaunchFacts facts;
  facts.job = slurm_.load_job(ask.job_id);
  if (!facts.job || !facts.job->running) return facts;
  const auto& job = *facts.job;
  if (!slurm_.step_exists(ask.job_id, ask.step_id)) {
    facts.old_step = OldStep::gone;
  } else if (ask.tasks_gone) {
    facts.old_step = OldStep::tasks_gone;
  } else if (ask.anyway) {
    facts.old_step = OldStep::anyway;
  } else if (ask.cancel_again) {
    slurm_.kill_step(ask.job_id, ask.step_id);
    facts.cancelled = true;
    if (!slurm_.step_exists(ask.job_id, ask.step_id)) {
      facts.old_step = OldStep::gone;
    } else {
      // A record a restarted slurmctld recovered outlives every cancel:
      // Slurm 22.05 ends a step's record only when its slurmstepds report
      // its end (or the job ends), and a cancel reaches none. Its nodes
      // still in the job are asked whether they run any of it; the failed
      // ones are dead or new.
      std::vector<std::string> nodes;
      for (const auto& host : ask.step_hosts)
        if (contains(job.hosts, host) && !contains(ask.failed, host)) nodes.push_back(host);
      if (nodes.empty() || slurm_.step_daemons_left(ask.job_id, ask.step_id,
                                                    slurm::compress_hostlist(nodes)) == false)
        facts.old_step = OldStep::abandoned;
    }
  }
  if (facts.old_step == OldStep::listed || !ask.backoff_over) return facts;
  // Last: a slurmctld restarted lately shows each node without a slurmd
  // start time until the node registers again (a few seconds). Until then
  // it refuses a new step on it as busy, and srun waits for a wake-up that
  // only the end of another step of the job sends: minutes. One node at a
  // time, up to the first that has not registered (a job may hold
  // thousands).
  for (const auto& host : job.hosts) {
    const auto node = slurm_.load_node(host);
    if (node && node->slurmd_start_time == 0) {
      facts.unregistered = host;
      break;
    }
  }
  return facts;
}

std::string Engine::helper_name(std::uint32_t job_id) {
  return fmt::format("auto-resume-expand-{}", job_id);
}

void Engine::cancel_helpers(const StoredStep& step) {
  // The job's owner's only: the step was registered with its uid.
  for (const auto id : slurm_.live_jobs_named(helper_name(step.step.job_id), step.uid))
    slurm_.cancel_job(id);
}

void Engine::cancel_helpers_later(const StoredStep& step) {
  outbox_.post(fmt::format("cancel the helper jobs of job {}", step.step.job_id),
               [this, step] { cancel_helpers(step); });
}

}  // namespace ar
