#pragma once
// Continuous provisioning's decisions, free of Slurm and of the provider:
// the state of every group and slot, a pure planning function that moves
// each group toward its desired count (`plan`), the bookkeeping of each
// action once recorded (`record`), and what each result from the provider
// or from Slurm does to the state (`on_created`, `on_registered`,
// `on_terminated`). The controller keeps this state in its store, runs
// `plan` on each tick, records every action before it takes it
// (write-ahead), and feeds the results back. docs/provisioning.md tells the
// rules; test/unit/provision_test.cpp holds their tables.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "provision/groups.hpp"

namespace ar::provision {

// Wall-clock time, milliseconds since the Unix epoch: deadlines (the
// MinCount timeout is hours) outlive a controller restart.
using Millis = std::chrono::milliseconds;

// What stands in one slot (one node name) of a group.
enum class SlotPhase {
  empty,        // no instance: the node is not in the cluster (Slurm: FUTURE)
  creating,     // the provider's create runs
  joining,      // created; its slurmd has not registered yet
  waiting,      // ready, held drained until the group has min_count ready
  in_service,   // released for jobs
  draining,     // leaving (see Leave): drained, its jobs finish first
  terminating,  // the provider's terminate runs
};
std::string_view to_string(SlotPhase phase);

// Why a slot's instance leaves. `scale_in` and `rollback` empty the slot;
// the others create the same node again as a new instance.
enum class Leave { none, scale_in, rollback, replace, roll, bootstrap, register_timeout };
std::string_view to_string(Leave leave);

// How the provider's create ended, by its exit status (sysexits names).
enum class CreateOutcome {
  ok,         // 0
  retryable,  // 75 (EX_TEMPFAIL), any other status, a signal, a timeout
  capacity,   // 69 (EX_UNAVAILABLE): no capacity for the group now
  bootstrap,  // 65 (EX_DATAERR): the lifecycle script failed
  config,     // 78 (EX_CONFIG): the group's configuration is wrong
};
CreateOutcome create_outcome(int exit_status, bool signalled_or_timed_out);

// Where a group stands, as `auto-resume group status` shows it.
enum class GroupStatus { creating, updating, in_service, degraded, failed, deleting };
std::string_view to_string(GroupStatus status);

struct Slot {
  unsigned index = 0;  // 1..max_count; the node is GroupSpec::node(index)
  SlotPhase phase = SlotPhase::empty;
  Leave leave = Leave::none;    // set while the instance leaves (any phase)
  unsigned attempt = 0;         // creates tried for this slot, ever
  std::uint64_t operation = 0;  // the operation that launched the instance
  Millis since{0};              // when `phase` began
  unsigned failures = 0;        // retryable failed creates in a row
  Millis retry_at{0};           // no create of this slot before
  bool roll = false;            // to be replaced by the group's roll
  std::string instance_id;      // the provider's id of the instance in the slot
  // Seen in Slurm on the last look (compute groups; false otherwise).
  bool busy = false;       // jobs run on the node
  bool unhealthy = false;  // DOWN, FAIL or not responding
  bool replace = false;    // marked Action:Replace
  bool kept = false;       // drained by someone else, a spare or reserved: never taken
};

// A change of a group's desired state: a file change, `group apply` or
// `group set`. The newest one on a group supersedes the older.
struct Operation {
  std::uint64_t id = 0;
  unsigned count = 0;
  unsigned min_count = 0;
  unsigned previous_count = 0;  // the count a rollback returns to
  Millis started{0};            // the MinCount deadline runs from here
  bool min_reached = false;     // min_count ready once: no more holding
  bool rollback = false;        // rolled back to previous_count
};

struct Group {
  GroupSpec spec;
  Operation operation;
  unsigned stable_count = 0;  // the count last reached in service
  bool ever_in_service = false;
  GroupStatus status = GroupStatus::creating;
  Millis capacity_until{0};  // no create before (a capacity error)
  // Since a capacity error: ends when a create asked for after it works.
  bool capacity_episode = false;
  Millis capacity_since{0};
  unsigned bootstrap_failures = 0;  // in a row, with no success between
  bool stopped = false;             // too many bootstrap failures: until `group retry`
  bool config_failed = false;       // the provider said 78: until the file changes
  unsigned roll_batch = 0;          // instances replaced at once by a roll (0: none)
  std::vector<Slot> slots;          // max_count of them, index i+1 at i
};

// A group's slots by how far they are: in service, starting (creating,
// joining, waiting) and leaving (draining, terminating); the rest are empty.
struct SlotCounts {
  unsigned in_service = 0;
  unsigned starting = 0;
  unsigned leaving = 0;
  unsigned live() const { return in_service + starting + leaving; }  // with an instance
};
SlotCounts count_slots(const Group& group);

struct Settings {
  unsigned max_parallel_creates = 16;  // provider creates in flight, all groups
  Millis retry_backoff{10'000};        // after one retryable failure; doubled
  Millis max_retry_backoff{600'000};
  unsigned alert_after = 5;  // retryable failures in a row before an alert
  Millis capacity_backoff{300'000};
  unsigned max_bootstrap_failures = 3;
  Millis min_count_timeout{3 * 3600 * 1000};
  Millis register_timeout{900'000};
};

enum class ActionKind {
  create,     // the provider's create of the slot (its node drained first)
  drain,      // the slot's instance leaves: drain it (jobs finish)
  terminate,  // the provider's terminate of the slot's instance
  release,    // resume the node: it takes jobs
  rollback,   // the group's operation goes back to its previous count
};
std::string_view to_string(ActionKind kind);

struct Action {
  ActionKind kind;
  std::string group;
  unsigned slot = 0;          // 0 for rollback
  Leave leave = Leave::none;  // drain: why
  bool operator==(const Action&) const = default;
};

// What happened, for the cluster's events (docs/provisioning.md lists them).
enum class EventKind {
  operation_started,
  group_status,
  instance_created,
  instance_ready,
  instance_released,
  instance_terminated,
  create_failed,
  create_failing,
  capacity_unavailable,
  lifecycle_failed,
  group_stopped,
  group_failed,
  min_count_reached,
  rollback_started,
  rollback_completed,
  terminate_failed,
};
std::string_view to_string(EventKind kind);

enum class Level { info, warning, error };
std::string_view to_string(Level level);

struct Event {
  EventKind kind;
  Level level = Level::info;
  std::string group;
  std::string node;  // empty for a group's event
  std::string text;
};

struct Cluster {
  std::vector<Group> groups;
  bool slurmctld_up = false;
  unsigned next_group = 0;  // round-robin: the group served first next tick
  std::uint64_t next_operation = 1;
};

struct Plan {
  std::vector<Action> actions;
  std::vector<Event> events;
};

// The idempotency token of a create: GROUP:NODE:ATTEMPT. The provider's
// `list` returns it, so that a repeated create never pays for two
// instances in one slot.
std::string token(const Group& group, const Slot& slot);

// The group named `name`, or nullptr.
Group* find_group(Cluster& cluster, std::string_view name);
const Group* find_group(const Cluster& cluster, std::string_view name);

// A group as its file says, with max_count empty slots and no operation.
Group new_group(const GroupSpec& spec);

// A new operation on `group` (count, min_count): supersedes the one before
// and restarts the MinCount deadline. Throws ConfigError when count is
// above max_count (that needs a new slurm.conf).
Event start_operation(Cluster& cluster, Group& group, unsigned count, unsigned min_count,
                      Millis now);

// The actions that move every group toward its operation's count, and the
// events of what the plan found (a MinCount reached, a rollback). Pure.
Plan plan(const Cluster& cluster, Millis now, const Settings& settings);

// The state once `action` is recorded (before it is carried out).
void record(Cluster& cluster, const Action& action, Millis now);

// Results. Each returns the events it makes.
std::vector<Event> on_created(Cluster& cluster, std::string_view group, unsigned slot,
                              CreateOutcome outcome, std::string_view detail, Millis now,
                              const Settings& settings);
std::vector<Event> on_registered(Cluster& cluster, std::string_view group, unsigned slot,
                                 Millis now);
std::vector<Event> on_terminated(Cluster& cluster, std::string_view group, unsigned slot, bool ok,
                                 Millis now, const Settings& settings);

// Derives each group's status from its slots; an event per change.
std::vector<Event> update_status(Cluster& cluster);

// `group retry`: a stopped (or failed) group creates again.
void retry(Group& group);

// `group roll NAME --batch N`: every in-service instance is replaced, at
// most N at a time, idle ones first.
void roll(Group& group, unsigned batch);

}  // namespace ar::provision

#include <nlohmann/json.hpp>

namespace ar::provision {

// The whole state, as the controller's store keeps it (the group specs
// too: a group whose file is gone is still known). from_json throws
// std::invalid_argument on a record it cannot read.
nlohmann::json to_json(const Cluster& cluster);
Cluster cluster_from_json(const nlohmann::json& state);

}  // namespace ar::provision
