#pragma once
// The resume engine: a worker thread that watches the nodes under protected
// steps and drives each step that needs it from a node fault to a verdict.
// Every step of a repair is recorded in the store before the next begins, so
// a restarted controller carries on where the last one stopped.
//
//   registered --fault--> repairing --> decided (relaunch, requeued, give_up, cancelled)
//   registered --srun reports the end--> ended --fault within end_window--> repairing
//                                              \--no fault--> decided (no_fault)
//
// A repair: `detected` (policy checks: attempts, time left, GRES or batch
// host -> requeue) -> `node_out` (FAIL mark, shrink, old step cancelled) ->
// `replaced` (an idle node of the partition, or the failed node itself once
// the node keeper had the provider replace it)
// -> `expanded` (helper allocation merged into the job) -> relaunch once the
// old step is gone and the backoff has passed.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "autoresume/daemon_config.hpp"
#include "autoresume/resume.hpp"
#include "calls.hpp"
#include "clock.hpp"
#include "nodes/node_keeper.hpp"
#include "nodes/probe.hpp"
#include "provision/provisioner.hpp"
#include "resume/outbox.hpp"
#include "resume/progress.hpp"
#include "resume/step_reports.hpp"
#include "resume/verdicts.hpp"
#include "said_once.hpp"
#include "slurm_api.hpp"
#include "store/store.hpp"

namespace ar {

class Engine {
 public:
  // `keeper` has its turn on the engine's thread, with the same node list,
  // and so has continuous provisioning's `provisioner`, after it (none: it
  // is off). `reports` is what the server hears of the steps (a registered
  // step whose srun asks for its verdict is not lost). Every verdict goes
  // through `verdicts`, which the server shares. Slurm, the clock and the
  // prober are the engine's seams: tests pass fakes.
  Engine(Store& store, const DaemonConfig& config, NodeKeeper& keeper, slurm::SlurmApi& slurm,
         const Clock& clock, Prober& prober, StepReports& reports, Verdicts& verdicts,
         Provisioner* provisioner = nullptr, std::function<void(double seconds)> on_look = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void start();
  void stop();
  // Every outside call on threads of its own, as start() has them, without
  // the looking thread (tests and bench/engine_load.cpp call tick()
  // themselves); a look waits `read_wait` at most for a read under way.
  void start_calls(std::chrono::milliseconds read_wait = kReadWait);
  // Look again now (a step ended, or was cancelled).
  void wake();

  // One look at every protected step and the nodes (the thread's loop; tests
  // call it directly instead of starting the thread).
  void tick();
  // The calls no decision waits on (tell_job's): on their own thread once
  // the engine starts (tests start it by hand, and drain it).
  Outbox& outbox() { return outbox_; }
  // The expand helpers' submits (auto-resume-submit, as the job's owner,
  // up to 30 s) run on threads of their own once the engine starts: no
  // tick waits for one (tests start them by hand). Waits until every
  // submit under way has its outcome, at most `limit` (tests).
  void start_submits() { submits_.start(); }
  bool submits_settled(std::chrono::milliseconds limit) const { return submits_.wait(limit); }
  // A repair's calls to slurmctld after its detection (the writes that
  // take its failed nodes out of the job or requeue it, the helper's
  // merge, the relaunch's checks) run on a thread of their own per call
  // once the engine starts, one at a time per repair: a slurmctld slow to
  // answer one holds up that repair only (tests start them by hand).
  void start_writes() {
    writes_.start();
    merges_.start();
    checks_.start();
    places_.start();
    cleanups_.start();
  }
  bool writes_settled(std::chrono::milliseconds limit) const {
    return writes_.wait(limit) && merges_.wait(limit) && checks_.wait(limit) &&
           places_.wait(limit) && cleanups_.wait(limit);
  }
  // Slurm is read on a thread of its own once the engine starts (tests
  // start it by hand, with the wait they need): a slurmctld that does not
  // answer holds libslurm's call for MessageTimeout and more, and a look
  // waits for it `wait` at most.
  void start_reads(std::chrono::milliseconds wait = kReadWait) {
    read_wait_ = wait;
    reads_.start();
  }
  bool reads_settled(std::chrono::milliseconds limit) const { return reads_.wait(limit); }
  // A round of probes runs on a thread of its own once the engine starts,
  // and is counted at the look after it returns (tests start it by hand).
  void start_probes() { probes_.start(); }
  bool probes_settled(std::chrono::milliseconds limit) const { return probes_.wait(limit); }
  // A look waits at most kReadWait for the read under way (it takes
  // milliseconds when slurmctld answers); a read under way for kSlowRead
  // is said in the log.
  static constexpr std::chrono::milliseconds kReadWait{250};
  static constexpr std::chrono::seconds kSlowRead{3};

 private:
  using Steady = Clock::Steady;
  using NodeMap = std::map<std::string, const slurm::NodeInfo*>;

  void run();
  // The node list this look goes on with: a read started now (or the one
  // still under way) once it is in, waited for kReadWait at most; else the
  // last list. slurm_slow_ while the read failed or is not in; nothing
  // until a first list is in.
  const std::vector<slurm::NodeInfo>* read_nodes(const std::vector<StoredStep>& steps);
  // A read of Slurm for the looks, with the jobs of `steps` and whether
  // slurmctld lists those not under repair, unless one is under way.
  void start_read(const std::vector<StoredStep>& steps);
  // Whether this look reads slurmctld: always while something is under
  // way (busy) or was at the last look, or a step moved on at the last
  // look (their outcome is read: no look decides on a read older than
  // its own changes), else once the last read is slurm_read_interval old.
  bool read_due(const std::vector<StoredStep>& steps);
  // Something under way that a fresh read serves: a step not simply
  // running (ending, repairing, not covered by the last read), a node
  // suspected or missing probes, a lost step's grace, a call of the
  // engine's or the node keeper's in flight, a provisioning action.
  bool busy(const std::vector<StoredStep>& steps) const;
  static constexpr const char* kRead = "slurm";
  // Forgets what is older than `retention`, once per kPruneEvery.
  void prune();
  static constexpr std::chrono::hours kPruneEvery{1};
  // One round of probes of the nodes under running (or just ended) steps,
  // started on a thread of its own (probes_).
  void probe(const std::vector<StoredStep>& steps, const NodeMap& nodes);
  // A round that came in, counted; a silent node's agents-of-other-nodes
  // cross-check is asked for.
  void take_probes();
  // A round's own deadline.
  std::chrono::milliseconds probe_timeout() const {
    return std::min(config_.probe_interval, std::chrono::milliseconds{1000});
  }
  struct ProbeRound {
    std::vector<std::vector<std::string>> lists;                    // the hosts of each step
    std::map<std::string, const std::vector<std::string>*> wanted;  // host -> its step's list
    std::vector<std::string> probed;
    std::vector<ProbeTarget> targets;  // of `probed`, in order
    std::vector<ProbeResult> results;
    Clock::Steady::time_point started{};
    Clock::Steady::time_point ended{};
  };
  static constexpr const char* kProbes = "probes";
  // The round's results into failed_probes_, with the crowd guard.
  void count_probes(const std::vector<std::string>& probed, const std::vector<ProbeTarget>& targets,
                    const std::vector<ProbeResult>& results,
                    const std::map<std::string, const std::vector<std::string>*>& wanted);
  // Why a node silent for `count` probes is at fault, once the crowd guard
  // and its cross-check allow; nothing while they do not.
  std::optional<std::string> probe_fault(const std::string& host, unsigned count);
  void advance(StoredStep& step, const NodeMap& nodes);
  // Why the job's release of `released` (nodes of the step that left it)
  // is a repair slurmctld lost, not a shrink: a node an earlier attempt's
  // repair merged left the job while a node that repair took out is in it
  // again, or while slurmctld no longer lists the step (slurmctld restarted
  // from a state saved before the merge, after the relaunch went out).
  // Nothing if it is not.
  std::optional<std::string> lost_repair(const StoredStep& step, const slurm::JobInfo& job,
                                         const std::vector<std::string>& released);
  // A step past its decide_by gets give_up; false if it is not.
  bool overdue(StoredStep& step);
  // Nodes of the step at fault now, with why; records them for the repair.
  // `released` gets the step's nodes that left the job healthy (the job
  // was shrunk under the step): registered with slurmctld, and not silent
  // at their last probe.
  // Evidence before action: which of `watched` (the nodes under protected
  // steps and their jobs) are suspected now (Slurm's not responding, the
  // probes' silence), whether they are a crowd (a network or slurmctld
  // event: then suspicion alone takes none), and the end of each episode.
  void weigh_suspicion(const std::set<std::string>& watched, const NodeMap& nodes);
  // A node suspected and not taken (its agent beats, or a crowd): said once
  // per episode as a `suspected` event.
  void suspect(const std::string& host, const std::string& why);
  // For a verdict Slurm brought about: the step's nodes suspected and not
  // taken, in words (empty if none).
  std::string suspects_note(const StoredStep& step);
  // What Slurm says of `host` (its slurmd instance in `instance`).
  NodeHealth health_of(const std::string& host, bool in_job, const NodeMap& nodes,
                       std::int64_t& instance);
  // Why `host` is at fault (look_at): Slurm's word, its probes once the
  // crowd guard and the cross-check allow (probe_fault), and what its own
  // agent says; nothing if it is not.
  std::optional<std::string> fault_of(const std::string& host, NodeHealth health);
  // Whether `host` missed its last probe (its count not back to 0 yet).
  bool missed_probe(const std::string& host) const;
  // How many probes in a row `host` missed, once they reach probe_failures
  // (0 before, and with probing off).
  unsigned silent_probes(const std::string& host) const;
  std::vector<FailedNode> faults(const StoredStep& step, const slurm::JobInfo& job,
                                 const NodeMap& nodes, std::vector<std::string>& released);
  // A step whose job is no longer running: requeued, or ended.
  void job_gone(StoredStep& step, const std::optional<slurm::JobInfo>& job);
  // A registered step Slurm has forgotten for a while is over.
  void check_lost(StoredStep& step, const slurm::JobInfo& job);
  void repair(StoredStep& step, const slurm::JobInfo& job, const NodeMap& nodes);
  // During a repair, before each phase after node_out: a node of the job
  // (or a replacement) that failed since joins the repair (true if none
  // did): back to `detected` for a node of the job, back to `node_out` for
  // a replacement that never joined it.
  bool no_new_faults(StoredStep& step, const slurm::JobInfo& job, const NodeMap& nodes);
  // How a repair gives the step back its nodes.
  enum class Refill {
    in_job,   // the job's healthy nodes are enough (spares it holds): no new node
    shrink,   // fewer, but at least the step's min_nodes: it goes on smaller
    replace,  // new nodes join the job (an idle node, a spare of the pool)
    requeue,  // none of these (GRES, or the batch host failed): Slurm's requeue
  };
  struct Plan {
    Refill how = Refill::replace;
    std::uint32_t step_nodes = 0;  // the relaunched step's nodes (in_job, shrink)
    std::string why;               // requeue: why the job cannot be repaired in place
  };
  // The plan for `step` when `failed` leave `job` (the step's size from
  // slurmctld, its min_nodes, the job's healthy nodes, GRES, batch host).
  Plan plan_for(const StoredStep& step, const slurm::JobInfo& job,
                const std::vector<std::string>& failed);
  // The `detected` phase: the policy's checks; false when the step was
  // decided (give_up, requeued) instead of going on to node_out.
  bool check_policy(StoredStep& step, const slurm::JobInfo& job);
  // After node_out, a step whose plan needs no new node goes straight to
  // the relaunch (`expanded`) on the nodes the job has left.
  void go_on_in_job(StoredStep& step, const slurm::JobInfo& job);
  // Nodes of the job the protected step does not run on (spares it holds) that failed
  // while the step runs: set FAIL and shrunk out before Slurm sees them
  // DOWN (which kills or requeues the whole job); the step runs on.
  void drop_spares(StoredStep& step, const slurm::JobInfo& job,
                   const std::vector<FailedNode>& failed);
  // The run's relaunch budget before relaunching `step` (its earlier
  // attempts from the store).
  RelaunchBudget budget_of(const StoredStep& step);
  // Hung steps (hangs.cpp). Whether `step` is hung now, by its nodes'
  // progress reports and --auto-resume-hang-timeout; nothing if it is not.
  std::optional<Hang> hung(const StoredStep& step);
  // A hung step's repair begins: the `hung` event, nothing marked.
  void start_hang_repair(StoredStep& step, const slurm::JobInfo& job, const NodeMap& nodes,
                         const Hang& hang);
  // The hang signal sent (on the repair's own thread) and its grace over;
  // true at once without --auto-resume-hang-signal.
  bool hang_signalled(StoredStep& step, const slurm::JobInfo& job);
  // What the attempt's tasks said of their progress so far, into the
  // repair's facts (whether any beat, the highest step).
  void note_progress(StoredStep& step);
  // After a failed end with no node at fault, or a hang (`hung`; its
  // signal's grace over), with failure_check=quick: the quick checks asked
  // of the agents of the step's nodes, once; false while they run
  // (failure_check_timeout at most). `failed` gets the nodes whose checks
  // failed.
  bool failure_checked(const StoredStep& step, const NodeMap& nodes,
                       std::vector<FailedNode>& failed, bool hung = false);
  // A hung step's nodes checked (failure_checked): those that failed a
  // check join the repair's failed nodes (out of the job, replaced); false
  // while the checks run.
  bool hang_checked(StoredStep& step, const NodeMap& nodes);
  // A fault found while the quick checks run: they are over (a node
  // whose checker marked it before its answer came counts as failed).
  void end_failure_check(const StoredStep& step, const std::vector<FailedNode>& found);
  // The run's attempts up to `step`, oldest first (`step` last, as given).
  std::vector<StoredStep> run_attempts(const StoredStep& step);
  // Whether each of `attempts` passed the highest step of those before it.
  static std::vector<bool> progressed(const std::vector<StoredStep>& attempts);
  // The hangs in a row that end the run's attempts up to `step`, counted
  // back to the first one that reached a new highest step.
  unsigned hangs_in_a_row(const StoredStep& step);
  // Requeue (`why`: GRES with no spare left, or the batch host failed), or
  // give_up where Slurm cannot.
  void requeue_or_give_up(StoredStep& step, const slurm::JobInfo& job,
                          const std::vector<std::string>& failed, const std::string& why);
  // The requeue's writes once in (the job is pending by then); false if
  // none was asked for `step`.
  bool requeue_written(StoredStep& step);
  // What a replacement may be: a node of the job's partition that is not
  // one of the instances that failed this job before.
  struct Candidates {
    std::vector<std::string> partition;
    std::multimap<std::string, std::int64_t> banned;  // name -> slurmd start time
    // Nodes of reservations the job is not in, and for a job in one, that
    // reservation's nodes (the only ones it may take).
    std::set<std::string> reserved;
    std::optional<std::set<std::string>> reservation;
  };
  // Where replacements may come from: slurmctld's partitions and
  // reservations, read on a thread of their own (places_).
  struct Places {
    std::map<std::string, std::vector<std::string>> partitions;
    std::map<std::string, std::vector<std::string>> reservations;
  };
  Candidates candidates_for(const slurm::JobInfo& job, const Places& places);
  // A spare or an idle node among `candidates` for a failed node.
  const slurm::NodeInfo* pick_replacement(StoredStep& step, const slurm::JobInfo& job,
                                          const NodeMap& nodes, const Candidates& candidates,
                                          const std::vector<std::string>& chosen);
  // One replacement's helper job, submitted, waited for and merged; false
  // while it is not merged yet. `nodes` gets the job's nodes after a merge.
  bool expand_one(StoredStep& step, const slurm::JobInfo& job, const std::string& node,
                  std::string& nodes);
  // What a look at a helper job found, on a thread of its own (merge).
  struct Merge {
    enum class How { pending, cancelled, ended, unlinked, merged } how = How::pending;
    std::string detail;  // why pending or cancelled, the state it ended in, the error
    std::string nodes;   // merged: the job's nodes now
  };
  // A failed node shrunk out of the job: slurmctld sent the job's abort to
  // its dead slurmd and keeps trying to connect for MessageTimeout, a
  // second apart. A new instance under the same name answering within
  // that time gets it, and once in the job again, the abort kills the
  // relaunched tasks on it. How much longer the merge of `node` waits for
  // that (0: none).
  std::chrono::seconds abort_in_flight(const StoredStep& step, const std::string& node) const;
  static constexpr std::chrono::seconds kAbortMargin{2};
  static constexpr std::chrono::seconds kDefaultMessageTimeout{10};  // Slurm's
  // The helper job `helper` merged into `job_id` once it runs; cancelled
  // if it is still pending and `give_up`.
  Merge merge(std::uint32_t helper, std::uint32_t job_id, bool give_up);
  // The outcome of a submit whose repair no longer waits for it (decided,
  // or another node chosen): the helper it made is cancelled.
  void drop_unwanted_submits(const std::vector<StoredStep>& steps);
  // A chosen replacement is given up for this repair (its helper waited too
  // long, Slurm refused it, or it failed): another is chosen.
  void pass_over(StoredStep& step, const std::string& node);
  // The failed nodes out of the job and the old step cancelled
  // (node_out): started on the repair's own thread, taken at a later look
  // once done; false meanwhile, or when every node failed (give_up).
  bool take_out(StoredStep& step, const slurm::JobInfo& job);
  // What a repair's writes did, for its event.
  struct NodeOut {
    std::string kept;  // the job's nodes left, a hostlist
    std::vector<std::string> downed;
    std::vector<std::string> notes;  // what slurmctld refused, in words
    std::vector<FailedNode> failed;  // the nodes they were for (spares out)
    std::string verdict;             // the message of the verdict they end in (requeue)
  };
  // Runs `writes` for `step` under `what` (call_key) on a thread of its
  // own, unless they are under way; their outcome once in, taken (nothing
  // meanwhile). A write that failed throws here: it is tried again at the
  // next look.
  std::optional<NodeOut> written(const StoredStep& step, std::string_view what,
                                 std::function<NodeOut()> writes);
  // No relaunch for a job that cannot leave its failed nodes (its batch
  // host failed, or it cannot be requeued): the nodes it holds are set
  // FAIL (no other job gets them), the step is cancelled, and the run is
  // given up with `why`.
  void give_up_keeping_nodes(StoredStep& step, const slurm::JobInfo& job, const std::string& why);
  // The outcomes of calls whose step is no longer where it made them
  // (decided, or moved on meanwhile) are dropped; `wanted` may say no to
  // more of them.
  template <typename T>
  void drop_unwanted(
      Calls<T>& calls, const std::vector<StoredStep>& steps,
      const std::function<bool(const StoredStep&, const std::string&)>& wanted = nullptr);
  void drop_unwanted_calls(const std::vector<StoredStep>& steps);
  // Sets FAIL the `failed` nodes the job holds that no check marked
  // already, so that Slurm gives them to no other job and the node keeper
  // replaces them once the job lets go; what slurmctld refused goes to
  // `notes`, in words.
  void mark_failed(const std::vector<FailedNode>& failed, const slurm::JobInfo& job,
                   std::vector<std::string>& notes);
  // After the shrink that took them out of `job`: the failed nodes that no
  // job holds any more are set DOWN (returned), a check's or a heartbeat's
  // mark keeping its reason. The shrink
  // sends each an abort of the job; a dead node's is sent again every 60 s
  // until a slurmd takes it (Slurm 22.05 drops it only when a send fails
  // while the node is DOWN), and the node's next instance, merged back
  // into the job meanwhile, would have the relaunched step's tasks killed
  // by it (docs/resume.md).
  std::vector<std::string> down_released(const std::vector<FailedNode>& failed,
                                         const slurm::JobInfo& job,
                                         std::vector<std::string>& notes);
  // Steps back to the phase that a slurmctld restarted from an older state
  // lost (a failed node in the job again, a merged replacement out of it).
  void redo_lost_updates(StoredStep& step, const slurm::JobInfo& job);
  bool replace(StoredStep& step, const slurm::JobInfo& job, const NodeMap& nodes);
  bool expand(StoredStep& step, const slurm::JobInfo& job);
  // The relaunch once the old step is gone, the backoff over and the job's
  // nodes registered, by what relaunch_facts found on a thread of its own.
  void relaunch(StoredStep& step, const slurm::JobInfo& job);
  // What the relaunch asks of slurmctld (relaunch_facts), decided by the
  // look from the repair's facts (see kOldStepGrace).
  struct RelaunchAsk {
    std::uint32_t job_id = 0;
    std::uint32_t step_id = 0;
    bool cancel_again = false;            // an old step still listed is cancelled again
    bool anyway = false;                  // one still listed is no longer waited for
    bool tasks_gone = false;              // every surviving node reported its tasks exited
    bool backoff_over = false;            // then: whether the job's nodes registered
    std::vector<std::string> step_hosts;  // the old step's nodes
    std::vector<std::string> failed;      // the repair's failed nodes
  };
  enum class OldStep {
    gone,        // slurmctld no longer lists it
    listed,      // it does: the relaunch waits
    anyway,      // it does, past kOldStepGone or with its first node dead
    abandoned,   // it does, but none of its nodes runs it (a recovered record)
    tasks_gone,  // it does, but every surviving node reported its tasks exited
  };
  struct RelaunchFacts {
    std::optional<slurm::JobInfo> job;  // as it is now
    OldStep old_step = OldStep::listed;
    bool cancelled = false;    // the old step was cancelled again
    std::string unregistered;  // the first node of the job not registered since slurmctld started
  };
  RelaunchFacts relaunch_facts(const RelaunchAsk& ask);
  // The guard rails (observe.cpp): true when the gate holds the repair of
  // `failed` back (said as what it would do; a step that ended is decided
  // no_fault). What the repair would mark, and would do, in words.
  bool held_back(StoredStep& step, const slurm::JobInfo& job,
                 const std::vector<FailedNode>& failed);
  std::vector<std::string> marks_of(const StoredStep& step, const slurm::JobInfo& job,
                                    const std::vector<FailedNode>& failed);
  std::string would_do(const StoredStep& step, const slurm::JobInfo& job,
                       const std::vector<FailedNode>& failed);
  void decide(StoredStep& step, Verdict verdict, const std::string& message);
  // Adds a decided repair's line to its job's AdminComment (with_story):
  // the attempt, the failed nodes and the verdict. A failure is logged.
  void tell_job(const StoredStep& step);
  void save(StoredStep& step, EventKind kind, const std::string& detail);
  std::vector<std::string> step_hosts(const StoredStep& step);
  static std::string helper_name(std::uint32_t job_id);
  // Cancels the job's pending or running helper jobs, recorded or not
  // (throws if slurmctld could not be asked). Posted to the outbox by
  // cancel_helpers_later.
  void cancel_helpers(const StoredStep& step);
  void cancel_helpers_later(const StoredStep& step);
  // The steps given up at their deadline mid-repair whose remains (the
  // step, the repair's helper jobs) slurmctld has not cancelled yet: at
  // each look it answers, until it has.
  void clear_leftovers();
  // Node instances that failed this job before (name -> slurmd start times).
  std::multimap<std::string, std::int64_t> failed_instances(std::uint32_t job_id);

  std::function<void(double seconds)> on_look_;
  // This look's replacements chosen by repairs under way (node -> the
  // step's key): two repairs never pick the same idle node.
  std::map<std::string, std::string> claimed_;
  Store& store_;
  const DaemonConfig& config_;
  NodeKeeper& keeper_;
  StepReports& reports_;
  Verdicts& verdicts_;
  Provisioner* provisioner_;
  slurm::SlurmApi& slurm_;
  const Clock& clock_;
  Prober& prober_;
  std::map<std::string, unsigned> failed_probes_;
  Steady::time_point last_probe_{};
  Steady::time_point last_round_{};  // when the last round of probes ended
  bool probe_crowd_ = false;         // the last round had too many silent at once
  bool crowd_said_ = false;          // its event is out
  SaidOnce disputed_said_;           // nodes whose probe_disputed event is out
  bool suspect_crowd_ = false;       // too many nodes suspected at once (this tick)
  bool suspect_crowd_said_ = false;  // its event is out
  // Nodes suspected and not taken in this episode (until they are well
  // again), with why: their `suspected` event is out.
  std::map<std::string, std::string> suspects_;
  std::set<std::string> watched_;  // the nodes the last look weighed (busy)
  Steady::time_point last_prune_{};
  // What a read brings: the node list, the protected steps' jobs and
  // whether slurmctld lists their steps not under repair.
  struct SlurmView {
    std::vector<slurm::NodeInfo> nodes;
    std::map<std::uint32_t, std::optional<slurm::JobInfo>> jobs;
    std::set<std::pair<std::uint32_t, std::uint32_t>> asked_steps;
    std::set<std::pair<std::uint32_t, std::uint32_t>> listed_steps;  // of those asked
    // The nodes of the steps not known yet (step_hosts), by step key.
    std::map<std::string, std::optional<std::string>> step_nodes;
    std::chrono::seconds message_timeout{0};  // slurmctld's MessageTimeout
  };
  // The last read slurmctld answered. While it is slow (the last read
  // failed, or one is not in) nothing is asked of it or changed in it
  // (each call would wait as long), and the heartbeat watch and the probes
  // go on with that read's node list.
  std::shared_ptr<const SlurmView> view_;
  // Steps the last look left for this one (tick): they go first.
  std::set<std::string> deferred_;
  // The job as view_ has it (nullopt: gone); NotRead if the read does
  // not cover it.
  std::optional<slurm::JobInfo> job_of(std::uint32_t job_id) const;
  // Whether slurmctld lists the step, as view_ has it; NotRead if the read
  // did not ask.
  bool step_listed(std::uint32_t job_id, std::uint32_t step_id) const;
  Steady::time_point read_started_{};
  Steady::time_point view_started_{};  // when view_'s read was started
  bool busy_last_ = true;              // the last look's busy()
  bool changed_ = false;               // a step moved on at the last look: its outcome is read
  std::chrono::milliseconds read_wait_ = kReadWait;
  bool slurm_slow_ = false;              // this look's: the read failed or is not in
  bool slurm_away_ = false;              // said (slurm_slow): failed, or not in for kSlowRead
  Steady::time_point slurm_away_since_;  // the read slurmctld did not answer began
  // A slurm_slow or slurm_back event, logged too.
  void said_slurm(EventKind kind, const std::string& detail);
  // Errors already logged, per step, so a persisting one is logged once.
  std::map<std::string, std::string> last_error_;
  // The nodes each step runs on, from slurmctld.
  std::map<std::string, std::vector<std::string>> step_nodes_;
  // The nodes of each running step's job as the last look saw them (its
  // spares are probed as well).
  std::map<std::string, std::vector<std::string>> job_hosts_;
  // Registered steps Slurm no longer lists, since when.
  std::map<std::string, Steady::time_point> missing_since_;
  // Steps given up mid-repair whose remains are still to be cancelled
  // (clear_leftovers), and those whose failure to is said already.
  std::map<std::string, StoredStep> leftovers_;
  SaidOnce leftovers_said_;
  // Steps whose old step record outlived kOldStepGone, said once.
  SaidOnce said_old_step_;
  // Steps whose relaunch waits for nodes to register, said once.
  SaidOnce said_unregistered_;
  // Merges that wait for a job's abort in flight to a node (abort_in_flight), said once.
  SaidOnce said_abort_wait_;
  // Intervals between beats seen in each run (--auto-resume-hang-timeout=auto),
  // the last kHangSamples.
  std::map<std::string, std::vector<std::chrono::milliseconds>> hang_samples_;
  static constexpr std::size_t kHangSamples = 1000;
  // The quick checks after a failed end, by step: each node's ask, when
  // they were asked, and once settled what they found, in words.
  struct FailureCheck {
    std::map<std::string, std::uint64_t> asked;
    Steady::time_point since{};
    bool settled = false;
    std::string found;
  };
  std::map<std::string, FailureCheck> failure_checks_;
  // Step `key`'s quick checks are over: the asks withdrawn, srun no longer
  // told it waits for them.
  void close_check(const std::string& key, FailureCheck& check);

  Outbox outbox_;

  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wakeup_;
  bool stopping_ = false;
  bool woken_ = false;
  // Expand helpers' submits under way or not taken yet, by "STEP NODE"
  // (submit_key): last, so that the calls end before what they wake.
  Calls<std::uint32_t> submits_{[this] { wake(); }};
  // A repair's writes (take_out's, the hang signal, a requeue or a give_up
  // in place, a running step's failed spares out), by call_key.
  Calls<NodeOut> writes_{[this] { wake(); }};
  // A repair's looks at its helper jobs, and their merges (call_key).
  Calls<Merge> merges_{[this] { wake(); }};
  // A relaunch's checks (call_key).
  Calls<RelaunchFacts> checks_{[this] { wake(); }};
  // A replacement's places to come from (call_key).
  Calls<Places> places_{[this] { wake(); }};
  // The cancels of what a repair given up at its deadline left (by step).
  Calls<bool> cleanups_{[this] { wake(); }};
  // A round of probes (kProbes), one at a time.
  Calls<std::shared_ptr<ProbeRound>> probes_{[this] { wake(); }};
  // The reads of Slurm (read_nodes), one at a time; a look takes the one
  // that finished.
  Calls<std::shared_ptr<const SlurmView>> reads_{nullptr};
};

}  // namespace ar
