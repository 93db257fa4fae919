#include "resume/engine.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <set>
#include <utility>

#include "autoresume/resume.hpp"
#include "autoresume/text.hpp"
#include "log.hpp"
#include "resume/deadline.hpp"
#include "resume/detail.hpp"
#include "slurm_adapter.hpp"  // hostlists

namespace ar {

using namespace resume_detail;  // NOLINT: the engine's own helpers

Engine::Engine(Store& store, const DaemonConfig& config, NodeKeeper& keeper, slurm::SlurmApi& slurm,
               const Clock& clock, Prober& prober, StepReports& reports, Verdicts& verdicts,
               Provisioner* provisioner, std::function<void(double seconds)> on_look)
    : on_look_(std::move(on_look)),
      store_(store),
      config_(config),
      keeper_(keeper),
      reports_(reports),
      verdicts_(verdicts),
      provisioner_(provisioner),
      slurm_(slurm),
      clock_(clock),
      prober_(prober) {}

Engine::~Engine() { stop(); }

void Engine::start() {
  start_calls();
  thread_ = std::thread([this] { run(); });
}

void Engine::start_calls(std::chrono::milliseconds read_wait) {
  outbox_.start();
  start_submits();
  start_writes();
  start_probes();
  start_reads(read_wait);
  keeper_.start_calls();
  if (provisioner_ != nullptr) provisioner_->start_calls();
}

void Engine::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wakeup_.notify_all();
  if (thread_.joinable()) thread_.join();
  outbox_.stop();
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
    const auto began = std::chrono::steady_clock::now();
    try {
      tick();
    } catch (const std::exception& e) {
      log::warn("resume engine: {}", e.what());
    }
    // How long a look takes (the metrics' auto_resume_look_seconds): what
    // a fault found meanwhile waits at most, beside the period.
    if (on_look_)
      on_look_(std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
    std::unique_lock lock(mutex_);
    wakeup_.wait_for(lock, period, [this] { return stopping_ || woken_; });
    if (stopping_) return;
    woken_ = false;
  }
}

void Engine::prune() {
  if (last_prune_ != Steady::time_point{} && clock_.now() - last_prune_ < kPruneEvery) return;
  last_prune_ = clock_.now();
  const auto cutoff = clock_.unix_now() - whole_seconds(config_.retention);
  if (const auto gone = store_.prune(cutoff); gone > 0)
    log::info("forgot {} decided steps and events older than retention={} s", gone,
              whole_seconds(config_.retention));
}

void Engine::tick() {
  try {
    prune();
  } catch (const std::exception& e) {
    log::warn("cannot prune the store: {}", e.what());
  }
  auto steps = store_.active_steps();
  // Before anything that may fail: a repair ends within repair_timeout
  // whether or not slurmctld answers.
  std::erase_if(steps, [this](StoredStep& step) {
    try {
      return overdue(step);
    } catch (const std::exception& e) {
      log::warn("step {}: past its deadline: {}", step.key(), e.what());
      return false;
    }
  });
  // slurmctld away: the last list goes on (the heartbeat watch and the
  // probes keep their deadlines); nothing can be done in Slurm meanwhile.
  if (read_nodes(steps) == nullptr) return;  // no first list yet
  const auto view = view_;                   // this look's, kept while it runs
  NodeMap nodes;
  for (const auto& node : view->nodes) nodes[node.name] = &node;
  std::set<std::string> protected_nodes;
  std::set<std::string> active;
  claimed_.clear();
  for (const auto& step : steps) {
    active.insert(step.key());
    for (const auto& host : step_hosts(step)) protected_nodes.insert(host);
    for (const auto& host : step.repair.replacements) {
      protected_nodes.insert(host);
      if (step.state == StepState::repairing) claimed_.emplace(host, step.key());
    }
  }
  std::erase_if(job_hosts_, [&](const auto& entry) { return !active.contains(entry.first); });
  std::erase_if(missing_since_, [&](const auto& entry) { return !active.contains(entry.first); });
  try {
    keeper_.tick(nodes, protected_nodes, slurm_slow_, view_started_);
  } catch (const std::exception& e) {
    log::warn("node keeper: {}", e.what());  // the protected steps come first
  }
  // Steps given up at their deadline (by a look, or by the server
  // answering srun): the job is told, and what is left of a repair is
  // cancelled once slurmctld answers.
  for (auto& given_up : verdicts_.take_given_up()) {
    tell_job(given_up.step);
    if (given_up.repairing) leftovers_.insert_or_assign(given_up.step.key(), given_up.step);
  }
  if (!slurm_slow_) clear_leftovers();
  if (provisioner_ != nullptr && !slurm_slow_) {
    try {
      // No slurmctld restart for the include file while a step is repaired
      // or a node replaced.
      const bool repairing =
          keeper_.replacing() || std::ranges::any_of(steps, [](const auto& step) {
            return step.phase != RepairPhase::none;
          });
      provisioner_->tick(nodes, repairing, view_started_);
    } catch (const std::exception& e) {
      log::warn("provisioning: {}", e.what());
    }
  }
  if (steps.empty()) {
    drop_unwanted_calls(steps);
    if (probes_.take(kProbes)) log::info("probes: a round no longer wanted (no protected step)");
    for (const auto& [host, count] : failed_probes_) keeper_.forget_peers(host);
    failed_probes_.clear();
    suspects_.clear();
    suspect_crowd_ = suspect_crowd_said_ = false;
    step_nodes_.clear();
    job_hosts_.clear();
    deferred_.clear();
    watched_.clear();
    said_old_step_.clear();
    said_unregistered_.clear();
    said_abort_wait_.clear();
    hang_samples_.clear();
    failure_checks_.clear();
    return;
  }
  std::erase_if(failure_checks_, [&](const auto& entry) { return !active.contains(entry.first); });
  std::erase_if(hang_samples_, [&](const auto& entry) {
    return std::ranges::none_of(steps,
                                [&](const StoredStep& s) { return s.step.run_id == entry.first; });
  });
  if (config_.probe_failures > 0) {
    take_probes();  // a round that came in since the last look
    if (!probes_.has(kProbes) && clock_.now() - last_probe_ >= config_.probe_interval) {
      last_probe_ = clock_.now();
      probe(steps, nodes);
      take_probes();  // at once where calls run on the caller's thread (tests)
    }
  }
  watched_ = protected_nodes;
  for (const auto& [k, hosts] : job_hosts_) watched_.insert(hosts.begin(), hosts.end());
  weigh_suspicion(watched_, nodes);
  // What a step needs next is asked of slurmctld or changed in it: it
  // waits until slurmctld answers, with what the probes counted meanwhile.
  if (slurm_slow_) return;
  // Each step is advanced on this look's read. A step whose job another
  // step changed in this look (its repair moved on) waits for the next
  // look (at once) and goes first there, unless it waited at the last
  // one; a step the read does not cover (registered since it began) waits
  // for the next read. None waits on slurmctld.
  std::ranges::stable_partition(steps,
                                [&](const StoredStep& s) { return deferred_.contains(s.key()); });
  std::set<std::string> deferred;
  std::set<std::uint32_t> changed_jobs;
  bool wait_for_change = false;
  for (auto& step : steps) {
    const auto k = step.key();
    if (changed_jobs.contains(step.step.job_id) && !deferred_.contains(k)) {
      deferred.insert(k);
      wait_for_change = true;
      continue;
    }
    const auto phase = step.phase;
    const auto state = step.state;
    const auto facts = step.repair;
    try {
      advance(step, nodes);
      last_error_.erase(k);
      if (step.phase != phase || step.state != state || !(step.repair == facts))
        changed_jobs.insert(step.step.job_id);
    } catch (const NotRead&) {
      deferred.insert(k);
    } catch (const DecidedMeanwhile&) {
      // Cancelled by its srun while this tick worked on it: a helper job
      // submitted meanwhile is not in the stored repair; find it by name.
      last_error_.erase(k);
      cancel_helpers_later(step);
    } catch (const std::exception& e) {
      // Retried at the next tick; said once while it persists.
      const bool gone = dynamic_cast<const slurm::SlurmUnreachable*>(&e) != nullptr;
      if (last_error_[k] != e.what()) {
        last_error_[k] = e.what();
        log::warn("step {} ({}): {}{}", k,
                  step.phase == RepairPhase::none ? name_of(step.state) : name_of(step.phase),
                  e.what(), gone ? "; the other steps wait for slurmctld" : "");
        try {
          store_.add_event(step, {EventKind::error, e.what()});
        } catch (const std::exception&) {
          // the store's own trouble (its disk full): the line above says it
        }
      }
      // slurmctld went away during this look (a call waited MessageTimeout
      // for nothing): the other steps would wait the same. They go on at
      // the first look whose read slurmctld answers.
      if (gone) break;
    }
  }
  deferred_ = std::move(deferred);
  changed_ = !changed_jobs.empty();
  // The next look at once, with a read after this one's changes.
  if (wait_for_change) wake();
  drop_unwanted_calls(steps);
}

void Engine::start_read(const std::vector<StoredStep>& steps) {
  if (reads_.has(kRead)) return;
  std::map<uid_t, std::set<std::uint32_t>> jobs;  // by owner: read together
  std::set<std::pair<std::uint32_t, std::uint32_t>> listed;
  std::map<std::string, std::pair<std::uint32_t, std::uint32_t>> unknown_nodes;
  for (const auto& step : steps) {
    jobs[step.uid].insert(step.step.job_id);
    // A repair asks whether its old step is listed itself (checks_).
    if (step.state != StepState::repairing) listed.emplace(step.step.job_id, step.step.step_id);
    if (!step_nodes_.contains(step.key()))
      unknown_nodes.emplace(step.key(), std::pair{step.step.job_id, step.step.step_id});
  }
  read_started_ = clock_.now();
  reads_.run(kRead, [this, jobs = std::move(jobs), listed = std::move(listed),
                     unknown_nodes = std::move(unknown_nodes)] {
    auto view = std::make_shared<SlurmView>();
    view->nodes = slurm_.load_nodes();
    // Many steps cost a call or two, not one per step (SlurmApi::load_jobs).
    for (const auto& [owner, ids] : jobs) {
      auto found = slurm_.load_jobs(ids, owner);
      for (const auto id : ids) {
        const auto it = found.find(id);
        view->jobs.emplace(id,
                           it == found.end() ? std::nullopt : std::optional(std::move(it->second)));
      }
    }
    view->listed_steps = slurm_.listed_steps(listed);
    // Asked once (LibSlurm keeps it); Slurm's default if slurmctld refuses.
    try {
      view->message_timeout = slurm_.message_timeout();
    } catch (const slurm::SlurmUnreachable&) {
      throw;
    } catch (const std::exception&) {
      view->message_timeout = kDefaultMessageTimeout;
    }
    view->asked_steps = std::move(listed);
    // A step's nodes refused are asked again at the next read; the rest
    // of the read stands.
    for (const auto& [key, id] : unknown_nodes) {
      try {
        view->step_nodes.emplace(key, slurm_.step_nodes(id.first, id.second));
      } catch (const slurm::SlurmUnreachable&) {
        throw;
      } catch (const std::exception&) {
      }
    }
    return std::shared_ptr<const SlurmView>(std::move(view));
  });
}

std::optional<slurm::JobInfo> Engine::job_of(std::uint32_t job_id) const {
  if (view_)
    if (const auto it = view_->jobs.find(job_id); it != view_->jobs.end()) return it->second;
  throw NotRead{};
}

bool Engine::step_listed(std::uint32_t job_id, std::uint32_t step_id) const {
  const std::pair key{job_id, step_id};
  if (!view_ || !view_->asked_steps.contains(key)) throw NotRead{};
  return view_->listed_steps.contains(key);
}

const std::vector<slurm::NodeInfo>* Engine::read_nodes(const std::vector<StoredStep>& steps) {
  static constexpr const char* kMeanwhile =
      "the heartbeat watch and the probes go on with the last list; nothing is asked of "
      "slurmctld or changed in it until it answers";
  // Nothing under way and the last read recent: this look goes on with it.
  if (!reads_.has(kRead) && !read_due(steps)) return &view_->nodes;
  // A read of this look's own, unless the last one is still under way
  // (then it is waited for instead): what the look decides on is fresher
  // than anything it was woken for.
  start_read(steps);
  if (reads_.ready_within(kRead, read_wait_)) {
    auto read = reads_.take(kRead);
    try {
      view_ = read->get();
      view_started_ = read_started_;
      if (slurm_away_)
        said_slurm(EventKind::slurm_back,
                   fmt::format("slurmctld answers again after {} s: the node list is fresh",
                               std::chrono::duration_cast<std::chrono::seconds>(clock_.now() -
                                                                                slurm_away_since_)
                                   .count()));
      slurm_away_ = slurm_slow_ = false;
    } catch (const std::exception& e) {
      if (!view_) throw;
      if (!slurm_away_) {
        slurm_away_since_ = read_started_;
        said_slurm(
            EventKind::slurm_slow,
            fmt::format("cannot load the nodes from slurmctld ({}): {}", e.what(), kMeanwhile));
      }
      slurm_away_ = slurm_slow_ = true;
    }
  } else {
    // Not in yet: this look asks slurmctld nothing (each call would wait
    // as long); said once it has waited kSlowRead.
    slurm_slow_ = true;
    if (const auto waited = clock_.now() - read_started_;
        !slurm_away_ && view_ && waited >= kSlowRead) {
      slurm_away_since_ = read_started_;
      said_slurm(EventKind::slurm_slow,
                 fmt::format("slurmctld has not answered for the node list in {} s: {}",
                             std::chrono::duration_cast<std::chrono::seconds>(waited).count(),
                             kMeanwhile));
      slurm_away_ = true;
    }
  }
  return view_ ? &view_->nodes : nullptr;
}

void Engine::said_slurm(EventKind kind, const std::string& detail) {
  if (kind == EventKind::slurm_slow)
    log::warn("{}", detail);
  else
    log::info("{}", detail);
  try {
    store_.add_node_event("", {kind, detail});
  } catch (const std::exception& e) {
    log::warn("{} (not stored: {})", detail, e.what());
  }
}

bool Engine::read_due(const std::vector<StoredStep>& steps) {
  const bool was_busy = std::exchange(busy_last_, busy(steps));
  return !view_ || slurm_slow_ || busy_last_ || was_busy || std::exchange(changed_, false) ||
         clock_.now() - view_started_ >= config_.slurm_read_interval;
}

bool Engine::busy(const std::vector<StoredStep>& steps) const {
  if (!view_ || !deferred_.empty() || !missing_since_.empty() || !leftovers_.empty() ||
      !failure_checks_.empty())
    return true;
  // A suspect is kept past its node's FAIL (a verdict says it was
  // suspected); one no longer under a protected step is not at stake.
  if (std::ranges::any_of(suspects_,
                          [&](const auto& entry) { return watched_.contains(entry.first); }))
    return true;
  if (std::ranges::any_of(failed_probes_, [](const auto& entry) { return entry.second > 0; }))
    return true;
  if (submits_.size() + writes_.size() + merges_.size() + checks_.size() + places_.size() +
          cleanups_.size() >
      0)
    return true;
  if (keeper_.busy() || (provisioner_ != nullptr && provisioner_->busy())) return true;
  return std::ranges::any_of(steps, [&](const StoredStep& step) {
    return step.state != StepState::registered || step.phase != RepairPhase::none ||
           !view_->jobs.contains(step.step.job_id);
  });
}

std::vector<std::string> Engine::step_hosts(const StoredStep& step) {
  // The step's own nodes (an `srun -N1` uses one node of the job), asked
  // once from slurmctld; the allocation's as registered until then.
  const auto k = step.key();
  auto it = step_nodes_.find(k);
  if (it == step_nodes_.end() && view_) {
    // From the look's read; until one has them, the registered list does.
    if (const auto read = view_->step_nodes.find(k);
        read != view_->step_nodes.end() && read->second)
      it = step_nodes_.emplace(k, slurm::expand_hostlist(*read->second)).first;
  }
  return it != step_nodes_.end() ? it->second : slurm::expand_hostlist(step.step.nodelist);
}

void Engine::probe(const std::vector<StoredStep>& steps, const NodeMap& nodes) {
  // Each node of every step not decided, during a repair as well (a second
  // node may die meanwhile) with the replacements chosen for it, and the
  // hosts of the (first) step it runs (their agents are asked first to
  // cross-check it): one list per step, not one copy per node.
  auto round = std::make_shared<ProbeRound>();
  round->lists.reserve(steps.size());  // the map below points into it
  for (const auto& step : steps) {
    auto& hosts = round->lists.emplace_back(step_hosts(step));
    // The job's other nodes (faults() looks at them while the step runs),
    // as the last look at the job saw them.
    if (const auto it = job_hosts_.find(step.key());
        step.state == StepState::registered && it != job_hosts_.end())
      for (const auto& host : it->second)
        if (!contains(hosts, host)) hosts.push_back(host);
    for (const auto& host : step.repair.replacements) hosts.push_back(host);
    for (const auto& host : hosts) round->wanted.emplace(host, &hosts);
  }
  for (const auto& [host, near] : round->wanted) {
    const auto it = nodes.find(host);
    if (it == nodes.end() || it->second->address.empty() || it->second->port == 0) continue;
    round->probed.push_back(host);
    round->targets.push_back({it->second->address, it->second->port});
  }
  // On a thread of its own: taken by a later look (take_probes).
  probes_.run(kProbes, [this, round, timeout = probe_timeout()] {
    round->started = clock_.now();
    round->results = prober_.probe(round->targets, timeout, ProbeDepth::connect);
    round->ended = clock_.now();
    return round;
  });
}

void Engine::take_probes() {
  auto outcome = probes_.take(kProbes);
  if (!outcome) return;
  std::shared_ptr<ProbeRound> round;
  try {
    round = outcome->get();
  } catch (const std::exception& e) {
    log::warn("probes: a round failed: {}", e.what());
    return;
  }
  // The controller stood still between rounds, or in this one (starved):
  // its timeouts say nothing about the nodes.
  const auto gap = round->started - last_round_;
  last_round_ = round->ended;
  if (round->ended - round->started > 2 * probe_timeout() + seconds{1}) {
    log::warn("probes: a round took {} ms: not counted (the controller is starved)",
              std::chrono::duration_cast<milliseconds>(round->ended - round->started).count());
    std::ranges::fill(round->results, ProbeResult::unknown);
  } else if (gap > std::max<Steady::duration>(3 * config_.probe_interval, seconds{5})) {
    failed_probes_.clear();
  }
  count_probes(round->probed, round->targets, round->results, round->wanted);
}

void Engine::count_probes(const std::vector<std::string>& probed,
                          const std::vector<ProbeTarget>& targets,
                          const std::vector<ProbeResult>& results,
                          const std::map<std::string, const std::vector<std::string>*>& wanted) {
  std::size_t silent = 0;
  std::size_t heard = 0;  // answered or silent: unknown is no word about a node
  for (const auto result : results) {
    heard += result != ProbeResult::unknown ? 1 : 0;
    silent += result == ProbeResult::silent ? 1 : 0;
  }
  probe_crowd_ = silent_crowd(silent, heard, config_.probe_max_silent_percent);
  if (probe_crowd_ && !crowd_said_) {
    const auto detail = fmt::format(
        "{} of the {} nodes probed under protected steps are silent at once (more than "
        "probe_max_silent_percent={}): the controller's own network is the likelier fault; no "
        "node is taken for the probes until fewer are silent (Slurm's own node states still "
        "count)",
        silent, heard, config_.probe_max_silent_percent);
    log::warn("probes: {}", detail);
    store_.add_node_event("", {EventKind::probe_crowd, detail});
  }
  crowd_said_ = probe_crowd_;
  // One lookup a node: a round probes every node under a protected step.
  std::map<std::string, unsigned> next;
  std::vector<unsigned> counts(probed.size(), 0);
  for (std::size_t i = 0; i < probed.size(); ++i) {
    const auto& host = probed[i];
    const auto found = failed_probes_.find(host);
    const auto before = found != failed_probes_.end() ? found->second : 0U;
    counts[i] = results[i] == ProbeResult::answered                  ? 0
                : results[i] == ProbeResult::silent && !probe_crowd_ ? before + 1
                                                                     : before;
    next.emplace_hint(next.end(), host, counts[i]);  // `probed` is in order
  }
  // A node whose silence ended: its cross-checks and what was said go.
  for (const auto& [host, count] : failed_probes_) {
    if (count == 0) continue;
    const auto now = next.find(host);
    if (now == next.end() || now->second == 0) {
      keeper_.forget_peers(host);
      disputed_said_.forget(host);
    }
  }
  failed_probes_ = std::move(next);
  for (std::size_t i = 0; i < probed.size(); ++i)
    if (counts[i] != 0)
      keeper_.ask_peers(probed[i], {targets[i], *wanted.at(probed[i]), ProbeDepth::connect});
}

std::optional<std::string> Engine::probe_fault(const std::string& host, unsigned count) {
  if (probe_crowd_) return std::nullopt;
  const auto check = keeper_.cross_checked(host);
  const auto silent = fmt::format("its slurmd did not answer {} probes in a row", count);
  switch (check.view) {
    case NodeKeeper::PeerView::pending:
      return std::nullopt;
    case NodeKeeper::PeerView::disputed:
      if (disputed_said_.say(host)) {
        const auto detail = fmt::format(
            "{} does not answer the controller's probes, but {}: not taken (the controller's "
            "route to it is the likelier fault; Slurm's own node state still counts)",
            host, check.detail);
        log::warn("probes: {}", detail);
        store_.add_node_event(host, {EventKind::probe_disputed, detail});
      }
      return std::nullopt;
    case NodeKeeper::PeerView::confirmed:
      return fmt::format("{}, and {}", silent, check.detail);
    case NodeKeeper::PeerView::none:
      break;
  }
  return fmt::format("{} ({})", silent, check.detail);
}

unsigned Engine::silent_probes(const std::string& host) const {
  const auto it = failed_probes_.find(host);
  return config_.probe_failures > 0 && it != failed_probes_.end() &&
                 it->second >= config_.probe_failures
             ? it->second
             : 0;
}

bool Engine::missed_probe(const std::string& host) const {
  const auto it = failed_probes_.find(host);
  return it != failed_probes_.end() && it->second > 0;
}

NodeHealth Engine::health_of(const std::string& host, bool in_job, const NodeMap& nodes,
                             std::int64_t& instance) {
  NodeHealth health;
  const auto it = nodes.find(host);
  health.known = it != nodes.end();
  health.in_job = in_job;
  instance = 0;
  if (health.known) {
    const auto& node = *it->second;
    health.down = node.down;
    health.fail = node.fail;
    health.not_responding = node.not_responding;
    health.reason = node.reason;
    instance = node.slurmd_start_time;
  }
  return health;
}

void Engine::weigh_suspicion(const std::set<std::string>& watched, const NodeMap& nodes) {
  std::vector<std::string> named;  // the suspected
  for (const auto& host : watched) {
    const auto it = nodes.find(host);
    const bool flagged = it != nodes.end() && it->second->not_responding;
    const bool worse = it != nodes.end() && (it->second->down || it->second->fail);
    const bool silent = silent_probes(host) > 0;
    if ((flagged || silent) && !worse) named.push_back(host);
    // The episode ends once the node is well again (not once Slurm takes
    // it: a verdict Slurm brings about then says it had been suspected).
    if (!flagged && !silent && !worse && !missed_probe(host) && suspects_.erase(host) > 0) {
      const auto detail = fmt::format("{}: its slurmd answers again: no longer suspected", host);
      log::info("evidence: {}", detail);
      store_.add_node_event(host, {EventKind::suspect_cleared, detail});
    }
  }
  suspect_crowd_ = silent_crowd(named.size(), watched.size(), config_.probe_max_silent_percent);
  if (suspect_crowd_ && !suspect_crowd_said_) {
    const auto detail = fmt::format(
        "{} of the {} nodes under protected steps are suspected at once ({}: Slurm's not "
        "responding or the probes' silence; more than probe_max_silent_percent={}): a network or "
        "slurmctld event is the likelier cause; none is taken on suspicion alone until fewer are "
        "(Slurm's DOWN and health checks' marks still count)",
        named.size(), watched.size(), join(named, ","), config_.probe_max_silent_percent);
    log::warn("evidence: {}", detail);
    store_.add_node_event("", {EventKind::suspect_crowd, detail});
  }
  suspect_crowd_said_ = suspect_crowd_;
}

void Engine::suspect(const std::string& host, const std::string& why) {
  if (!suspects_.emplace(host, why).second) return;
  const auto detail = fmt::format("{}: {}", host, why);
  log::info("evidence: {}", detail);
  store_.add_node_event(host, {EventKind::suspected, detail});
}

std::string Engine::suspects_note(const StoredStep& step) {
  std::vector<std::string> said;
  for (const auto& host : step_hosts(step))
    if (const auto it = suspects_.find(host); it != suspects_.end())
      said.push_back(fmt::format("{}: {}", host, it->second));
  if (said.empty()) return "";
  return fmt::format(" (Slurm's own doing: the controller had not taken {})", join(said, "; "));
}

std::optional<std::string> Engine::fault_of(const std::string& host, NodeHealth health) {
  if (const auto count = silent_probes(host); count > 0)
    if (auto why = probe_fault(host, count)) health.probes_silent = std::move(*why);
  const auto life = keeper_.life_of(host);
  health.agent = life.view;
  health.agent_age = life.age;
  health.crowd = suspect_crowd_;
  auto look = look_at(health);
  if (look.suspect) suspect(host, *look.suspect);
  return std::move(look.fault);
}

std::vector<FailedNode> Engine::faults(const StoredStep& step, const slurm::JobInfo& job,
                                       const NodeMap& nodes, std::vector<std::string>& released) {
  std::vector<FailedNode> found;
  const auto hosts = step_hosts(step);
  for (const auto& host : hosts) {
    std::int64_t instance = 0;
    const auto health = health_of(host, contains(job.hosts, host), nodes, instance);
    if (const auto why = fault_of(host, health))
      found.push_back({host, *why, instance});
    else if (health.known && !health.in_job && instance != 0 && !missed_probe(host) &&
             !suspects_.contains(host))
      released.push_back(host);
    // Neither yet: a node that left the job but has not registered with
    // slurmctld (restarted lately, from a state saved before the node
    // joined the job: Slurm has not heard from it, dead or alive) or did
    // not answer its last probe is looked at again at the next tick.
  }
  // While the step runs, the job's other nodes too (spares it holds; an
  // unprotected step of the job may run there): Slurm kills or requeues a
  // job when any of its nodes goes DOWN. Not its batch host, which cannot
  // leave the job.
  if (step.state != StepState::registered) return found;
  for (const auto& host : job.hosts) {
    if (contains(hosts, host) || (job.batch && host == job.batch_host)) continue;
    std::int64_t instance = 0;
    if (const auto why = fault_of(host, health_of(host, true, nodes, instance)))
      found.push_back({host, *why, instance});
  }
  return found;
}

std::optional<std::string> Engine::lost_repair(const StoredStep& step, const slurm::JobInfo& job,
                                               const std::vector<std::string>& released) {
  for (const auto& earlier : store_.job_steps(step.step.job_id)) {
    if (earlier.step.run_id != step.step.run_id || earlier.step.attempt >= step.step.attempt)
      continue;
    const auto& repair = earlier.repair;
    std::vector<std::string> lost;
    std::vector<std::string> back;
    for (const auto& host : released)
      if (contains(repair.merged, host)) lost.push_back(host);
    if (lost.empty()) continue;
    for (const auto& host : repair.failed_nodes())
      if (contains(job.hosts, host) && !contains(repair.replacements, host)) back.push_back(host);
    // The job as slurmctld saved it before the merge (or before the whole
    // repair): a node taken out is back, or the step that ran on the
    // merged node is unknown to it. A shrink by hand leaves the step.
    std::string sign;
    if (!back.empty())
      sign = fmt::format("with {} in it again", join(back, ", "));
    else if (!step_listed(step.step.job_id, step.step.step_id))
      sign =
          fmt::format("and step {}.{} unknown to slurmctld", step.step.job_id, step.step.step_id);
    else
      continue;
    return fmt::format(
        "out of job {}, {}: slurmctld restarted from a state saved before attempt {}'s repair, "
        "which merged {}",
        job.job_id, sign, earlier.step.attempt, join(lost, ", "));
  }
  return std::nullopt;
}

void Engine::drop_spares(StoredStep& step, const slurm::JobInfo& job,
                         const std::vector<FailedNode>& failed) {
  const auto nodes = failed_nodes(failed);
  std::vector<std::string> keep;
  for (const auto& host : job.hosts)
    if (!contains(nodes, host)) keep.push_back(host);
  if (keep.empty()) return;  // no node of the step left in the job: Slurm ends it
  // On a thread of their own: the look goes on, and this step waits for
  // them (advance) before anything else is looked at.
  const auto out = written(step, kSparesOut, [this, failed, job, keep] {
    NodeOut did;
    did.failed = failed;
    did.kept = slurm::compress_hostlist(keep);
    mark_failed(failed, job, did.notes);
    slurm_.shrink_job(job.job_id, did.kept);
    did.downed = down_released(failed, job, did.notes);
    return did;
  });
  if (!out) return;
  const auto done = failed_nodes(out->failed);
  std::vector<std::string> what;
  for (const auto& f : out->failed) what.push_back(fmt::format("{}: {}", f.node, f.why));
  keeper_.gate().settled(Gate::Counted::mark, done);  // the step runs on: a repair done
  save(step, EventKind::node_out,
       fmt::format("{} of job {}, which the protected step does not run on, failed ({}): out of "
                   "the job (now on {}) before Slurm sees it DOWN{}; step {}.{} runs on{}",
                   join(done, ", "), job.job_id, join(what, ", "), out->kept,
                   out->downed.empty() ? "" : "; set DOWN once out of it", step.step.job_id,
                   step.step.step_id, notes_text(out->notes)));
}

bool Engine::overdue(StoredStep& step) {
  // The rest (AdminComment, what is left of a repair) at the next look,
  // as for one the server gave up.
  const bool due = verdicts_.overdue(step) != Verdicts::Overdue::not_due;
  if (due) wake();
  return due;
}

void Engine::clear_leftovers() {
  for (auto it = leftovers_.begin(); it != leftovers_.end();) {
    const auto& [k, step] = *it;
    // On a thread of their own; taken at a later look.
    if (!cleanups_.has(k))
      cleanups_.run(k, [this, step] {
        slurm_.kill_step(step.step.job_id, step.step.step_id);
        cancel_helpers(step);
        return true;
      });
    auto outcome = cleanups_.take(k);
    if (!outcome) {
      ++it;
      continue;
    }
    try {
      outcome->get();
    } catch (const std::exception& e) {
      if (leftovers_said_.say(k))
        log::warn(
            "step {}: cannot cancel step {}.{} and its helper jobs yet (asked again at each "
            "look): {}",
            k, step.step.job_id, step.step.step_id, e.what());
      ++it;
      continue;
    }
    if (leftovers_said_.forget(k)) log::info("step {}: its remains are cancelled now", k);
    it = leftovers_.erase(it);
  }
}

void Engine::advance(StoredStep& step, const NodeMap& nodes) {
  // The repair's own requeue, once its writes are in.
  if (requeue_written(step)) return;
  const auto job = job_of(step.step.job_id);
  if (job && job->suspended) return;  // preempted or suspended: look again later
  if (!job || !job->running) {
    job_gone(step, job);
    return;
  }
  if (step.state == StepState::repairing) {
    repair(step, *job, nodes);
    if (step.state == StepState::decided) cancel_helpers_later(step);
    return;
  }
  // A running step's failed spares on their way out of the job: it waits
  // for their writes before anything else is looked at.
  if (writes_.has(call_key(step, kSparesOut))) {
    drop_spares(step, *job, {});
    return;
  }
  if (step.state == StepState::registered) job_hosts_[step.key()] = job->hosts;
  std::vector<std::string> released;
  auto found = faults(step, *job, nodes, released);
  if (!released.empty()) {
    if (const auto why = lost_repair(step, *job, released)) {
      // Not a shrink: the nodes are at fault for this attempt (healthy, so
      // neither marked nor banned as a replacement: instance 0), and the
      // step is repaired on the job as slurmctld has it now.
      for (const auto& host : released) found.push_back({host, *why, 0});
      released.clear();
    }
  }
  if (found.empty() && !released.empty()) {
    decide(step, Verdict::no_fault,
           fmt::format("job {} was shrunk under step {}.{}: {} left it and Slurm shows {} "
                       "healthy; no node is at fault, srun keeps the step's own exit status",
                       job->job_id, step.step.job_id, step.step.step_id, join(released, ", "),
                       released.size() == 1 ? "it" : "them"));
    return;
  }
  // A failed end with no node at fault: the nodes' quick checks first.
  if (found.empty() && released.empty() && step.state == StepState::ended &&
      !failure_checked(step, nodes, found))
    return;
  if (!found.empty() && step.state == StepState::ended) end_failure_check(step, found);
  if (held_back(step, *job, found)) return;  // the guard rails: observe, paused, breaker
  const auto hosts = step_hosts(step);
  if (!found.empty() &&
      std::ranges::none_of(found, [&](const FailedNode& f) { return contains(hosts, f.node); })) {
    drop_spares(step, *job, found);
    return;
  }
  if (!found.empty()) {
    std::vector<std::string> what;
    for (const auto& f : found) what.push_back(fmt::format("{}: {}", f.node, f.why));
    move_to(step, StepState::repairing, RepairPhase::detected);
    step.repair = RepairFacts{};
    step.repair.failed = std::move(found);
    step.repair.started = clock_.stamp();
    note_progress(step);
    save(step, EventKind::detected,
         fmt::format("step {}.{} attempt {}: {}", step.step.job_id, step.step.step_id,
                     step.step.attempt, join(what, ", ")));
    repair(step, *job, nodes);
    return;
  }
  if (step.state == StepState::registered && step.step.hang_timeout.on()) {
    if (const auto hang = hung(step)) {
      start_hang_repair(step, *job, nodes, *hang);
      return;
    }
  }
  if (step.state == StepState::registered) {
    check_lost(step, *job);
    return;
  }
  // A node of an ended step still under suspicion (its cross-check under
  // way) holds the verdict back; decide_by bounds the wait.
  if (step.state == StepState::ended && clock_.since(step.ended()) >= config_.end_window &&
      std::ranges::none_of(step_hosts(step), [this](const std::string& host) {
        return missed_probe(host) || suspects_.contains(host);
      })) {
    const auto check = failure_checks_.find(step.key());
    decide(step, Verdict::no_fault,
           fmt::format("no node of the step failed{}; srun keeps the step's own exit status",
                       check == failure_checks_.end() || check->second.found.empty()
                           ? ""
                           : "; " + check->second.found));
  }
}

void Engine::job_gone(StoredStep& step, const std::optional<slurm::JobInfo>& job) {
  // The step cannot go on: Slurm requeued the job, or it ended.
  const bool repairing = step.state == StepState::repairing;
  const auto id = step.step.job_id;
  const auto note = suspects_note(step);
  if (job && job->pending && job->restart_count > 0)
    decide(step, Verdict::requeued,
           fmt::format("Slurm requeued job {}{}; it restarts from its batch script{}", id,
                       repairing ? " before the repair finished" : "", note));
  else if (repairing)
    decide(
        step, Verdict::cancelled,
        fmt::format("job {} ended ({}) during the repair{}", id, job ? job->state : "gone", note));
  else
    decide(step, Verdict::cancelled,
           fmt::format("job {} is {}{}", id, job ? job->state : "gone", note));
  if (repairing) cancel_helpers_later(step);
}

void Engine::check_lost(StoredStep& step, const slurm::JobInfo& job) {
  // A step whose srun died without asking (kill -9) would block the next
  // protected step of the job: once Slurm has forgotten it for a while,
  // and its srun has not asked for as long, it is over. An srun that asks
  // keeps it: a slurmctld SIGKILLed and back from its last saved state
  // lists no step started since (Slurm does not save its state for a new
  // step), while the step runs on.
  const auto k = step.key();
  if (step_listed(job.job_id, step.step.step_id)) {
    missing_since_.erase(k);
    return;
  }
  const auto [it, first] = missing_since_.try_emplace(k, clock_.now());
  const auto asked = reports_.asks.last(k);
  if (first || clock_.now() - it->second <= kLostStepGrace ||
      (asked && clock_.now() - *asked <= kLostStepGrace))
    return;
  missing_since_.erase(it);
  decide(step, Verdict::cancelled,
         fmt::format("step {}.{} is gone and its srun never asked for a verdict", step.step.job_id,
                     step.step.step_id));
}

void Engine::decide(StoredStep& step, Verdict verdict, const std::string& message) {
  if (!verdicts_.decide(step, verdict, message)) throw DecidedMeanwhile{};
  // A relaunch is a repair that succeeded: its marks no longer count
  // toward the circuit breaker.
  if (verdict == Verdict::relaunch && !step.repair.failed.empty())
    keeper_.gate().settled(Gate::Counted::mark, step.repair.failed_nodes());
  if (verdict == Verdict::relaunch || verdict == Verdict::requeued || verdict == Verdict::give_up)
    tell_job(step);
}

void Engine::tell_job(const StoredStep& step) {
  const auto nodes = join(step.repair.failed_nodes(), ",");
  // A relaunch says where; a requeue or give_up why (the first 160 bytes).
  const auto entry =
      fmt::format("attempt {}: {}{}{}", step.step.attempt, nodes.empty() ? "" : nodes + " failed, ",
                  to_string(step.verdict),
                  step.verdict == Verdict::relaunch && step.repair.relaunch
                      ? " on " + step.repair.relaunch->nodelist
                  : step.verdict == Verdict::relaunch ? std::string()
                                                      : ": " + shortened(step.message, 160));
  // Off the tick: slurmctld may take seconds to answer (or refuse) it.
  const auto id = step.step.job_id;
  outbox_.post(fmt::format("job {}: its AdminComment", id), [this, id, entry = printable(entry)] {
    try {
      const auto job = slurm_.load_job(id);
      if (!job) return;
      slurm_.set_admin_comment(id, with_story(job->admin_comment, entry));
    } catch (const std::exception& e) {
      log::warn("job {}: cannot write its resume into its AdminComment: {}", id, e.what());
    }
  });
}

void Engine::save(StoredStep& step, EventKind kind, const std::string& detail) {
  if (!store_.save(step, EventSpec{kind, detail})) throw DecidedMeanwhile{};
  audit_step(step, kind, detail);  // every root action of a repair is saved with its event
}

}  // namespace ar
