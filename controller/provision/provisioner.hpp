#pragma once
// Continuous provisioning in the controller (docs/provisioning.md): keeps
// every node group at the count its file in groups_dir asks for. The
// decisions are provision.hpp's pure plan; this class observes Slurm, runs
// the provider program (contract v2: create, terminate) on threads of its
// own, drives each group's CLOUD slots through power saving, and records
// every action in the store before it is taken.
//
// A slot's life in Slurm (measured on 22.05, docs/provisioning.md):
//   create:    drain (write-ahead), POWER_UP; once POWERING_UP shows, the
//              provider's create; its node_addr= becomes the node's NodeAddr
//   joining:   the slurmd registers (drained): the Reason is set again
//   release:   state=resume
//   leave:     drain; once no job runs, the provider's terminate, then
//              POWER_DOWN_ASAP; Slurm clears the drain as the slot powers
//              down, so it is drained again while POWERING_DOWN; the slot
//              is empty once hidden.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "autoresume/daemon_config.hpp"
#include "autoresume/process.hpp"
#include "calls.hpp"
#include "clock.hpp"
#include "gate.hpp"
#include "provision/instances.hpp"
#include "provision/provision.hpp"
#include "provision/slurm_include.hpp"
#include "said_once.hpp"
#include "slurm_api.hpp"
#include "store/store.hpp"

namespace ar {

class Provisioner {
 public:
  // How long a NodeAddr or resume that slurmctld refuses is made again
  // (Write::again).
  static constexpr std::chrono::seconds kWriteRetryFor{300};

  using NodeMap = std::map<std::string, const slurm::NodeInfo*>;

  // The reasons its drains carry: every one starts with kReasonPrefix.
  static constexpr const char* kReasonPrefix = "auto-resume provisioning: ";

  // Reads the stored state (a restarted controller goes on from it).
  // With `gate` (the guard rails, docs/guard.md), nothing is done while the
  // controller holds back (observe mode, a pause, the breaker): what would
  // be is said once.
  Provisioner(Store& store, const DaemonConfig& config, slurm::SlurmApi& slurm, const Clock& clock,
              CommandRunner& runner, Gate* gate = nullptr);
  ~Provisioner();
  Provisioner(const Provisioner&) = delete;
  Provisioner& operator=(const Provisioner&) = delete;

  // The engine thread's turn, with the nodes loaded from slurmctld by a
  // read that began at `nodes_read_at`; `repairing`: the resume engine
  // repairs a step now (no slurmctld restart then). An operation started
  // (a group file changed, an admin's command) is planned on nodes read
  // after it began (busy() asks the engine for that read): a list read
  // before would take a busy slot for an idle one.
  void tick(const NodeMap& nodes, bool repairing = false,
            Clock::Steady::time_point nodes_read_at = Clock::Steady::time_point::max());
  // Whether `node` is a slot of a group (the node keeper leaves those to
  // the provisioner). Engine thread.
  bool owns(const std::string& node) const;
  // The state, for status pages and tests (a copy; any thread).
  provision::Cluster state() const;

  // The admins' commands (server threads; docs/provisioning.md), each an
  // event naming `uid`, saved before the answer. They throw
  // std::invalid_argument naming what is wrong (an unknown group, a count
  // above max_count, a group file in error).
  //
  // `group set`: writes the keys into NAME.conf (the one desired state)
  // and reads the files at once, so that the operation starts now.
  std::string set_group(const std::string& name, std::optional<unsigned> count,
                        std::optional<unsigned> min_count, uid_t uid);
  // `group apply`: reads the group files now.
  std::string apply_groups(uid_t uid);
  // `group retry`: a stopped or failed group creates again, at once.
  std::string retry_group(const std::string& name, uid_t uid);
  // `group roll`: every in-service instance replaced, `batch` at a time.
  std::string roll_group(const std::string& name, unsigned batch, uid_t uid);
  // `group plan`: what the include file would become for the group files
  // as they are now (docs/provisioning.md, "The include file").
  struct IncludePlan {
    std::string path;               // the include file
    std::string change;             // none, reconfigure or restart
    std::vector<std::string> diff;  // "-LINE" and "+LINE"
    std::string error;              // why it cannot be written, if so
  };
  IncludePlan plan_include();
  // The path of the node's last lifecycle log; nullopt if `node` is no
  // group's node, an empty path if it has had no create yet.
  std::optional<std::string> lifecycle_log(const std::string& node) const;

  // Its writes to slurmctld (drains, POWER_UP and POWER_DOWN, NodeAddr,
  // resume, reconfigure) run on threads of their own once started
  // (Engine::start), each node's in order, and are taken at a later tick:
  // a slow slurmctld holds up no look. Until then at once (tests tick by
  // hand). Engine thread.
  void start_calls() { writes_.start(); }
  // Whether every write started has returned, waiting at most `limit`
  // (tests).
  bool calls_settled(std::chrono::milliseconds limit) const { return writes_.wait(limit); }
  // The provider's calls (create, terminate, list) started and not yet
  // returned; a tick takes those that returned (tests).
  std::size_t provider_calls_running() const;
  // Whether a slot's steps are in flight (a provider call, a power-saving
  // step, a node awaited): the engine then reads slurmctld at every look.
  // Not while the controller holds back (nothing moves then).
  bool busy() const {
    if (gate_ != nullptr && gate_->held()) return false;
    std::lock_guard lock(mutex_);
    return !work_.empty() || listing_ || plan_after_.has_value();
  }

 private:
  using Millis = provision::Millis;
  // A provider call in flight, and where the slot's power-saving steps stand.
  enum class Stage { power_up, create, terminate, power_down, hide };
  struct Work {
    Stage stage = Stage::power_up;
    Millis since{0};
    std::future<CommandResult> call;
    bool calling = false;
    bool force = false;    // power_down: POWER_DOWN_FORCE, not _ASAP
    Millis called_at{0};   // create: when its call started
    bool drained = false;  // powered down, hidden and drained again
  };
  // A write to slurmctld: `call` on a thread of its own; `then`, the rest
  // of its stage, on the engine thread once the write is in (not if it
  // failed: the stage tries again from what Slurm shows).
  struct Write {
    std::string what;  // for the log
    std::function<void()> call;
    std::function<void()> then;
    // A write no stage makes again (NodeAddr, resume): made again until it
    // is in, for kWriteRetryFor at most from its first failure (a slot
    // whose resume was given up would stay drained).
    bool again = false;
    Clock::Steady::time_point first_failed{};
  };
  // At most this many writes under way at once.
  static constexpr std::size_t kMaxWrites = 16;
  // Queues a write behind the others of `key` (a node, or kSlurmctld for
  // the reconfigure); with `again`, one that fails is made again as soon as
  // the tick takes its failure, for kWriteRetryFor at most.
  void write(const std::string& key, std::string what, std::function<void()> call,
             std::function<void()> then = {}, bool again = false);
  // Whether `key` has writes queued or under way: its slot's stage waits.
  bool writing(const std::string& key) const { return queued_.contains(key); }
  void start_write(const std::string& key);
  // Takes the write of `key` if it is in: makes a failed one again while
  // it may (`again`), else says it (once); starts the key's next write,
  // runs its `then`.
  void take_write(const std::string& key);
  // Takes every write that is in, and starts those waiting for room.
  void take_writes();
  // Creates abandoned after create_timeout ("TOKEN#CALLED_AT" -> the call,
  // still running): an instance one makes once it returns is terminated.
  struct Abandoned {
    std::string group;
    std::string node;
    std::string token;
    Millis called_at{0};
    std::future<CommandResult> call;
  };
  std::map<std::string, Abandoned> abandoned_;
  std::set<std::string> reaped_;  // "TOKEN INSTANCE" of abandoned creates' instances
  // Gives a hung create up for another try of its slot.
  void abandon(provision::Group& group, provision::Slot& slot, Work& work);
  // Abandoned creates that returned: what they made is terminated.
  void reap_abandoned();

  Millis now() const;
  // Merge mode: the controller writes slurm_conf_include.
  bool merge() const { return !settings_.slurm_conf_include.empty(); }
  std::filesystem::path slurm_conf_path() const;
  // The admin's slurm.conf and what it includes (ours excepted), gres.conf
  // and topology.conf; throws ConfigError naming a file it cannot read.
  // Read again only once one of those files changed (its modification
  // time or size) or appeared: it is asked for at every look.
  include::AdminConf read_admin_conf();
  // The include file's groups for `specs`: the slots each spec asks for,
  // and in the NodeSet the slots already drained (`final`: all of them).
  std::vector<include::IncludeGroup> include_groups(const std::vector<GroupSpec>& specs,
                                                    bool final);
  // Brings the include file toward `specs` the least disruptive way, and
  // returns the groups whose slots, as their spec asks, slurmctld has now.
  std::set<std::string> keep_include(const std::vector<GroupSpec>& specs, bool act);
  // The group takes its file's max_count (its new slots drained first).
  void adopt_slots(provision::Group& group, unsigned max_count, bool act);
  // The slurmctld restart in flight: true once it is over (said).
  bool restart_done();
  // Reads groups_dir; a new group's slots are drained at once if `act`.
  // A group whose file is in error keeps its last good state. Returns the
  // groups' errors ("NAME: why; ..."), or the folder's; empty if all read
  // well.
  std::string reload_groups(bool act = true);
  // Whether the guard rails hold the controller back now (gate.hpp).
  bool held() const { return gate_ != nullptr && gate_->held(); }
  provision::Group& known_group(const std::string& name);
  // The group files of groups_dir (load_each_group), once the folder is found
  // to be the controller's own (files.hpp); ConfigError otherwise.
  LoadedGroups load_own_groups() const;
  void say_held();
  // Orphans (the provider's `list`): listed instances the controller does
  // not know are terminated once listed for orphan_timeout.
  void sweep_orphans();
  bool known_instance(const ListedInstance& listed) const;
  void add_cluster_event(const std::string& kind, const std::string& level,
                         const std::string& group, const std::string& node,
                         const std::string& text);
  void observe(const NodeMap& nodes);
  void observe_slot(provision::Group& group, provision::Slot& slot, const slurm::NodeInfo* node);
  void launch(provision::Group& group, provision::Slot& slot, const slurm::NodeInfo* node);
  void leave(provision::Group& group, provision::Slot& slot, const slurm::NodeInfo* node);
  void created(provision::Group& group, provision::Slot& slot, const CommandResult& result);
  // Starts a slot's power-down (force: also while it powers up).
  void power_down(const std::string& name, bool force);
  // The drain and POWER_UP write of a slot powering up.
  void power_up_call(const std::string& name);
  // The POWER_DOWN write (_FORCE or _ASAP).
  void power_down_call(const std::string& name, bool force);
  // A write's `then` that changes the slot's steps in flight, found anew
  // when it runs (at a later tick), if they are still there.
  std::function<void()> on_work(const std::string& name, std::function<void(Work&)> change);
  // Drives a power-down: true once the slot is hidden, drained again.
  bool powered_down(const std::string& name, const slurm::NodeInfo* node, Work& work);
  void execute(const provision::Action& action);
  // The metering of the slot `index` of group `name`, if they still exist.
  void meter_slot(const std::string& name, unsigned index,
                  const std::function<void(InstanceRecord&)>& change);
  static std::string group_node(const provision::Cluster& cluster, const provision::Action& action);
  std::future<CommandResult> call(std::vector<std::string> argv, std::vector<std::string> env);
  std::string log_file(const provision::Group& group, const provision::Slot& slot) const;
  // Drains `node` (a write, queued), with reason kReasonPrefix + `why`.
  void drain(const std::string& node, const std::string& why, std::function<void()> then = {});
  // The write-ahead drain of an empty slot: the slot stays out of its
  // NodeSet until it is in; one that fails is tried again each tick.
  void drain_slot(const std::string& node);
  void add(const std::vector<provision::Event>& events);
  void meter(const provision::Group& group, const provision::Slot& slot,
             const std::function<void(InstanceRecord&)>& change);
  void save();
  // An event and a log line for `text`, unless the last one for `key` said it.
  void say_once(const std::string& key, const std::string& group, const std::string& text);

  Store& store_;
  const DaemonConfig& config_;
  const ProvisionConfig& settings_;
  provision::Settings plan_settings_;
  slurm::SlurmApi& slurm_;
  const Clock& clock_;
  CommandRunner& runner_;
  Gate* gate_;

  mutable std::mutex mutex_;  // cluster_, for state() from other threads
  provision::Cluster cluster_;
  std::map<std::string, Work> work_;  // node -> its steps in flight
  // Since when the plan waits for nodes read after an operation began (tick).
  std::optional<Clock::Steady::time_point> plan_after_;
  void plan_after_now() { plan_after_ = clock_.now(); }
  // An admin's command on `group` taken: its event (`kind`, `message` and
  // who asked), planned on nodes read from now on, saved; `message` back.
  std::string asked(const char* kind, const std::string& group, const std::string& message,
                    uid_t uid);
  std::map<std::string, InstanceRecord> open_;       // token -> an instance not ended
  std::vector<ClusterEvent> events_;                 // to save
  std::vector<InstanceRecord> changed_records_;      // to save
  std::string last_groups_error_;                    // said once: groups_dir's own error
  std::map<std::string, std::string> group_errors_;  // group -> its file's error, said once
  // A file's modification time and size; nullopt: it does not exist.
  using FileStamp = std::optional<std::pair<std::filesystem::file_time_type, std::uintmax_t>>;
  // `path`'s modification time and size; nullopt if it cannot be read.
  static FileStamp file_stamp(const std::filesystem::path& path);
  struct AdminConfRead {
    std::vector<std::pair<std::filesystem::path, FileStamp>> files;  // each file looked at
    include::AdminConf conf;
  };
  std::optional<AdminConfRead> admin_conf_;  // read_admin_conf's last read
  SaidOnce said_;                            // say_once's
  // The provider's `list` in flight, when to call it next, and each unknown
  // instance (TOKEN INSTANCE_ID) with when it was first listed, and its
  // terminate in flight.
  std::future<CommandResult> list_call_;
  bool listing_ = false;
  Millis next_list_{0};
  std::map<std::string, Millis> orphans_;
  std::map<std::string, std::future<CommandResult>> orphan_calls_;
  bool dirty_ = false;
  // Merge mode: a slurmctld restart in flight (the text it applies), the
  // text of one that failed (not tried again until the text changes), and
  // whether the engine repairs a step now.
  std::future<std::string> restart_call_;
  bool restarting_ = false;
  std::string restart_text_;
  std::string failed_restart_text_;
  bool repairing_ = false;
  std::set<std::string> undrained_;  // slots whose write-ahead drain is not in
  // Merge mode: the include file's change written and waiting for its
  // reconfigure (its event's text); tried again each tick until it is in.
  std::string reconfigure_owed_;
  static constexpr const char* kSlurmctld = "slurmctld";  // writes_' key of the reconfigure
  std::map<std::string, std::deque<Write>> queued_;       // key -> its writes, in order
  std::set<std::string> write_failed_;                    // "KEY: WHAT" said once
  // The first write of each queue under way; last, so that it is gone
  // (its calls returned) before anything they touch.
  Calls<bool> writes_{nullptr};
};

}  // namespace ar
