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
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "autoresume/daemon_config.hpp"
#include "nodes/node_keeper.hpp"
#include "slurm_adapter.hpp"
#include "store/store.hpp"

namespace ar {

class Engine {
 public:
  // `keeper` has its turn on the engine's thread, with the same node list.
  Engine(Store& store, const DaemonConfig& config, NodeKeeper& keeper);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void start();
  void stop();
  // Look again now (a step ended, or was cancelled).
  void wake();

 private:
  using Clock = std::chrono::steady_clock;
  using NodeMap = std::map<std::string, const slurm::NodeInfo*>;

  void run();
  void tick();
  void probe(const std::vector<StoredStep>& steps, const NodeMap& nodes);
  void advance(StoredStep& step, const NodeMap& nodes);
  // Nodes of the step at fault now, with why; records them for the repair.
  proto::json faults(const StoredStep& step, const slurm::JobInfo& job, const NodeMap& nodes);
  void repair(StoredStep& step, const slurm::JobInfo& job, const NodeMap& nodes);
  bool take_out(StoredStep& step, const slurm::JobInfo& job);
  bool replace(StoredStep& step, const slurm::JobInfo& job, const NodeMap& nodes);
  bool expand(StoredStep& step, const slurm::JobInfo& job);
  void relaunch(StoredStep& step, const slurm::JobInfo& job);
  void decide(StoredStep& step, const char* verdict, const std::string& message);
  void save(StoredStep& step, const std::string& kind, const std::string& detail);
  std::vector<std::string> step_hosts(const StoredStep& step);
  static std::string helper_name(std::uint32_t job_id);
  // Cancels the job's pending or running helper jobs, recorded or not.
  void cancel_helpers(std::uint32_t job_id);
  // Node instances that failed this job before (name -> slurmd start times).
  std::multimap<std::string, std::int64_t> failed_instances(std::uint32_t job_id);

  Store& store_;
  const DaemonConfig& config_;
  NodeKeeper& keeper_;
  slurm::NodeWatcher watcher_;
  std::map<std::string, unsigned> failed_probes_;
  Clock::time_point last_probe_{};
  // Errors already logged, per step, so a persisting one is logged once.
  std::map<std::string, std::string> last_error_;
  // The nodes each step runs on, from slurmctld.
  std::map<std::string, std::vector<std::string>> step_nodes_;
  // Registered steps Slurm no longer lists, since when.
  std::map<std::string, Clock::time_point> missing_since_;

  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wakeup_;
  bool stopping_ = false;
  bool woken_ = false;
};

}  // namespace ar
