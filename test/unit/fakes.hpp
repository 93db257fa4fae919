#pragma once
// In-memory stand-ins for the controller's seams: Slurm (nodes with states
// and reasons, jobs with node lists, owners, GRES and steps; every update
// recorded), a clock that tests move by hand, a prober and a command runner
// whose answers tests choose.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "autoresume/daemon_config.hpp"
#include "autoresume/process.hpp"
#include "clock.hpp"
#include "nodes/probe.hpp"
#include "resume/step_reports.hpp"
#include "slurm_api.hpp"

namespace ar::test {

class ManualClock final : public Clock {
 public:
  // Starts at the machine's wall time, so that times written by code that
  // reads the system clock compare sensibly.
  ManualClock();
  Steady::time_point now() const override;
  std::int64_t unix_now() const override;
  std::int64_t boot_ms() const override;
  std::string boot_id() const override;
  // Time passes: every clock moves.
  void advance(std::chrono::milliseconds by);
  // The wall clock alone is set (by an admin, NTP): forward or back.
  void step_wall(std::chrono::milliseconds by);
  // The machine boots again: a new boot id, the boot time starts over, the
  // wall time goes on by `down` (the time the machine was off).
  void reboot(std::chrono::milliseconds down);

 private:
  mutable std::mutex mutex_;
  Steady::time_point now_;
  std::int64_t unix_ms_;
  std::int64_t boot_ms_ = 3'600'000;
  unsigned boots_ = 1;
};

// A call that a test holds up (a slurmctld slow to answer, a helper
// program stopped by its user): while held, pass() waits (without the
// fake's lock), at most 10 s.
class Hold {
 public:
  void set(bool hold);
  // Whether a call waits in pass() now; how many do; the most that did at
  // once.
  bool waiting() const;
  int waiters() const;
  int most_waiters() const;
  // Waits until a test waiting for it (waiting()) sees a call here.
  bool wait_for_waiter(std::chrono::milliseconds limit) const;
  void pass();

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  bool held_ = false;
  int waiting_ = 0;
  int most_ = 0;
};

// The calls a fake gets on one thread, the looks' (`thread`, set before any
// call runs on a thread of its own): the looks must make none, to slurmctld,
// to a slurmd (a probe) or to a program (a provider's command).
struct LookCalls {
  std::thread::id thread;
  mutable std::atomic<int> count{0};
  // Set while a rig itself calls on the looks' thread (the node list it
  // hands a look, which the controller reads on a thread of its own).
  static inline thread_local bool rig_call = false;
  void note() const {
    if (!rig_call && thread != std::thread::id{} && std::this_thread::get_id() == thread) ++count;
  }
};
// While alive, the calls of this thread are the rig's own (LookCalls).
struct RigCall {
  RigCall() { LookCalls::rig_call = true; }
  ~RigCall() { LookCalls::rig_call = false; }
  RigCall(const RigCall&) = delete;
  RigCall& operator=(const RigCall&) = delete;
};

class FakeSlurm final : public slurm::SlurmApi {
 public:
  // The cluster, as tests build it. A node's `allocated`/`idle` follow the
  // running jobs on it (see load_nodes); the other flags are set directly.
  std::map<std::string, slurm::NodeInfo> nodes;
  std::map<std::uint32_t, slurm::JobInfo> jobs;
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::string> steps;  // job.step -> nodelist
  // Steps whose record outlives the first kill_step (its slurmstepds slow
  // to end, or a slurmctld restarted since recovered it): the next
  // kill_step ends them.
  std::set<std::pair<std::uint32_t, std::uint32_t>> lingering_steps;
  // Steps a slurmstepd of which still runs on their nodes (step_daemons_left
  // says so; none by default); with daemons_unknown, a node does not answer.
  std::set<std::pair<std::uint32_t, std::uint32_t>> step_daemons;
  bool daemons_unknown = false;
  std::vector<std::string> daemons_asked;  // "10.0 node[1-2]", in order
  std::map<std::string, std::vector<std::string>> partition_nodes;
  std::map<std::string, std::vector<std::string>> reservation_nodes;  // active reservations
  uid_t slurm_user = 64030;
  // Whether an expand helper starts running at once (else it stays pending).
  bool helpers_start = true;
  // Helpers a restarted slurmctld no longer links to their job: their merge
  // throws HelperUnlinked.
  std::set<std::uint32_t> unlinked_helpers;
  // Nodes for which Slurm refuses an expand helper (SlurmError).
  std::set<std::string> refuse_helpers;
  // While above 0, resume_node throws SlurmError and counts it down (a
  // slurmctld too busy to take it).
  int refuse_resumes = 0;
  // slurmctld's MessageTimeout (message_timeout).
  std::chrono::seconds msg_timeout{10};
  // While true, kill_step throws SlurmError (slurmctld refuses the cancel).
  bool refuse_kill_step = false;
  // While false, every call throws SlurmError (slurmctld unreachable).
  bool reachable = true;
  LookCalls looks;
  // Every update, in order: "fail node2 <reason>", "shrink 10 node[1,3]", ...
  std::vector<std::string> updates;

  // Nodes node1..nodeN of partition "main", idle, each with its own address;
  // those that exist already are left as they are.
  void add_nodes(int count, const std::string& partition = "main");
  // A running batch job on `hosts` (the first is the batch host).
  slurm::JobInfo& add_job(std::uint32_t id, uid_t uid, const std::vector<std::string>& hosts,
                          const std::string& partition = "main");
  void add_step(std::uint32_t job, std::uint32_t step, const std::string& nodelist);
  // A pending job (an expand helper) starts running.
  void start_job(std::uint32_t id);
  // A powering-down CLOUD node is powered down (and hidden) now.
  void finish_power_down(const std::string& name);
  // While set, set_admin_comment waits (a slurmctld slow to answer it).
  Hold admin_comments;
  // While set, load_nodes waits (a slurmctld stopped, or slow to answer).
  Hold node_lists;
  // While set, submit_expand_helper waits (its program stopped by the
  // job's owner).
  Hold helper_submits;
  // While set, set_node_fail of the node `fail_marks_of` waits (a
  // slurmctld slow to take one repair's mark).
  Hold fail_marks;
  std::string fail_marks_of;
  // While set, one call of job `later_calls_of` waits (a slurmctld slow to
  // answer a repair's later calls): `later_call` names it, "merge" (of a
  // helper into the job), "step_exists" or "requeue".
  Hold later_calls;
  std::uint32_t later_calls_of = 0;
  std::string later_call;
  // While set, a drain, resume, POWER_UP, POWER_DOWN or NodeAddr of the
  // node `node_writes_of` ("*": of every node) waits (a slurmctld slow to
  // take one slot's write).
  Hold node_writes;
  std::string node_writes_of;
  // set_node_fail of these nodes finds slurmctld gone (SlurmUnreachable),
  // each try counted in `unreachable_marks`.
  std::set<std::string> marks_unreachable;
  int unreachable_marks = 0;
  // Whether an update starting with `prefix` was made.
  bool updated(const std::string& prefix) const;

  // The engine's reads: node lists, job reads (load_jobs), step lists
  // (listed_steps), each call counted.
  std::atomic<int> node_reads{0};
  std::atomic<int> job_reads{0};
  std::atomic<int> step_reads{0};

  std::optional<slurm::JobInfo> load_job(std::uint32_t job_id) override;
  std::map<std::uint32_t, slurm::JobInfo> load_jobs(const std::set<std::uint32_t>& ids,
                                                    uid_t owner) override;
  uid_t slurm_user_uid() override;
  std::chrono::seconds message_timeout() override;
  const std::vector<slurm::NodeInfo>& load_nodes() override;
  std::optional<slurm::NodeInfo> load_node(const std::string& name) override;
  std::map<std::string, std::vector<std::string>> partitions() override;
  std::map<std::string, std::vector<std::string>> reservations() override;
  void set_node_fail(const std::string& node, const std::string& reason) override;
  void set_node_down(const std::string& node, const std::string& reason) override;
  void set_node_drain(const std::string& node, const std::string& reason) override;
  void resume_node(const std::string& node) override;
  void undrain_node(const std::string& node) override;
  void power_up(const std::string& node) override;
  void power_down_asap(const std::string& node) override;
  void power_down_force(const std::string& node) override;
  void set_node_address(const std::string& node, const std::string& address,
                        const std::string& hostname) override;
  void shrink_job(std::uint32_t job_id, const std::string& nodelist) override;
  std::optional<std::string> step_nodes(std::uint32_t job_id, std::uint32_t step_id) override;
  bool step_exists(std::uint32_t job_id, std::uint32_t step_id) override;
  std::set<std::pair<std::uint32_t, std::uint32_t>> listed_steps(
      const std::set<std::pair<std::uint32_t, std::uint32_t>>& asked) override;
  void kill_step(std::uint32_t job_id, std::uint32_t step_id) override;
  void signal_step(std::uint32_t job_id, std::uint32_t step_id, int signal) override;
  std::optional<bool> step_daemons_left(std::uint32_t job_id, std::uint32_t step_id,
                                        const std::string& nodelist) override;
  void requeue(std::uint32_t job_id) override;
  void set_admin_comment(std::uint32_t job_id, const std::string& text) override;
  void reconfigure() override { ++reconfigures; }
  bool ping() override { return reachable; }
  int reconfigures = 0;
  std::uint32_t submit_expand_helper(const slurm::JobInfo& job, const std::string& node,
                                     const std::string& name) override;
  void merge_expand_helper(std::uint32_t helper_id, std::uint32_t job_id) override;
  std::vector<std::uint32_t> live_jobs_named(const std::string& name, uid_t owner) override;
  void cancel_job(std::uint32_t job_id) override;

 private:
  // Throws while unreachable; else holds the fake's lock for the call (the
  // engine's outbox calls it from a thread of its own).
  std::unique_lock<std::recursive_mutex> check_reachable() const;
  mutable std::recursive_mutex calls_mutex_;
  // POWER_DOWN_ASAP and _FORCE alike: the node starts powering down.
  void power_down(const std::string& name, const std::string& how);
  slurm::NodeInfo& node(const std::string& name);
  slurm::JobInfo& job(std::uint32_t id);
  std::vector<slurm::NodeInfo> listed_;
  // A node as slurmctld lists it: allocated while a running job holds it.
  slurm::NodeInfo as_listed(const std::string& name, slurm::NodeInfo n) const;
  static slurm::NodeInfo with_allocation(slurm::NodeInfo n, bool allocated);
  std::uint32_t next_job_id_ = 5000;
};

// Answers probes as tests say: a target whose address is in `dead` does not;
// one in `unknown` gets the prober's own failure.
class FakeProber final : public Prober {
 public:
  std::set<std::string> dead;
  std::set<std::string> unknown;
  LookCalls looks;
  int probes = 0;  // targets probed so far
  // While set, a round waits (a prober slow to time out).
  Hold rounds;
  std::vector<ProbeResult> probe(const std::vector<ProbeTarget>& targets,
                                 std::chrono::milliseconds timeout, ProbeDepth depth) override;
};

// Runs nothing: each command gets the result tests set. With `hang`, a run
// blocks, as a provider that never ends: release() lets one hung run end
// (none if none hangs), cancel_all() every run, now and later.
class FakeRunner final : public CommandRunner {
 public:
  CommandResult run(const std::vector<std::string>& argv,
                    std::chrono::milliseconds timeout) override;
  // As run; the environment is kept with the call ("env NAME=value ...").
  CommandResult run_with_env(const std::vector<std::string>& argv,
                             std::chrono::milliseconds timeout,
                             const std::vector<std::string>& environment) override;
  void cancel_all() override;

  LookCalls looks;
  void set_result(CommandResult result);
  void set_hang(bool hang);
  void release();
  // The same, the released run returning `result` (a hung call that
  // comes back after all).
  void release(CommandResult result);
  std::vector<std::vector<std::string>> calls() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable released_;
  CommandResult result_{0, "", ""};
  bool hang_ = false;
  int hung_ = 0;      // runs blocked now
  int releases_ = 0;  // releases not yet taken by a hung run
  std::optional<CommandResult> released_result_;
  bool cancelled_ = false;
  std::vector<std::vector<std::string>> calls_;
};

// A temporary folder, removed with everything in it.
struct TempDir {
  std::filesystem::path path;
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

// Every seam's fake, a folder for the store and a config: what each test
// rig of the controller starts from.
struct Fakes {
  TempDir dir;
  ManualClock clock;
  FakeSlurm slurm;
  FakeProber prober;
  FakeRunner runner;
  DaemonConfig config;
  StepReports reports;  // what the server hears of the steps, for the engine

  // From now on, count the calls the fakes get on this thread (the looks').
  void watch_look_thread() {
    for (auto* looks : {&slurm.looks, &prober.looks, &runner.looks})
      looks->thread = std::this_thread::get_id();
  }
  // Calls to slurmctld, probes and commands made on the looks' thread.
  int look_thread_calls() const {
    return slurm.looks.count + prober.looks.count + runner.looks.count;
  }
};

}  // namespace ar::test
