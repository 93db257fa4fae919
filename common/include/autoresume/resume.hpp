#pragma once
// The resume policy, free of Slurm: verdicts and their exit statuses, when a
// node counts as failed for a protected step, the backoff between relaunches,
// and what a relaunched srun is handed.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ar {

// What the controller tells a protected srun whose step is in trouble or over.
enum class Verdict {
  none,       // nothing wrong seen: keep running (asked while the step runs)
  wait,       // deciding or repairing: ask again
  relaunch,   // the allocation is repaired: run the step again
  requeued,   // the job was requeued: it restarts from its batch script
  give_up,    // no relaunch (the message says why)
  cancelled,  // the user or an admin stopped the job or the step
  no_fault,   // the step ended with no node at fault: srun keeps its status
};

std::string_view to_string(Verdict verdict);
std::optional<Verdict> parse_verdict(std::string_view text);
// A verdict after which srun stops waiting.
bool is_final(Verdict verdict);

// srun's exit status for a final verdict; nothing where srun keeps its own
// (no_fault). relaunch replaces the process and has no status.
inline constexpr int kExitGiveUp = 75;      // EX_TEMPFAIL
inline constexpr int kExitRequeued = 143;   // as if SIGTERMed by the requeue
inline constexpr int kExitCancelled = 130;  // as after Ctrl-C
std::optional<int> verdict_exit_status(Verdict verdict);

// What a node's own agent says of it: nothing (no agent of its current
// instance heard since the controller started, or it said goodbye), alive
// (a heartbeat within two of its intervals and a second) or silent.
enum class AgentView { none, beating, silent };

// One node of a protected step, as the controller sees it.
struct NodeHealth {
  bool known = true;   // slurmctld lists it
  bool in_job = true;  // still in the job's allocation
  bool down = false;
  bool fail = false;
  bool not_responding = false;
  std::string reason;  // Slurm's reason for the node's state
  // Why the controller's probes find its slurmd silent (probe_failures in a
  // row, not disputed by another node's agent); empty while they do not.
  std::string probes_silent;
  AgentView agent = AgentView::none;
  double agent_age = 0;  // seconds since its agent's last heartbeat (beating, silent)
  // Too many nodes under protected steps are suspected at once: a network
  // or slurmctld event, so suspicion alone takes none of them.
  bool crowd = false;
};

// What the controller makes of a node (docs/resume.md, "Evidence before
// action"). Evidence takes it: slurmctld no longer knows it, Slurm set it
// DOWN, a health check marked it FAIL ("Action:Replace <check>: <detail>";
// an admin's bare "Action:Replace" lets running jobs finish first, and such
// a mark's why starts with kCheckFailed). Suspicion (Slurm's not
// responding, the probes' silence) takes it only once its own agent is
// silent too, or where no agent runs on it; never while its agent beats or
// while a crowd is suspected. A node that left the job is a fault only when
// Slurm shows it DOWN or FAIL, or it is suspected as above; otherwise the
// job was shrunk under the step, which is no node's fault.
struct NodeLook {
  std::optional<std::string> fault;    // taken, and why
  std::optional<std::string> suspect;  // suspected and not taken: why, and why not
};
NodeLook look_at(const NodeHealth& node);
inline constexpr std::string_view kCheckFailed = "a health check failed: ";

// Whether `silent` of the `heard` nodes falling silent at once is more
// likely the controller's own network than the nodes: at least two, and
// more than `max_percent` of those heard. Then no node is marked.
bool silent_crowd(std::size_t silent, std::size_t heard, unsigned max_percent);

// The wait before relaunch number `next_attempt` (1 for the first): none for
// the first, then base, 2*base, 4*base... up to cap.
std::chrono::seconds relaunch_backoff(std::uint32_t next_attempt, std::chrono::seconds base,
                                      std::chrono::seconds cap);

// One attempt of a run, for its relaunch budget: how long ago it started
// (for attempt >= 1: its relaunch) and how long it ran before its fault.
struct AttemptTimes {
  std::uint32_t attempt = 0;
  std::chrono::milliseconds since_start{0};
  std::chrono::milliseconds ran{0};
  // It passed the highest training step of the attempts before it
  // (progress.hpp): it ran healthy, however short.
  bool progressed = false;
};

// Where a run stands before its next relaunch.
struct RelaunchBudget {
  // Relaunches that count against max_attempts: within the window and
  // after the last attempt that ran healthy.
  std::uint32_t in_window = 0;
  // The next relaunch's place in its streak of attempts that did not run
  // healthy (1: the first after a healthy run), which relaunch_backoff takes.
  std::uint32_t streak = 1;
};

// The budget of a run whose attempts are `attempts` (oldest first; the last
// is the one that failed now). An attempt that ran at least `healthy_after`
// (0: none does), or that progressed, ends the streak: the relaunches up to it count neither for
// the budget nor for the backoff. Of those after it, the budget counts the
// ones that started within `window`. Relaunch while in_window < max_attempts.
RelaunchBudget relaunch_budget(const std::vector<AttemptTimes>& attempts,
                               std::chrono::milliseconds window,
                               std::chrono::milliseconds healthy_after);

// Handed from a relaunching srun to the srun it executes, in the environment
// variable kRelaunchVariable (removed again before the tasks start).
inline constexpr const char* kRelaunchVariable = "AUTO_RESUME_RELAUNCH";
struct RelaunchMarker {
  std::string run_id;
  std::uint32_t attempt = 0;
  bool own_master_port = false;  // MASTER_PORT was set by the plugin, not the user

  std::string encode() const;
  // Nothing for a malformed value.
  static std::optional<RelaunchMarker> decode(std::string_view text);
};

// srun's arguments for a relaunch: the same, with output files opened in
// append mode so that the earlier attempts' output stays, and --overlap:
// when a step's first node dies, Slurm 22.05 keeps the killed step's record
// (and its CPUs) on the surviving nodes for minutes, as their completion
// messages are routed through the dead node.
//
// The relaunch runs on the repaired allocation, which srun is handed in
// SLURM_JOB_NODELIST and SLURM_JOB_NUM_NODES; srun's node options would
// override it. So -w/--nodelist, -F/--nodefile and -x/--exclude are
// dropped (they name the old allocation's nodes: a failed one, or one that
// may be its replacement), and --nodes=`step_nodes` (the nodes the step ran
// on; 0: unknown) takes their place unless -N/--nodes was given, so that
// the step keeps its size and does not spread over the whole allocation.
// -N and -n stay as given: the repair gives the step back as many nodes as
// it had, unless the controller says how many it runs on (`resize`, the
// verdict's step_nodes: the step went on on fewer nodes, or on some of the
// job's spares). Then --nodes=`resize` takes the place of -N/--nodes as
// well. Only srun's own options are read (parse_srun_argv), never the
// program's arguments.
// A step on fewer nodes than before (`resize` below `step_nodes`; 0 is
// unknown, and no shrink) loses -n/--ntasks as well: its tasks follow from
// the nodes (resized_tasks).
std::vector<std::string> relaunch_argv(const std::vector<std::string>& argv,
                                       std::uint32_t step_nodes, std::uint32_t resize = 0);

// The node options relaunch_argv drops from `argv` (with `resize`, -N
// too, and -n when the step shrinks), each as one word for a message
// ("-w node[1-2]", "--exclude=node3"); none when there are none.
std::vector<std::string> dropped_node_options(const std::vector<std::string>& argv,
                                              std::uint32_t resize = 0,
                                              std::uint32_t step_nodes = 0);

// The task count of a step of `tasks` tasks on `nodes` nodes, relaunched on
// `resize` nodes: as many per node as before when they were spread evenly;
// nothing when they were not (srun then places them by its own defaults,
// one per node or --ntasks-per-node).
std::optional<std::uint32_t> resized_tasks(std::uint32_t tasks, std::uint32_t nodes,
                                           std::uint32_t resize);

// A job's AdminComment (`scontrol show job`, `sacct -o AdminComment`) with
// one more entry of auto-resume's story: the admin's own text is kept
// before kStoryMarker, the story after it, its entries separated by "; ",
// the oldest dropped (an "..." left) while it is longer than
// kMaxStoryBytes.
inline constexpr std::string_view kStoryMarker = "[auto-resume] ";
inline constexpr std::size_t kMaxStoryBytes = 1000;
std::string with_story(std::string_view comment, std::string_view entry);

}  // namespace ar
