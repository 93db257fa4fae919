#pragma once
// The node side of the controller: node agents' heartbeats, and the
// replacement of nodes marked for it.
//
// Heartbeats: a node heard from since this controller started (its current
// instance's agent: a node back as a new instance is watched again once its
// own agent is heard) and silent for heartbeat_timeout, whose slurmd does
// not answer a deep probe either, is marked FAIL with "Action:Replace
// heartbeat: ..." (which the resume engine acts on at once). Guards: after
// a stall of the controller itself every deadline starts again (a `stalled`
// event, none while no agent is heard: no deadline to restart), and while
// more than heartbeat_max_silent_percent of the nodes are silent at once
// nothing is marked (the controller's own network is the likelier fault).
//
// Replacement: a node FAIL or DOWN with a reason starting "Action:Replace"
// (an admin's, a health check's, a heartbeat's) or "auto-resume:" (taken out
// of a job by the resume engine) is replaced by the provider once no job
// runs on it: waiting -> replacing (provider calls, retried with backoff)
// -> returning (its new instance registered: back in service, idle) or
// failed (reported; the node stays out for an admin). A plain FAIL lets
// running jobs finish; DOWN has killed them; `auto-resume replace --force`
// first lets the resume engine move protected steps off the node, then sets
// it DOWN. Each step is committed to the store with its event.
//
// Guard rails (gate.hpp): while the controller holds back (mode=observe,
// paused, the circuit breaker tripped) no node is marked, drained, put back
// or replaced; each is said as a `would` event instead. A heartbeat's mark
// counts toward max_marks_per_hour, a replacement's first provider call
// toward max_replacements_per_hour.
//
// Spares (provider=spares): each partition keeps `spares` idle nodes
// drained with reason "spare", out of normal scheduling; the resume engine
// takes one at once for a failed node, and a replaced node goes back to the
// pool while the pool is short.

#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "autoresume/daemon_config.hpp"
#include "autoresume/process.hpp"
#include "autoresume/protocol.hpp"
#include "autoresume/resume.hpp"
#include "calls.hpp"
#include "clock.hpp"
#include "gate.hpp"
#include "log.hpp"
#include "nodes/origin.hpp"
#include "nodes/probe.hpp"
#include "said_once.hpp"
#include "slurm_api.hpp"
#include "store/store.hpp"

namespace ar {

// A heartbeat the keeper will not take: from an address that is not the
// node's (forbidden), or before the keeper has the node list (not yet).
class HeartbeatRefused : public std::runtime_error {
 public:
  enum class Why { not_yet, wrong_address };
  HeartbeatRefused(Why why, const std::string& what) : std::runtime_error(what), why_(why) {}
  Why why() const { return why_; }

 private:
  Why why_;
};

class NodeKeeper {
 public:
  using NodeMap = std::map<std::string, const slurm::NodeInfo*>;

  // Whether someone else replaces a node (continuous provisioning's group
  // nodes): never replaced nor made a spare here.
  using OwnedElsewhere = std::function<bool(const std::string&)>;

  // Slurm, the clock, the prober (silent nodes' slurmd) and the runner (the
  // provider's commands) are the keeper's seams: tests pass fakes.
  NodeKeeper(Store& store, const DaemonConfig& config, slurm::SlurmApi& slurm, const Clock& clock,
             Prober& prober, CommandRunner& runner, OwnedElsewhere owned_elsewhere = {});
  ~NodeKeeper();
  NodeKeeper(const NodeKeeper&) = delete;
  NodeKeeper& operator=(const NodeKeeper&) = delete;

  // A node agent's heartbeat from `peer`, the numeric address it came from
  // (any thread). `stopping`: the agent is shutting down on purpose; its
  // node is no longer watched until it is heard again. Throws
  // std::invalid_argument for a node slurmctld does not know, and
  // HeartbeatRefused before the first look at the nodes or when `peer` is
  // not one of the node's addresses (origin.hpp).
  // `interval`: the agent's own, as it says (zero: it does not say, the
  // default 2 s is assumed).
  void heartbeat(const std::string& node, bool stopping, const std::string& peer,
                 std::chrono::milliseconds interval = {});
  // Whether heartbeat(node, ..., peer) is decided without a name lookup
  // (the node's addresses numeric, or their lookups in the cache): the
  // server answers such heartbeats on its io thread. Any thread.
  bool heartbeat_at_hand(const std::string& node, const std::string& peer);

  // The evidence of life (any thread): what `node`'s own agent says of it
  // now. beating: its last heartbeat came within two of its intervals and
  // a second (under any slurmd instance: a restarted slurmd registers
  // before the agent's next beat); none: no agent heard since the
  // controller started (or it said goodbye), or only the agent of an
  // older instance, silent since; silent otherwise.
  struct Life {
    AgentView view = AgentView::none;
    double age = 0;  // seconds since its last heartbeat (beating, silent)
  };
  Life life_of(const std::string& node);

  // An admin's `auto-resume replace` (any thread): wait (running jobs
  // finish first), now (protected steps are resumed elsewhere at once) or
  // force (then the remaining jobs are killed). Marks the node and returns
  // what was done, on behalf of `requester` (recorded for the audit).
  // Throws std::invalid_argument for an unknown node.
  std::string request_replace(const std::string& node, RepairMode mode, uid_t requester = 0);

  // Cross-checks (peers.cpp): before a node the controller cannot reach is
  // marked, the agents of up to two other nodes (`near` ones first: the
  // same job's) probe it from where they are. A suspect is asked about once
  // per episode, until forget_peers.
  struct PeerAsk {
    ProbeTarget target;
    std::span<const std::string> near;       // read only when the cross-check starts
    ProbeDepth depth = ProbeDepth::connect;  // as the asker's own probe
  };
  enum class PeerView {
    none,       // no agent to ask, or none could tell in time: the controller's view stands
    pending,    // asked, no answer yet
    confirmed,  // an agent cannot reach it either
    disputed,   // an agent reaches it: the controller's own route is the suspect
  };
  struct CrossCheck {
    PeerView view = PeerView::none;
    std::string detail;  // what the agents said, for an event
  };
  static constexpr std::chrono::seconds kPeerWait{5};  // how long an answer is waited for
  // Who wants a cross-check: the resume engine's probes, or the keeper's
  // own heartbeat watch; one ends only when neither wants it any more.
  enum class PeerAsker : unsigned { engine = 1, heartbeats = 2 };
  void ask_peers(const std::string& suspect, const PeerAsk& ask,
                 PeerAsker asker = PeerAsker::engine);
  void forget_peers(const std::string& suspect, PeerAsker asker = PeerAsker::engine);
  CrossCheck cross_checked(const std::string& suspect);
  // An agent's part (any thread, with its heartbeat): takes what it found
  // and returns the nodes it should probe now.
  std::vector<proto::PeerProbe> peer_work(const std::string& agent,
                                          const std::map<std::string, ProbeResult>& found);

  // The heartbeat ages, for `auto-resume nodes`: node -> seconds since heard.
  std::map<std::string, double> heartbeat_ages();

  // The engine thread's turn: `nodes` as last loaded from slurmctld;
  // `protected_nodes` those under protected steps not decided yet, or
  // chosen as their replacements. While `slurm_away` (slurmctld does not
  // answer) only the heartbeat watch goes on: nothing is marked, replaced
  // or kept as a spare, since each call to slurmctld would wait for it.
  // `nodes_read_at`: when the read that brought `nodes` began (a
  // replacement asked for after it waits for the next read).
  void tick(const NodeMap& nodes, const std::set<std::string>& protected_nodes,
            bool slurm_away = false,
            Clock::Steady::time_point nodes_read_at = Clock::Steady::time_point::max());

  // The keeper's calls to slurmctld (marks, DOWN, a returned node's
  // resume and drain, the spares' drains and partitions) and its deep
  // probes run on threads of their own once started (Engine::start), and
  // are taken at a later look; until then at once (tests tick by hand).
  void start_calls() {
    writes_.start();
    deep_probes_.start();
    partition_reads_.start();
  }
  bool calls_settled(std::chrono::milliseconds limit) const {
    return writes_.wait(limit) && deep_probes_.wait(limit) && partition_reads_.wait(limit);
  }

  // Whether a replacement was under way at the last tick (its provider
  // call, or the node's return): no slurmctld restart meanwhile.
  bool replacing() const { return replacing_; }
  // Whether something of the keeper's is under way that the engine's next
  // read of slurmctld serves: a replacement, a mark or deep probe in
  // flight, a silent node cross-checked, a spares' partition read.
  bool busy() const {
    return replacing_ || stale_for_repair_ || !cross_checking_.empty() ||
           writes_.size() + deep_probes_.size() > 0 || partition_reads_.size() > 0;
  }

  // The guard rails (gate.hpp): asked before every action of the keeper's
  // and of the resume engine's; the server's pause, unpause and
  // resume_actions go to it too.
  Gate& gate() { return gate_; }

  // The reason a spare node is drained with, and whether a node is a spare
  // ready to be taken.
  static constexpr const char* kSpareReason = "spare";
  static bool is_spare(const slurm::NodeInfo& node);

 private:
  using Steady = Clock::Steady;
  OwnedElsewhere owned_elsewhere_;
  bool elsewhere(const std::string& node) const {
    return owned_elsewhere_ && owned_elsewhere_(node);
  }

  // Where a node is, as slurmctld says.
  struct Whereabouts {
    std::string address;        // NodeAddr
    std::string hostname;       // NodeHostname
    std::int64_t instance = 0;  // its slurmd's start time
  };
  // Throws unless `peer` may speak for `node` (heartbeat's rules). With
  // `resolve` false it looks nothing up: false when that would take a
  // lookup not in the cache (nothing decided), true when decided.
  bool check_origin(const std::string& node, const std::string& peer, bool resolve = true);
  // The addresses `name` resolves to, from a cache (a failed lookup is
  // tried again after kLookupRetry, a good one after kLookupTtl); with
  // `resolve` false, nullopt when that takes a lookup.
  std::optional<std::vector<origin::Address>> addresses_of(const std::string& name,
                                                           std::string& error, bool resolve);
  void watch_heartbeats(const NodeMap& nodes);
  void find_new(const NodeMap& nodes);
  // Nodes this keeper put back in service lately (for kReturnedMemory):
  // the new instance, the finished replacement's reason, when the
  // replacement began (Unix seconds: a mark set before it is the old one),
  // when its last resume was in, and whether it went back as a spare. A
  // node list read before the resume took, or a slurmctld restarted from
  // state it saved before it, still shows the old mark on the new
  // instance: not a new mark.
  struct Returned {
    std::int64_t instance = 0;
    std::string reason;
    std::int64_t marked_by = 0;
    Steady::time_point at;
    bool spare = false;
  };
  std::map<std::string, Returned> returned_;
  // Whether find_new leaves `node`'s mark alone as a returned node's old
  // one (resumed once more when a read after the return still shows it).
  bool old_mark(const std::string& name, const slurm::NodeInfo& node);
  // Where the heartbeats stand at one look (under mutex_); false after a
  // stall of the controller (every deadline restarted; a `stalled` event
  // only when some node's agent is heard).
  // `late`: past half the timeout; `armed`: past the timeout less
  // arm_lead; `silent`: past the timeout.
  bool collect_late(const NodeMap& nodes, std::vector<std::string>& late,
                    std::vector<std::string>& armed, std::vector<std::string>& silent,
                    std::size_t& heard);
  // The deep probe and the cross-check of a node going silent start this
  // long before its deadline, so that their evidence is in by then (other
  // agents answer a cross-check at their next beat, 2 s apart by default):
  // the mark comes at the deadline, on evidence at most this old.
  static Steady::duration arm_lead(std::chrono::milliseconds timeout) {
    return std::min<Steady::duration>(std::chrono::seconds{3}, timeout / 2);
  }
  // Seconds since the node was heard; nothing if it is not watched.
  std::optional<double> silence_of(const std::string& node);
  // Deep-probes armed nodes (a round on a thread of its own), and marks
  // those whose slurmd does not answer once the round is in, the
  // cross-check agrees and the deadline is past (take_deep_probe,
  // settle_cross_checks).
  void mark_silent(std::vector<std::string> armed, const std::vector<std::string>& silent,
                   const NodeMap& nodes);
  // `armed`: this look's (a node no longer armed was heard again meanwhile).
  void take_deep_probe(const std::vector<std::string>& armed);
  struct DeepRound {
    std::vector<std::string> silent;
    std::vector<ProbeTarget> targets;  // of `silent`, in order
    std::vector<ProbeResult> results;
  };
  static constexpr const char* kDeepProbe = "deep probe";
  // Runs `write` (calls to slurmctld) under `key` ("WHAT NODE") on a thread
  // of its own unless one is under way; what it returned once it is in
  // (taken: it throws here if it failed), nothing meanwhile.
  std::optional<std::string> written(const std::string& key, std::function<std::string()> write);
  // The spares' drains that came in: their events; `drained` gets their
  // nodes and those of the drains under way.
  void take_spare_drains(std::set<std::string>& drained);
  // Writes whose owner no longer wants them (a replacement dropped, a
  // silent node heard again) are dropped once in.
  void drop_unwanted_writes();
  void advance(NodeRepair& repair, const NodeMap& nodes,
               const std::set<std::string>& protected_nodes);
  // One state each: true when the repair is done with for this tick.
  bool advance_waiting(NodeRepair& repair, const slurm::NodeInfo& node,
                       const std::set<std::string>& protected_nodes);
  bool advance_replacing(NodeRepair& repair);
  bool advance_returning(NodeRepair& repair, const slurm::NodeInfo& node, const NodeMap& nodes);
  // The returned node's resume (and drain as a spare), under `key`, once
  // in: the replacement ends.
  bool returned(NodeRepair& repair, const std::string& key, std::int64_t instance);
  std::set<std::string> returning_spares_;  // returns whose write drains a spare too
  // The provider failed (or the node never came back): again after a
  // backoff, until provider_retries calls have failed.
  void retry_or_fail(NodeRepair& repair);
  // Drops a replacement; its provider call, if any, is left to end by itself.
  void drop(const std::string& node, const std::string& why);
  // Saves the repair with its event, and says who asked in the audit log.
  void save(NodeRepair& repair, EventKind kind, const std::string& detail);
  static log::Asker asker_of(const NodeRepair& repair);
  // provider=spares: drains idle nodes as spares where a partition is short.
  void keep_spares(const NodeMap& nodes, const std::set<std::string>& protected_nodes);
  // Partitions of `node` that have fewer than `spares` spares.
  std::vector<std::string> short_of_spares(const std::string& node, const NodeMap& nodes);

  Store& store_;
  const DaemonConfig& config_;
  slurm::SlurmApi& slurm_;
  const Clock& clock_;
  Prober& prober_;
  CommandRunner& runner_;
  Gate gate_;

  std::mutex mutex_;  // guards heard_, known_ and the lookups (the server's threads use them)
  // A node's agent heard last, and the node's instance (its slurmd's start
  // time) then: a new instance is watched again only once its own agent
  // is heard.
  struct Heard {
    Steady::time_point at;
    std::int64_t instance = 0;
    std::chrono::milliseconds interval{proto::kDefaultHeartbeatInterval};
  };
  // How long a heartbeat is evidence of life: two of its agent's intervals
  // and a second.
  static Steady::duration fresh_for(const Heard& heard) {
    return 2 * heard.interval + std::chrono::seconds{1};
  }
  std::map<std::string, Heard> heard_;
  bool looked_ = false;                       // known_ is filled once
  bool slurm_away_ = false;                   // this tick's (tick)
  std::map<std::string, Whereabouts> known_;  // the nodes slurmctld knows, as of the last tick
  const std::map<std::string, std::vector<origin::Network>> binds_;  // heartbeat_bind
  struct Lookup {
    std::vector<origin::Address> addresses;
    std::string error;
    Steady::time_point at;
  };
  std::map<std::string, Lookup> lookups_;  // name -> its addresses
  SaidOnce loopback_said_;                 // nodes heard over loopback, said once

  // Cross-checks under way (under mutex_): suspect -> who was asked, and
  // what they found since.
  struct PeerCheck {
    ProbeTarget target;
    ProbeDepth depth = ProbeDepth::connect;
    Steady::time_point asked_at;
    std::vector<std::string> agents;
    std::map<std::string, ProbeResult> found;
    unsigned askers = 0;  // PeerAsker bits
  };
  std::map<std::string, PeerCheck> peer_checks_;
  // Agents heard within the freshness bound, `near` ones first (under mutex_).
  std::vector<std::string> live_agents(const std::string& suspect,
                                       std::span<const std::string> near);

  Steady::time_point last_tick_{};
  bool crowd_said_ = false;  // the many-silent event of this episode is out
  SaidOnce late_said_;       // nodes whose "late but answering" is out
  // Silent nodes whose slurmd did not answer the deep probe either, while
  // other nodes' agents cross-check them.
  std::map<std::string, double> cross_checking_;  // node -> heartbeat age at the probe
  // Marks a silent node; false if Slurm refused (tried again later).
  bool mark_unheard(const std::string& node, double age, const std::string& checked);
  // The silent nodes whose cross-check has an answer: marked or let be.
  void settle_cross_checks();
  bool replacing_ = false;                                        // replacing()
  Steady::time_point nodes_read_at_ = Steady::time_point::max();  // this tick's (tick)
  bool stale_for_repair_ = false;  // a replacement waits for a newer node list
  SaidOnce no_provider_said_;
  std::map<std::string, std::future<std::string>> calls_;  // provider calls in flight
  std::vector<std::future<std::string>> orphans_;          // calls of dropped replacements
  // The last deep probe of an armed node, and whether it came before the
  // node's deadline (early: looked at again once it is silent).
  struct Probed {
    Steady::time_point at{};
    bool early = false;
  };
  std::map<std::string, Probed> probed_;
  std::map<std::string, std::vector<std::string>> partitions_;  // provider=spares
  Steady::time_point partitions_read_{};
  // The last error said per tick part ("heartbeats", "replacements",
  // "spares") and per replaced node, while it persists.
  SaidOnce errors_said_;
  SaidOnce short_said_;  // partitions whose "no idle node for a spare" is out
  // Last: their threads end before what they use goes.
  Calls<std::string> writes_{nullptr};  // by "WHAT NODE"
  Calls<DeepRound> deep_probes_{nullptr};
  Calls<std::map<std::string, std::vector<std::string>>> partition_reads_{nullptr};
};

}  // namespace ar
