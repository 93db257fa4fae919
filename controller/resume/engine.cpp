#include "resume/engine.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <set>

#include "autoresume/resume.hpp"
#include "log.hpp"
#include "nodes/probe.hpp"
#include "nodes/provider.hpp"

namespace ar {

namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::int64_t whole_seconds(milliseconds ms) { return (ms.count() + 999) / 1000; }

bool contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

std::vector<std::string> names(const proto::json& list, const char* field = nullptr) {
  std::vector<std::string> out;
  for (const auto& item : list) out.push_back(field ? item.at(field) : item);
  return out;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// A step's key in log lines and maps.
std::string key(const StoredStep& step) {
  return fmt::format("{}#{}", step.step.run_id, step.step.attempt);
}

// Thrown when a step was decided elsewhere (cancelled by its srun) while
// the engine worked on it: nothing to report.
struct DecidedMeanwhile {};

// How long a relaunch waits for the old step to leave the nodes. Its tasks
// are gone within a second of the SIGKILL; its record may stay for minutes
// when its first node died, which the relaunch's --overlap allows for.
constexpr seconds kOldStepGrace{5};
// How long a registered step may be missing from Slurm before it is over.
constexpr seconds kLostStepGrace{15};
// How long a helper allocation may stay pending before another node is chosen.
constexpr seconds kHelperPatience{30};

}  // namespace

Engine::Engine(Store& store, const DaemonConfig& config, NodeKeeper& keeper)
    : store_(store), config_(config), keeper_(keeper) {}

Engine::~Engine() { stop(); }

void Engine::start() {
  thread_ = std::thread([this] { run(); });
}

void Engine::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wakeup_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Engine::wake() {
  {
    std::lock_guard lock(mutex_);
    woken_ = true;
  }
  wakeup_.notify_all();
}

void Engine::run() {
  const auto period = std::min(config_.probe_interval, milliseconds{500});
  for (;;) {
    try {
      tick();
    } catch (const std::exception& e) {
      log::warn("resume engine: {}", e.what());
    }
    std::unique_lock lock(mutex_);
    wakeup_.wait_for(lock, period, [this] { return stopping_ || woken_; });
    if (stopping_) return;
    woken_ = false;
  }
}

void Engine::tick() {
  auto steps = store_.active_steps();
  NodeMap nodes;
  for (const auto& node : watcher_.load()) nodes[node.name] = &node;
  std::set<std::string> protected_nodes;
  for (const auto& step : steps) {
    for (const auto& host : step_hosts(step)) protected_nodes.insert(host);
    if (step.repair.contains("replacements"))
      for (const auto& host : step.repair["replacements"]) protected_nodes.insert(host);
  }
  try {
    keeper_.tick(nodes, protected_nodes);
  } catch (const std::exception& e) {
    log::warn("node keeper: {}", e.what());  // the protected steps come first
  }
  if (steps.empty()) {
    failed_probes_.clear();
    step_nodes_.clear();
    return;
  }
  if (config_.probe_failures > 0 && Clock::now() - last_probe_ >= config_.probe_interval) {
    last_probe_ = Clock::now();
    probe(steps, nodes);
  }
  for (auto& step : steps) {
    const auto k = key(step);
    try {
      advance(step, nodes);
      last_error_.erase(k);
    } catch (const DecidedMeanwhile&) {
      // Cancelled by its srun while this tick worked on it: a helper job
      // submitted meanwhile is not in the stored repair; find it by name.
      last_error_.erase(k);
      cancel_helpers(step.step.job_id);
    } catch (const std::exception& e) {
      // Retried at the next tick; said once while it persists.
      if (last_error_[k] != e.what()) {
        last_error_[k] = e.what();
        log::warn("step {} ({}): {}", k, step.phase.empty() ? step.state : step.phase, e.what());
        store_.add_event(step, {"error", e.what()});
      }
    }
  }
}

std::vector<std::string> Engine::step_hosts(const StoredStep& step) {
  // The step's own nodes (an `srun -N1` uses one node of the job), asked
  // once from slurmctld; the allocation's as registered until then.
  const auto k = key(step);
  auto it = step_nodes_.find(k);
  if (it == step_nodes_.end()) {
    try {
      if (const auto nodes = slurm::step_nodes(step.step.job_id, step.step.step_id))
        it = step_nodes_.emplace(k, slurm::expand_hostlist(*nodes)).first;
    } catch (const std::exception&) {
      // slurmctld is away: the registered list will do for now
    }
  }
  return it != step_nodes_.end() ? it->second : slurm::expand_hostlist(step.step.nodelist);
}

void Engine::probe(const std::vector<StoredStep>& steps, const NodeMap& nodes) {
  std::set<std::string> wanted;
  for (const auto& step : steps)
    if (step.state == step_state::kRegistered || step.state == step_state::kEnded)
      for (const auto& host : step_hosts(step)) wanted.insert(host);
  std::vector<std::string> probed;
  std::vector<ProbeTarget> targets;
  for (const auto& host : wanted) {
    const auto it = nodes.find(host);
    if (it == nodes.end() || it->second->address.empty() || it->second->port == 0) continue;
    probed.push_back(host);
    targets.push_back({it->second->address, it->second->port});
  }
  const auto answered = probe_all(targets, std::min(config_.probe_interval, milliseconds{1000}));
  std::map<std::string, unsigned> next;
  for (std::size_t i = 0; i < probed.size(); ++i)
    next[probed[i]] = answered[i] ? 0 : failed_probes_[probed[i]] + 1;
  failed_probes_ = std::move(next);
}

proto::json Engine::faults(const StoredStep& step, const slurm::JobInfo& job,
                           const NodeMap& nodes) {
  auto found = proto::json::array();
  for (const auto& host : step_hosts(step)) {
    NodeHealth health;
    const auto it = nodes.find(host);
    health.known = it != nodes.end();
    health.in_job = contains(job.hosts, host);
    std::int64_t instance = 0;
    if (health.known) {
      const auto& node = *it->second;
      health.down = node.down;
      health.fail = node.fail;
      health.not_responding = node.not_responding;
      health.reason = node.reason;
      instance = node.slurmd_start_time;
    }
    if (const auto probes = failed_probes_.find(host); probes != failed_probes_.end())
      health.failed_probes = probes->second;
    if (const auto why = node_fault(health, config_.probe_failures))
      found.push_back({{"node", host}, {"why", *why}, {"instance", instance}});
  }
  return found;
}

void Engine::advance(StoredStep& step, const NodeMap& nodes) {
  const auto job = slurm::load_job(step.step.job_id);
  if (job && job->suspended) return;  // preempted or suspended: look again later
  const bool repairing = step.state == step_state::kRepairing;
  if (!job || !job->running) {
    // The step cannot go on: Slurm requeued the job, or it ended.
    const auto id = step.step.job_id;
    if (job && job->pending && job->restart_count > 0)
      decide(step, "requeued",
             fmt::format("Slurm requeued job {}{}; it restarts from its batch script", id,
                         repairing ? " before the repair finished" : ""));
    else if (repairing)
      decide(step, "cancelled",
             fmt::format("job {} ended ({}) during the repair", id, job ? job->state : "gone"));
    else
      decide(step, "cancelled", fmt::format("job {} is {}", id, job ? job->state : "gone"));
    if (repairing) cancel_helpers(id);
    return;
  }
  if (repairing) {
    repair(step, *job, nodes);
    if (step.state == step_state::kDecided) cancel_helpers(step.step.job_id);
    return;
  }
  auto found = faults(step, *job, nodes);
  if (!found.empty()) {
    std::vector<std::string> what;
    for (const auto& f : found)
      what.push_back(
          fmt::format("{}: {}", f["node"].get<std::string>(), f["why"].get<std::string>()));
    step.state = step_state::kRepairing;
    step.phase = "detected";
    step.repair = {{"failed", std::move(found)}, {"started_at", unix_now()}};
    save(step, "detected",
         fmt::format("step {}.{} attempt {}: {}", step.step.job_id, step.step.step_id,
                     step.step.attempt, join(what)));
    repair(step, *job, nodes);
    return;
  }
  if (step.state == step_state::kRegistered) {
    // A step whose srun died without asking (kill -9) would block the next
    // protected step of the job: once Slurm has forgotten it for a while,
    // it is over.
    const auto k = key(step);
    if (slurm::step_exists(job->job_id, step.step.step_id)) {
      missing_since_.erase(k);
    } else if (const auto [it, first] = missing_since_.try_emplace(k, Clock::now());
               !first && Clock::now() - it->second > kLostStepGrace) {
      missing_since_.erase(it);
      decide(step, "cancelled",
             fmt::format("step {}.{} is gone and its srun never asked for a verdict",
                         step.step.job_id, step.step.step_id));
    }
    return;
  }
  if (step.state == step_state::kEnded &&
      (unix_now() - step.ended_at) * 1000 >= config_.end_window.count())
    decide(step, "no_fault", "no node of the step failed; srun keeps the step's own exit status");
}

void Engine::repair(StoredStep& step, const slurm::JobInfo& job, const NodeMap& nodes) {
  const auto started = step.repair.value("started_at", unix_now());
  // The backoff after the expansion is not part of the repair.
  if (step.phase != "expanded" && unix_now() - started > whole_seconds(config_.repair_timeout)) {
    decide(step, "give_up",
           fmt::format("the repair did not finish within repair_timeout={} s (it got to '{}')",
                       whole_seconds(config_.repair_timeout), step.phase));
    return;
  }
  if (step.phase == "detected") {
    const auto failed = names(step.repair["failed"], "node");
    const auto next = step.step.attempt + 1;
    // No relaunch, but the failed node still leaves the job (so that Slurm
    // does not kill it) and the step ends at once: the batch script goes on
    // with srun's give_up status.
    std::string give_up;
    if (next > config_.max_attempts)
      give_up = fmt::format("run {} was relaunched {} times already (max_attempts={})",
                            step.step.run_id, step.step.attempt, config_.max_attempts);
    else if (job.end_time > 0 && job.end_time - unix_now() < whole_seconds(config_.min_time_left))
      give_up = fmt::format("only {} s of job {}'s time limit are left (min_time_left={} s)",
                            std::max<std::int64_t>(0, job.end_time - unix_now()), job.job_id,
                            whole_seconds(config_.min_time_left));
    const bool batch_host_failed = job.batch && contains(failed, job.batch_host);
    if (!give_up.empty()) {
      // A GRES job's nodes cannot change, nor can a batch host leave its
      // job; the step still ends, so that srun does not wait for a dead node.
      if (job.has_gres || batch_host_failed) {
        slurm::kill_step(job.job_id, step.step.step_id);
        decide(step, "give_up", give_up);
      } else if (take_out(step, job))
        decide(step, "give_up", give_up + "; the failed node left the job");
      return;
    }
    if (job.has_gres || batch_host_failed) {
      const auto why =
          job.has_gres
              ? fmt::format("job {} holds GRES, which Slurm cannot move to other nodes", job.job_id)
              : fmt::format("the batch host {} failed", job.batch_host);
      if (!job.batch || !job.requeue) {
        slurm::kill_step(job.job_id, step.step.step_id);
        decide(step, "give_up",
               why + (job.batch ? "; the job was submitted with --no-requeue"
                                : "; a salloc job cannot be requeued"));
      } else {
        slurm::requeue(job.job_id);
        // DOWN, not FAIL: the requeued job would otherwise wait for the dead
        // node's epilog until Slurm itself gives up on the node.
        for (const auto& node : failed)
          if (contains(job.hosts, node))
            slurm::set_node_down(node, fmt::format("auto-resume: failed under job {}", job.job_id));
        decide(step, "requeued",
               why + fmt::format(": job {} was requeued and restarts from its batch script",
                                 job.job_id));
      }
      return;
    }
    if (!take_out(step, job)) return;
  }
  if (step.phase == "node_out" && !replace(step, job, nodes)) return;
  if (step.phase == "replaced" && !expand(step, job)) return;
  if (step.phase == "expanded") relaunch(step, job);
}

bool Engine::take_out(StoredStep& step, const slurm::JobInfo& job) {
  const auto failed = names(step.repair["failed"], "node");
  std::vector<std::string> keep;
  for (const auto& host : job.hosts)
    if (!contains(failed, host)) keep.push_back(host);
  if (keep.empty()) {
    decide(step, "give_up", fmt::format("every node of job {} failed", job.job_id));
    return false;
  }
  std::vector<std::string> notes;
  for (const auto& f : step.repair["failed"]) {
    const std::string node = f["node"];
    // A node a health check, a heartbeat or an admin marked keeps that
    // reason: the node keeper replaces it by that mark.
    if (f["why"].get<std::string>().starts_with(kCheckFailed)) continue;
    try {
      slurm::set_node_fail(
          node, fmt::format("auto-resume: {} (job {})", f["why"].get<std::string>(), job.job_id));
    } catch (const slurm::SlurmError& e) {
      notes.push_back(e.what());  // the node may be gone from slurm.conf: the shrink matters
    }
  }
  if (keep.size() != job.hosts.size())
    slurm::shrink_job(job.job_id, slurm::compress_hostlist(keep));
  slurm::kill_step(job.job_id, step.step.step_id);
  step.phase = "node_out";
  save(step, "node_out",
       fmt::format("{} set FAIL and out of job {} (now on {}); step {}.{} cancelled{}",
                   join(failed), job.job_id, slurm::compress_hostlist(keep), job.job_id,
                   step.step.step_id, notes.empty() ? "" : " (" + join(notes) + ")"));
  return true;
}

std::multimap<std::string, std::int64_t> Engine::failed_instances(std::uint32_t job_id) {
  std::multimap<std::string, std::int64_t> out;
  for (const auto& s : store_.job_steps(job_id))
    if (s.repair.contains("failed"))
      for (const auto& f : s.repair["failed"]) out.emplace(f["node"], f["instance"]);
  return out;
}

bool Engine::replace(StoredStep& step, const slurm::JobInfo& job, const NodeMap& nodes) {
  auto& repair = step.repair;
  if (!repair.contains("replacements")) repair["replacements"] = proto::json::array();
  if (!repair.contains("restarted")) repair["restarted"] = proto::json::object();
  const auto failed = repair["failed"];
  const auto banned = failed_instances(job.job_id);
  auto is_banned = [&](const slurm::NodeInfo& node) {
    const auto [first, last] = banned.equal_range(node.name);
    return std::any_of(first, last,
                       [&](const auto& entry) { return entry.second == node.slurmd_start_time; });
  };
  auto chosen = names(repair["replacements"]);
  const auto partition = slurm::partition_nodes(job.partition);
  while (chosen.size() < failed.size()) {
    // A spare of the job's partition (kept for this), else an idle node of
    // it; one that never failed this job.
    const slurm::NodeInfo* pick = nullptr;
    for (const bool spare : {true, false}) {
      for (const auto& [name, node] : nodes) {
        if (spare ? !NodeKeeper::is_spare(*node)
                  : (!node->idle || node->fail || node->drain || node->not_responding ||
                     node->completing))
          continue;
        if (contains(job.hosts, name) || contains(chosen, name) || is_banned(*node) ||
            !contains(partition, name))
          continue;
        pick = node;
        break;
      }
      if (pick == nullptr) continue;
      if (spare) {
        slurm::undrain_node(pick->name);
        save(step, "spare_taken",
             fmt::format("spare {} of partition {} taken for job {}", pick->name, job.partition,
                         job.job_id));
      }
      break;
    }
    if (pick == nullptr) break;
    chosen.push_back(pick->name);
    repair["replacements"].push_back(pick->name);
    save(step, "replaced",
         fmt::format("{} (instance {}) joins job {}", pick->name, pick->slurmd_start_time,
                     job.job_id));
  }
  if (chosen.size() >= failed.size()) {
    step.phase = "replaced";
    save(step, "replaced_all",
         fmt::format("replacements for job {}: {}", job.job_id, join(chosen)));
    return true;
  }
  // No idle node: the node keeper has the provider replace the failed
  // nodes, which then come back idle as new instances (chosen above at a
  // later tick). A replacement that failed for good ends the wait.
  for (const auto& f : failed) {
    const std::string node = f["node"];
    if (contains(chosen, node)) continue;
    if (const auto r = store_.node_repair(node); r && r->state == node_state::kFailed) {
      decide(step, "give_up",
             fmt::format("no node can replace {} (no idle node in partition {}, and the "
                         "provider failed: {})",
                         node, job.partition, r->detail));
      return false;
    }
  }
  return false;
}

bool Engine::expand(StoredStep& step, const slurm::JobInfo& job) {
  auto& repair = step.repair;
  if (!repair.contains("helpers")) repair["helpers"] = proto::json::object();
  if (!repair.contains("merged")) repair["merged"] = proto::json::array();
  const auto name = helper_name(job.job_id);
  for (const auto& node : names(repair["replacements"])) {
    if (contains(names(repair["merged"]), node)) continue;
    if (contains(job.hosts, node)) {  // merged before a restart of the controller
      repair["merged"].push_back(node);
      continue;
    }
    if (!repair["helpers"].contains(node)) {
      // A helper submitted before a restart of the controller but not recorded.
      for (const auto id : slurm::live_jobs_named(name)) slurm::cancel_job(id);
      std::uint32_t id = 0;
      try {
        id = slurm::submit_expand_helper(job, node, name);
      } catch (const slurm::SlurmError& e) {
        auto& chosen = repair["replacements"];
        chosen.erase(std::remove(chosen.begin(), chosen.end(), node), chosen.end());
        step.phase = "node_out";
        save(step, "expand_retry", fmt::format("{}: choosing another node", e.what()));
        return false;
      }
      repair["helpers"][node] = id;
      save(step, "expand_helper",
           fmt::format("helper job {} allocates {} for job {}", id, node, job.job_id));
    }
    const std::uint32_t helper = repair["helpers"][node];
    const auto info = slurm::load_job(helper);
    if (info && info->pending) {
      // The node went elsewhere or does not fit: choose again.
      const auto since = repair.value("helper_since_" + node, unix_now());
      repair["helper_since_" + node] = since;
      if (unix_now() - since < kHelperPatience.count()) return false;
      slurm::cancel_job(helper);
      repair["helpers"].erase(node);
      repair.erase("helper_since_" + node);
      auto& chosen = repair["replacements"];
      chosen.erase(std::remove(chosen.begin(), chosen.end(), node), chosen.end());
      step.phase = "node_out";
      save(step, "expand_retry",
           fmt::format("helper job {} waited {} s for {} ({}): choosing another node", helper,
                       unix_now() - since, node, info->reason));
      return false;
    }
    if (!info || !info->running) {
      repair["helpers"].erase(node);  // ended without merging: try again
      save(step, "expand_retry",
           fmt::format("helper job {} for {} ended ({}) before the merge", helper, node,
                       info ? info->state : "gone"));
      return false;
    }
    slurm::merge_expand_helper(helper, job.job_id);
    repair["merged"].push_back(node);
    save(step, "merged",
         fmt::format("{} merged into job {} (helper job {})", node, job.job_id, helper));
  }
  const auto now = slurm::load_job(job.job_id);
  step.phase = "expanded";
  step.repair["expanded_at"] = unix_now();
  save(step, "expanded",
       fmt::format("job {} is on {} again", job.job_id, now ? now->nodes : std::string("?")));
  return true;
}

void Engine::relaunch(StoredStep& step, const slurm::JobInfo& before) {
  // The job as it is now, after the expansion.
  const auto now = slurm::load_job(before.job_id);
  if (!now || !now->running) return;  // the next tick decides what happened
  const auto& job = *now;
  const auto expanded_at = step.repair.value("expanded_at", unix_now());
  const auto waited = unix_now() - expanded_at;
  if (waited < kOldStepGrace.count() && slurm::step_exists(job.job_id, step.step.step_id)) return;
  const auto next = step.step.attempt + 1;
  const auto delay = relaunch_backoff(next, std::chrono::duration_cast<seconds>(config_.backoff),
                                      DaemonConfig::kMaxBackoff);
  if (waited < delay.count()) return;
  step.repair["relaunch"] = {{"nodelist", job.nodes}, {"num_nodes", job.hosts.size()}};
  decide(
      step, "relaunch",
      fmt::format("relaunching run {} as attempt {} on {}{}", step.step.run_id, next, job.nodes,
                  delay.count() > 0 ? fmt::format(" after a backoff of {} s", delay.count()) : ""));
}

std::string Engine::helper_name(std::uint32_t job_id) {
  return fmt::format("auto-resume-expand-{}", job_id);
}

void Engine::cancel_helpers(std::uint32_t job_id) {
  try {
    for (const auto id : slurm::live_jobs_named(helper_name(job_id))) slurm::cancel_job(id);
  } catch (const std::exception& e) {
    log::warn("cannot cancel the helper jobs of job {}: {}", job_id, e.what());
  }
}

void Engine::decide(StoredStep& step, const char* verdict, const std::string& message) {
  step.state = step_state::kDecided;
  step.verdict = verdict;
  step.message = message;
  save(step, verdict, message);
  log::info("step {}: {}: {}", key(step), verdict, message);
}

void Engine::save(StoredStep& step, const std::string& kind, const std::string& detail) {
  if (!store_.save(step, EventSpec{kind, detail})) throw DecidedMeanwhile{};
}

}  // namespace ar
