#pragma once
// The controller's durable state in SQLite (WAL): every accepted step and
// every event is committed before the request that caused it is answered,
// so a controller killed at any moment restarts with all of it.

#include <sqlite3.h>
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "autoresume/connect.hpp"
#include "autoresume/protocol.hpp"
#include "autoresume/states.hpp"
#include "clock.hpp"
#include "provision/instances.hpp"
#include "store/repair_facts.hpp"

namespace ar {

struct StoredStep {
  proto::StepRegistration step;
  uid_t uid = 0;
  StepState state = StepState::registered;
  std::int64_t created_at = 0;            // unix seconds
  std::int64_t ended_at = 0;              // when srun reported the end; 0 while it runs
  Verdict verdict = Verdict::none;        // set once decided
  std::string message;                    // the verdict's explanation, for srun's stderr
  RepairPhase phase = RepairPhase::none;  // how far a repair got (resumed after a restart)
  RepairFacts repair;                     // the repair's facts (failed nodes, helper jobs...)
  std::int64_t row = 0;                   // the store's row id: a status page's cursor
  // created_at and ended_at with the boot time (clock.hpp: Stamp); a boot
  // id is empty in a record stored before schema 5 (then wall time counts).
  std::int64_t created_boot_ms = 0;
  std::string created_boot_id{};
  std::int64_t ended_boot_ms = 0;
  std::string ended_boot_id{};

  // Its run and attempt, "RUN#ATTEMPT": the step's name in log lines and
  // the key of what is kept for it in memory (exit reports, verdict asks).
  std::string key() const { return step.run_id + "#" + std::to_string(step.attempt); }
  Stamp created() const { return {created_at, created_boot_ms, created_boot_id}; }
  Stamp ended() const { return {ended_at, ended_boot_ms, ended_boot_id}; }
  void set_ended(const Stamp& at) {
    ended_at = at.wall;
    ended_boot_ms = at.boot_ms;
    ended_boot_id = at.boot_id;
  }
};

// An event to record with a state change.
struct EventSpec {
  EventKind kind;
  std::string detail;
};

struct Event {
  std::int64_t id = 0;
  std::int64_t at = 0;  // unix seconds
  std::uint32_t job_id = 0;
  std::string run_id{};
  std::string kind{};
  std::string detail{};
  std::string node{};          // set for the events of a node (marks, replacements)
  std::int64_t uid = 0;        // on whose behalf: a step's owner, a replacement's requester, 0
  std::string group{};         // a node group's events (continuous provisioning)
  std::string level = "info";  // info, warning or error
  // What the event is about: cluster, group, instance, node or job
  // (stored for provisioning's events, derived for the others).
  std::string resource{};
};

// An event of continuous provisioning (provision.hpp's, by name).
struct ClusterEvent {
  std::string kind;
  std::string level;     // info, warning, error
  std::string resource;  // cluster, group, instance, node
  std::string group;
  std::string node;
  std::string detail;
};

struct NodeRepair {
  std::string node;
  NodeRepairState state = NodeRepairState::waiting;
  std::string reason;  // why the node is replaced (its Slurm reason)
  RepairMode mode = RepairMode::wait;
  std::int64_t instance = 0;  // the slurmd start time of the instance replaced
  std::int64_t attempts = 0;  // provider calls so far
  std::int64_t next_try = 0;  // unix seconds: when the provider may be asked again
  std::int64_t started_at = 0;
  std::string detail;              // the last provider failure, kept for the events and status
  std::int64_t called_at = 0;      // unix seconds: when the provider was last called
  std::int64_t requested_by = -1;  // the uid whose `replace` asked for it; -1: the node's mark
  // started_at and next_try with the boot time (as StoredStep's).
  std::int64_t started_boot_ms = 0;
  std::string started_boot_id{};
  std::int64_t next_try_boot_ms = 0;
  std::string next_try_boot_id{};

  Stamp started() const { return {started_at, started_boot_ms, started_boot_id}; }
  Stamp next() const { return {next_try, next_try_boot_ms, next_try_boot_id}; }
  void set_started(const Stamp& at) {
    started_at = at.wall;
    started_boot_ms = at.boot_ms;
    started_boot_id = at.boot_id;
  }
  void set_next(const Stamp& at) {
    next_try = at.wall;
    next_try_boot_ms = at.boot_ms;
    next_try_boot_id = at.boot_id;
  }
};

// How far users may grow the store (docs/security.md, "Bounds"): the steps
// one job and one user may register within an hour, and the bytes the
// store's data may take (0: no bound). A relaunch (the attempt after one
// decided `relaunch`) is counted but never refused: the relaunch budget
// bounds those.
struct StoreCaps {
  unsigned job_steps_per_hour = 0;
  unsigned user_steps_per_hour = 0;
  std::uint64_t max_bytes = 0;
};

class Store {
 public:
  // A step row's parsed argv and repair facts, with the texts they were
  // parsed from (see parsed_rows_).
  struct ParsedRow {
    std::string argv_text;
    std::vector<std::string> argv;
    std::string repair_text;
    RepairFacts repair;
  };
  using ParsedRows = std::map<std::int64_t, ParsedRow>;
  using Caps = StoreCaps;
  // Opens (creating if needed) DIR/auto-resume.db. Throws std::runtime_error.
  // `clock` stamps what is stored.
  explicit Store(const std::filesystem::path& state_dir, const Clock& clock = system_clock(),
                 Caps caps = {});
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  enum class Insert { created, duplicate, busy, capped };
  // Records a step with state "registered" and a "registered" event, in one
  // transaction. The same (run_id, attempt) again is a duplicate and changes
  // nothing.
  // Another run of the same job that is not decided yet makes it `busy`
  // (one protected launch per job at a time), and is copied to `blocking`.
  // A registration past one of the caps, but a relaunch, is `capped`, with
  // why in `why`
  // and a `step_refused` event (once an hour for each job, user, or the
  // store's size: refusals must not grow the store themselves).
  Insert register_step(const proto::StepRegistration& step, uid_t uid,
                       StoredStep* blocking = nullptr, std::string* why = nullptr);
  // The bytes the store's data takes (its pages in use: pruning frees them).
  std::uint64_t used_bytes();

  std::optional<StoredStep> find(const std::string& run_id, std::uint32_t attempt);
  // Steps not yet decided, oldest first.
  std::vector<StoredStep> active_steps();
  // Every step of a job, oldest first.
  std::vector<StoredStep> job_steps(std::uint32_t job_id);
  // Writes the step's state, verdict, message, phase, repair and ended_at,
  // with `event` if given, in one transaction. A decided step is final: it
  // is left alone and save returns false (whoever decides first wins).
  bool save(const StoredStep& step, const std::optional<EventSpec>& event);
  // registered -> ended, with its event; false if the step is past
  // `registered` already (a repair or a verdict is not overwritten).
  bool mark_ended(const StoredStep& step, const Stamp& at, const EventSpec& event);
  // Decides a step `cancelled` with `message`, leaving its repair facts as
  // they are; false if it was decided already.
  bool cancel(const StoredStep& step, const std::string& message);
  // Decides an `ended` step no_fault with `message`, with its event; false
  // if the step is not `ended` (still running, under repair, or decided).
  bool no_fault_if_ended(const StoredStep& step, const std::string& message);
  // Records an event of a step.
  void add_event(const StoredStep& step, const EventSpec& event);
  // The uid that registered run_id first, if any.
  std::optional<uid_t> run_owner(const std::string& run_id);
  // Steps, newest first; only those of `uid` unless it is nullopt, of
  // `job_id` if given, with a row below `before` if given; `limit` at most.
  std::vector<StoredStep> steps(std::optional<uid_t> uid, std::optional<std::uint32_t> job_id = {},
                                std::optional<std::int64_t> before = {},
                                std::uint32_t limit = 0xffffffffU);
  // Events from `since` (unix seconds) on, oldest first; only those of
  // `uid` unless it is nullopt, with an id above `after`, of `filter`'s
  // group and level or graver; `limit` at most.
  struct EventFilter {
    std::string group;  // empty: any
    std::string level;  // info, warning, error; empty: any
  };
  std::vector<Event> events(std::optional<uid_t> uid, std::int64_t since, std::int64_t after = 0,
                            std::uint32_t limit = 0xffffffffU, const EventFilter& filter = {});
  // Forgets decided steps last changed before `cutoff` (unix seconds), and
  // events from before it; returns how many rows went.
  std::size_t prune(std::int64_t cutoff);
  // An event's detail is cut to this many bytes when stored.
  static constexpr std::size_t kMaxDetailBytes = 4096;

  // Node replacements, and the events of nodes (seen by privileged callers).
  std::optional<NodeRepair> node_repair(const std::string& node);
  std::vector<NodeRepair> node_repairs();
  // Inserts or updates the node's replacement, with its event, in one transaction.
  void save_node_repair(const NodeRepair& repair, const EventSpec& event);
  // Inserts the node's replacement with its event unless the node has one
  // already; false (and nothing written) then.
  bool add_node_repair(const NodeRepair& repair, const EventSpec& event);
  // The replacement is over (done, or given up to an admin), with its event.
  void remove_node_repair(const std::string& node, const EventSpec& event);
  void add_node_event(const std::string& node, const EventSpec& event, std::uint32_t job_id = 0);

  // The guard rails (controller/gate.hpp): flags kept across restarts
  // (a pause, a tripped circuit breaker: name -> JSON), and the actions the
  // breaker counts (node marks, replacements).
  std::map<std::string, proto::json> guard_flags();
  // Sets each flag named in `changes` to its value (nullopt: clears it),
  // with the controller's event `event`, in one transaction.
  using GuardChanges = std::map<std::string, std::optional<proto::json>>;
  void set_guard_flags(const GuardChanges& changes, const EventSpec& event);
  // Records one action of `kind` per node in `nodes`, now; actions older
  // than a day are forgotten.
  void count_actions(const std::string& kind, const std::vector<std::string>& nodes);
  // How many actions of `kind` were recorded at `since` (unix seconds) or later.
  std::uint32_t actions_since(const std::string& kind, std::int64_t since);
  // The last action of `kind` recorded for each of `nodes` no longer counts
  // (its repair succeeded).
  void settle_actions(const std::string& kind, const std::vector<std::string>& nodes);
  // Forgets every counted action (the breaker's counts start again).
  void forget_actions();

  // Called with each event once its transaction committed (without its id
  // and time), and whether it is a node's: the metrics count them, the
  // notifications go out. Set before the store is shared. It runs with the
  // store locked: it must neither call the store nor wait.
  using EventHook = std::function<void(const Event& event, bool node_event)>;
  void on_event(EventHook hook) { hook_ = std::move(hook); }
  // How many steps are kept in each state (by the state's name).
  std::map<std::string, std::int64_t> step_counts();

  // Continuous provisioning: its whole state (provision.hpp's JSON; nothing
  // before the first save), saved with its events and the instances'
  // metering records (upserted by token) in one transaction.
  std::optional<proto::json> provision_state();
  void save_provision(const proto::json& state, const std::vector<ClusterEvent>& events,
                      const std::vector<InstanceRecord>& records);
  // Metering records of `group` (every group if empty), oldest first; those
  // that ended before `since` (unix seconds) are left out.
  std::vector<InstanceRecord> instance_records(const std::string& group = {},
                                               std::int64_t since = 0);

 private:
  // state_dir made ready (prepare_state_dir) and locked (flock on
  // state_dir/lock, which holds the holder's pid) for the store's life:
  // two controllers on one state would undo each other's repairs.
  class StateLock {
   public:
    explicit StateLock(const std::filesystem::path& state_dir);

   private:
    net::Fd fd_;  // closed, so unlocked, with the store
  };

  const Clock& clock_;
  const Caps caps_;
  StateLock lock_;
  sqlite3* db_ = nullptr;
  // When a refusal of each cause ("job 12", "uid 1000", "store") was last
  // recorded as an event (unix seconds; under mutex_).
  std::map<std::string, std::int64_t> refusals_said_;
  // Why `step` is past a cap, if it is (under mutex_).
  std::optional<std::pair<std::string, std::string>> over_cap(const proto::StepRegistration& step,
                                                              uid_t uid, std::int64_t now);
  std::uint64_t used_bytes_locked();
  // One connection, used by the server's workers and the resume engine.
  std::mutex mutex_;
  // Its prepared statements not in use, by SQL text (under mutex_).
  std::unordered_multimap<std::string, sqlite3_stmt*> idle_statements_;
  // The argv and repair facts active_steps parsed, by row, with the texts
  // they were parsed from (a look reads every active step; a row whose
  // texts did not change is not parsed again). Under mutex_.
  ParsedRows parsed_rows_;
  // active_steps' last answer, and the connection's count of changed rows
  // then (sqlite3_total_changes64): while the count stands, so do the steps.
  std::optional<std::vector<StoredStep>> active_read_;
  std::int64_t active_changes_ = 0;
  EventHook hook_;
  // The events of the transaction under way, for hook_ once it commits.
  std::vector<std::pair<Event, bool>> uncommitted_;
  // Keeps an event inserted by the transaction under way for hook_.
  void note(Event event, bool node_event);
  void exec(const char* sql);
  void migrate();
  std::optional<StoredStep> find_locked(const std::string& run_id, std::uint32_t attempt);
  // Whether `step`'s stored row is in a state `from` takes, moved to `to`
  // through the one transition function (move_to: a move its table does not
  // hold throws); false when someone moved it elsewhere first. Under mutex_.
  bool may_move_stored(const StoredStep& step, bool (*from)(StepState), StepState to);
  // Decides `step` with `verdict` and `event`'s detail as its message,
  // leaving its repair facts as they are, with the event: only from
  // `ended` if `ended_only`, else from any state but decided. False if its
  // state is not one of those.
  bool decide_stored(const StoredStep& step, bool ended_only, Verdict verdict,
                     const EventSpec& event);
  void insert_event(std::int64_t at, const StoredStep& step, const EventSpec& event);
  // A node's events are on behalf of uid `uid` (0: the controller's own).
  void insert_node_event(std::int64_t at, const std::string& node, std::uint32_t job_id,
                         const EventSpec& event, std::int64_t uid = 0);
  static std::int64_t requester(const NodeRepair& repair) {
    return repair.requested_by >= 0 ? repair.requested_by : 0;
  }
  template <typename Body>
  auto transaction(Body&& body);
};

}  // namespace ar
