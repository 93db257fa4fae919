#pragma once
// The one place that talks to libslurm. Every call blocks for up to Slurm's
// MessageTimeout: call them from a worker thread, never from the server's
// io thread.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "expand_helper.hpp"
#include "hostlist.hpp"  // expand_hostlist, compress_hostlist
#include "slurm_api.hpp"

namespace ar::slurm {

// Every partition, with its nodes.
std::map<std::string, std::vector<std::string>> partitions();
// The reservations active now, with their nodes.
std::map<std::string, std::vector<std::string>> reservations();

// Reads slurm.conf ($SLURM_CONF or the default); call once at start-up.
void init();

// The job as slurmctld knows it, or nothing if it does not (anymore).
// Throws SlurmError when slurmctld cannot be asked.
std::optional<JobInfo> load_job(std::uint32_t job_id);
// Those of `ids` among the jobs of uid `owner`, in one call; `listed`:
// how many jobs the owner has in all.
std::map<std::uint32_t, JobInfo> load_user_jobs(const std::set<std::uint32_t>& ids, uid_t owner,
                                                std::size_t& listed);

// The uid of SlurmUser from slurmctld's configuration.
uid_t slurm_user_uid();
// MessageTimeout, in seconds, from slurmctld's configuration.
std::uint32_t message_timeout();

// All nodes; asks slurmctld for changes since the last call only, so an
// unchanged cluster costs almost nothing. Not thread-safe: one per thread.
class NodeWatcher {
 public:
  NodeWatcher() = default;
  ~NodeWatcher();
  NodeWatcher(const NodeWatcher&) = delete;
  NodeWatcher& operator=(const NodeWatcher&) = delete;
  const std::vector<NodeInfo>& load();

 private:
  void* last_ = nullptr;  // node_info_msg_t*
  std::vector<NodeInfo> nodes_;
};

// The node's NodeAddr as slurmctld has it (a name or a numeric address).
std::string node_address(const std::string& node);

// Node state changes, with the reason Slurm shows.
void set_node_fail(const std::string& node, const std::string& reason);
// DOWN: Slurm stops waiting for the node (e.g. for a requeued job's epilog).
void set_node_down(const std::string& node, const std::string& reason);
void resume_node(const std::string& node);
// Back to IDLE from DRAIN at once. Unlike resume_node, which makes slurmctld
// wait for the node's next ping (and a ping round waits MessageTimeout for
// any dead node), the node can be allocated right away.
void undrain_node(const std::string& node);
void power_up(const std::string& node);
void power_down_asap(const std::string& node);
void power_down_force(const std::string& node);
void set_node_address(const std::string& node, const std::string& address,
                      const std::string& hostname);

// Shrinks a running job to `nodelist` (its other nodes leave it).
void shrink_job(std::uint32_t job_id, const std::string& nodelist);
// The nodes of step job.step, or nothing if Slurm no longer lists it.
std::optional<std::string> step_nodes(std::uint32_t job_id, std::uint32_t step_id);
// Whether step job.step still exists (running or cleaning up).
bool step_exists(std::uint32_t job_id, std::uint32_t step_id);
// Those of `asked` (job, step) that still exist, from one list of every
// step; `listed`: how many steps slurmctld has in all.
std::set<std::pair<std::uint32_t, std::uint32_t>> all_steps_listed(
    const std::set<std::pair<std::uint32_t, std::uint32_t>>& asked, std::size_t& listed);
// SIGKILLs a step; a step already gone is not an error.
void kill_step(std::uint32_t job_id, std::uint32_t step_id);
void signal_step(std::uint32_t job_id, std::uint32_t step_id, int signal);
// Whether a slurmstepd of step job.step runs on one of `nodelist` (their
// slurmds answer REQUEST_JOB_STEP_PIDS); nothing when that cannot be told.
std::optional<bool> step_daemons_left(std::uint32_t job_id, std::uint32_t step_id,
                                      const std::string& nodelist);
// Requeues a batch job.
void requeue(std::uint32_t job_id);
// Sets a job's AdminComment.
void set_admin_comment(std::uint32_t job_id, const std::string& text);
// `scontrol reconfigure`: slurmctld and the slurmds read their files again.
void reconfigure();
// Whether the primary slurmctld answers a ping.
bool ping();

// Allocates what `request` asks for (an expand helper: expand_helper.hpp)
// for `uid` and `gid`; returns the helper's job id (it may still be
// pending). auto-resume-submit calls it as the job's owner, for itself; a
// controller that runs as SlurmUser, not root, calls it for the owner.
std::uint32_t allocate_expand_helper(const ExpandRequest& request, uid_t uid, gid_t gid);
// Moves a running helper's nodes into the job it expands (NumNodes=0 on the
// helper); that alone adds them to the job.
void merge_expand_helper(std::uint32_t helper_id, std::uint32_t job_id);
// Pending or running jobs named `name`.
std::vector<std::uint32_t> live_jobs_named(const std::string& name, uid_t owner);
// Cancels a job (a helper that is no longer wanted); one already gone is fine.
void cancel_job(std::uint32_t job_id);

// DRAIN with a reason (a drain-only health check's "Action:Drain <check>:
// ..."): no new jobs; not a node fault, so running jobs go on.
void set_node_drain(const std::string& node, const std::string& reason);

}  // namespace ar::slurm
