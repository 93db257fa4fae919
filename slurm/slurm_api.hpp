#pragma once
// What the controller asks of Slurm, as one interface: the resume engine,
// the node keeper and the server reach slurmctld only through it. `LibSlurm`
// (slurm_adapter.hpp) implements it with libslurm; the unit tests' fake
// implements it in memory. Every call of the real one blocks for up to
// Slurm's MessageTimeout: call them from a worker thread, never from the
// server's io thread.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ar::slurm {

// A libslurm call failed; `errno_value` is Slurm's error number.
class SlurmError : public std::runtime_error {
 public:
  SlurmError(const std::string& what, int errno_value)
      : std::runtime_error(what), errno_value_(errno_value) {}
  int errno_value() const { return errno_value_; }

 private:
  int errno_value_;
};

// slurmctld could not be reached or did not answer in time (libslurm's
// communication and socket errors): a call made now would wait the same.
class SlurmUnreachable : public SlurmError {
 public:
  using SlurmError::SlurmError;
};

// A helper job whose link to the job it expands is gone: Slurm 22.05 does
// not save that link, so a restarted slurmctld refuses the merge ("Node
// count specification invalid"). Another helper is needed.
class HelperUnlinked : public SlurmError {
 public:
  using SlurmError::SlurmError;
};

struct JobInfo {
  std::uint32_t job_id = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string state;  // e.g. RUNNING, PENDING, COMPLETED
  bool running = false;
  bool pending = false;
  bool suspended = false;
  std::string reason;  // why it is pending, if it is
  std::string nodes;   // Slurm's compressed list
  std::vector<std::string> hosts;
  std::string batch_host;  // empty for a salloc job
  bool batch = false;
  std::string name;
  std::string partition;
  std::string qos;
  std::string account;
  std::string features;
  std::string reservation;  // the reservation it runs in, if any
  std::string licenses;
  std::string wckey;
  bool exclusive = false;
  bool has_gres = false;      // GRES allocated: Slurm refuses to resize the job
  bool requeue = false;       // may be requeued (not --no-requeue)
  std::int64_t end_time = 0;  // unix seconds; 0 when unknown
  std::uint32_t restart_count = 0;
  std::uint32_t num_nodes = 0;
  std::uint32_t cpus_per_node = 0;    // the job's CPUs over its nodes, rounded up
  std::uint64_t memory_per_node = 0;  // Slurm's pn_min_memory, as the job asked
  bool heterogeneous = false;
  std::string admin_comment;  // AdminComment: what admins (and auto-resume) noted
};

struct NodeInfo {
  std::string name;
  std::string address;   // NodeAddr
  std::string hostname;  // NodeHostname
  std::uint16_t port = 0;
  bool down = false;
  bool idle = false;
  bool fail = false;
  bool drain = false;
  bool not_responding = false;
  bool completing = false;
  bool allocated = false;  // jobs run on it (ALLOCATED or MIXED)
  std::string reason;
  std::int64_t reason_time = 0;        // when the reason was set (Unix seconds; 0: unknown)
  std::int64_t slurmd_start_time = 0;  // tells one instance of a node from the next
  std::string gres;                    // configured, e.g. gpu:8
  // Power saving (CLOUD slots of continuous provisioning, docs/provisioning.md).
  bool cloud = false;
  bool powered_down = false;  // a powered-down CLOUD node is not listed at all
  bool powering_up = false;
  bool powering_down = false;
};

class SlurmApi {
 public:
  virtual ~SlurmApi() = default;

  // The job as slurmctld knows it, or nothing if it does not (anymore).
  // Throws SlurmError when slurmctld cannot be asked.
  virtual std::optional<JobInfo> load_job(std::uint32_t job_id) = 0;
  // The jobs of `ids` that slurmctld knows (those it does not are left
  // out), all of them uid `owner`'s: a few one at a time, more in one call
  // for the owner's jobs (never another user's queue).
  virtual std::map<std::uint32_t, JobInfo> load_jobs(const std::set<std::uint32_t>& ids,
                                                     uid_t owner) = 0;
  // The uid of SlurmUser from slurmctld's configuration.
  virtual uid_t slurm_user_uid() = 0;
  // slurmctld's MessageTimeout: how long it keeps trying to connect to a
  // node's slurmd for one message, a second apart.
  virtual std::chrono::seconds message_timeout() = 0;

  // All nodes. The reference stays valid until the next call that
  // succeeds (one that throws leaves the last list as it was); one caller
  // thread only (the engine's): others use load_node.
  virtual const std::vector<NodeInfo>& load_nodes() = 0;
  // One node as slurmctld knows it now, from any thread.
  virtual std::optional<NodeInfo> load_node(const std::string& name) = 0;
  // Every partition, with its nodes.
  virtual std::map<std::string, std::vector<std::string>> partitions() = 0;
  // The reservations active now, with their nodes.
  virtual std::map<std::string, std::vector<std::string>> reservations() = 0;

  // Node state changes, with the reason Slurm shows.
  virtual void set_node_fail(const std::string& node, const std::string& reason) = 0;
  // DOWN: Slurm stops waiting for the node (e.g. for a requeued job's epilog).
  virtual void set_node_down(const std::string& node, const std::string& reason) = 0;
  // DRAIN: no new jobs; running jobs go on.
  virtual void set_node_drain(const std::string& node, const std::string& reason) = 0;
  virtual void resume_node(const std::string& node) = 0;
  // Back to IDLE from DRAIN at once (no wait for the node's next ping).
  virtual void undrain_node(const std::string& node) = 0;
  // Power saving: POWER_UP (the node waits for its instance to register,
  // up to ResumeTimeout), POWER_DOWN_ASAP (powered down once no job runs).
  virtual void power_up(const std::string& node) = 0;
  virtual void power_down_asap(const std::string& node) = 0;
  // POWER_DOWN_FORCE: also a node still powering up (an instance that never
  // came); kills its jobs.
  virtual void power_down_force(const std::string& node) = 0;
  // NodeAddr and NodeHostname, which slurmctld hands srun and the slurmds
  // of a CLOUD node's jobs.
  virtual void set_node_address(const std::string& node, const std::string& address,
                                const std::string& hostname) = 0;

  // Shrinks a running job to `nodelist` (its other nodes leave it).
  virtual void shrink_job(std::uint32_t job_id, const std::string& nodelist) = 0;
  // The nodes of step job.step, or nothing if Slurm no longer lists it.
  virtual std::optional<std::string> step_nodes(std::uint32_t job_id, std::uint32_t step_id) = 0;
  // Whether step job.step still exists (running or cleaning up).
  virtual bool step_exists(std::uint32_t job_id, std::uint32_t step_id) = 0;
  // Those of `asked` (job, step) that still exist: a few asked one at a
  // time, more in one call for every step.
  virtual std::set<std::pair<std::uint32_t, std::uint32_t>> listed_steps(
      const std::set<std::pair<std::uint32_t, std::uint32_t>>& asked) = 0;
  // SIGKILLs a step; a step already gone is not an error.
  virtual void kill_step(std::uint32_t job_id, std::uint32_t step_id) = 0;
  // Sends `signal` to every task of a step; a step already gone is not an
  // error.
  virtual void signal_step(std::uint32_t job_id, std::uint32_t step_id, int signal) = 0;
  // Whether a slurmstepd of step job.step still runs on one of `nodelist`,
  // asked of their slurmds; nothing when that cannot be told (a node did
  // not answer). A step record a restarted slurmctld recovered may have
  // none left: a cancel does not end such a record.
  virtual std::optional<bool> step_daemons_left(std::uint32_t job_id, std::uint32_t step_id,
                                                const std::string& nodelist) = 0;
  // Requeues a batch job.
  virtual void requeue(std::uint32_t job_id) = 0;
  // Sets a job's AdminComment (root and SlurmUser only).
  virtual void set_admin_comment(std::uint32_t job_id, const std::string& text) = 0;
  // `scontrol reconfigure`; throws SlurmError if slurmctld refuses it.
  virtual void reconfigure() = 0;
  // Whether slurmctld answers a ping now.
  virtual bool ping() = 0;

  // Allocates `node` for the job `job` may absorb (`--dependency=expand:`),
  // as the job's user, in its partition, QOS, account, reservation,
  // licenses and wckey, named `name`;
  // returns the helper's job id (it may still be pending).
  virtual std::uint32_t submit_expand_helper(const JobInfo& job, const std::string& node,
                                             const std::string& name) = 0;
  // Moves a running helper's nodes into the job it expands; throws
  // HelperUnlinked when the helper no longer knows that job.
  virtual void merge_expand_helper(std::uint32_t helper_id, std::uint32_t job_id) = 0;
  // Pending or running jobs of `owner` named `name` (another user's job of
  // that name is never one of the controller's helpers).
  virtual std::vector<std::uint32_t> live_jobs_named(const std::string& name, uid_t owner) = 0;
  // Cancels a job; one already gone is fine.
  virtual void cancel_job(std::uint32_t job_id) = 0;
};

}  // namespace ar::slurm
