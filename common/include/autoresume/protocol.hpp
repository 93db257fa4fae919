#pragma once
// The wire protocol between auto-resumed and its clients (the srun plugin,
// node agents, the CLI): newline-delimited JSON over TCP, one request and one
// reply per line, versioned and size-limited. docs/protocol.md describes it.
// This file holds the bodies: what a request asks and a reply answers;
// session.hpp the lines that carry them (the handshake, the MACs).

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "autoresume/probe.hpp"
#include "autoresume/progress.hpp"
#include "autoresume/resume.hpp"
#include "autoresume/states.hpp"

namespace ar::proto {

using nlohmann::json;

inline constexpr int kVersion = 2;
// The longest body (a request's or a reply's JSON text) either side accepts.
inline constexpr std::size_t kMaxMessageBytes = 64 * 1024;
// The longest line, newline excluded: a body inside a JSON string (at most
// twice as long, escaped), and the rest of its line.
inline constexpr std::size_t kMaxLineBytes = 2 * kMaxMessageBytes + 1024;

// Error codes a reply can carry.
namespace code {
inline constexpr const char* kBadRequest = "bad_request";           // malformed or invalid
inline constexpr const char* kTooLarge = "too_large";               // over kMaxMessageBytes
inline constexpr const char* kVersion = "bad_version";              // unsupported version
inline constexpr const char* kUnauthenticated = "unauthenticated";  // no valid credential
inline constexpr const char* kForbidden = "forbidden";              // not the caller's job
inline constexpr const char* kNotFound = "not_found";
inline constexpr const char* kUnavailable = "unavailable";  // a dependency failed
inline constexpr const char* kBusy = "busy";                // over a limit or a cap
// A relaunch slurmctld gave an earlier attempt's step id (it lost that
// step): the id was cancelled; srun starts the attempt again.
inline constexpr const char* kStepReused = "step_reused";
inline constexpr const char* kInternal = "internal";
}  // namespace code

// A request or reply the peer got wrong; `code` is one of code::*.
class ProtocolError : public std::runtime_error {
 public:
  ProtocolError(std::string code, const std::string& message)
      : std::runtime_error(message), code_(std::move(code)) {}
  const std::string& code() const { return code_; }

 private:
  std::string code_;
};

// Every op the controller answers (each request struct's kOp below).
inline constexpr std::array<std::string_view, 21> kOps = {
    "hello",          "register",  "status",       "events",      "verdict",     "cancel",
    "tasks_exited",   "heartbeat", "replace",      "nodes",       "pause",       "unpause",
    "resume_actions", "groups",    "group_set",    "group_apply", "group_retry", "group_roll",
    "group_plan",     "usage",     "lifecycle_log"};

struct Request {
  json id;         // echoed in the reply: null, a number, or a short string
  std::string op;  // what to do
  json body;       // the whole object: the op's request struct parses it
};

// Parses a request's body. Throws ProtocolError (bad_request, too_large)
// naming what is wrong.
Request parse_request(std::string_view body);

// Serialized reply bodies.
std::string ok_reply(const json& id, json result);
std::string error_reply(const json& id, std::string_view code, std::string_view message);

// A serialized request body.
std::string make_request(const json& id, std::string_view op, json fields);

// A reply's body, parsed: the outcome, its result or its error.
struct Reply {
  bool ok = false;
  json result;          // when ok
  std::string code;     // when not ok: one of code::*
  std::string message;  // when not ok
};
// Throws ProtocolError (bad_request) for a body that is not a reply.
Reply parse_reply(std::string_view body);

// One struct per operation's request and per reply. `to_json` gives the
// fields (a request's envelope is make_request's, a reply's ok_reply's);
// `from_json` checks each field's presence, type and size and throws
// ProtocolError (bad_request) naming the field. The server parses requests,
// the clients parse replies. A request names its op (kOp) and its reply.

// Size limits of fields. The free text of replies (messages, details) is
// bounded by the line only.
inline constexpr std::size_t kMaxTextBytes = kMaxMessageBytes;
inline constexpr std::size_t kMaxRunIdBytes = 128;
// A run id's bytes, in a request: letters, digits and these (the plugin's
// are JOB.STEP-HEX). Nothing that could end a log field or an AdminComment
// entry, or move a terminal's cursor.
inline constexpr std::string_view kRunIdPunctuation = "._:@+-";
// Whether `run_id` holds only those.
bool valid_run_id(std::string_view run_id);
inline constexpr std::size_t kMaxNodeNameBytes = 64;
inline constexpr std::size_t kMaxReasonBytes = 256;
// A registration's argv and cwd together (a relaunch needs them whole, so a
// longer command line is refused, not cut).
inline constexpr std::size_t kMaxCommandBytes = 16 * 1024;
// What one status or events reply holds at most: rows up to this many
// bytes (the rest comes with the `next` cursor), and rows per page.
inline constexpr std::size_t kMaxListBytes = kMaxMessageBytes - 8 * 1024;
inline constexpr std::uint32_t kMaxPageRows = 1000;
inline constexpr std::uint32_t kDefaultStatusRows = 100;
inline constexpr std::uint32_t kDefaultEventRows = 1000;

struct HelloReply;
struct RegisterReply;
struct StatusReply;
struct EventsReply;
struct VerdictReply;
struct CancelReply;
struct HeartbeatReply;
struct ReplaceReply;
struct NodesReply;
struct GuardReply;

// Whether the controller acts (docs/guard.md): its mode, an admin's pause,
// the circuit breaker, and the actions counted within the last hour.
struct GuardState {
  std::string mode = "act";    // act or observe (the configuration's `mode`)
  bool paused = false;         // `pause`d by an admin
  std::string paused_detail;   // who paused it, when and why; left out when empty
  bool tripped = false;        // the circuit breaker stopped every action
  std::string tripped_detail;  // which limit, with the counts; left out when empty
  std::uint32_t marks = 0;     // node marks within the last hour
  std::uint32_t max_marks = 0;
  std::uint32_t replacements = 0;  // node replacements within the last hour
  std::uint32_t max_replacements = 0;

  json to_json() const;
  static GuardState from_json(const json& item);
};

// `hello`: no fields.
struct HelloRequest {
  static constexpr const char* kOp = "hello";
  using Reply = HelloReply;
  json to_json() const;
  static HelloRequest from_json(const json& body);
};
struct HelloReply {
  std::string version;  // the controller's release
  std::uint32_t protocol = 0;
  std::uint32_t uid = 0;  // the caller, as munge says

  json to_json() const;
  static HelloReply from_json(const json& result);
};

// `register`: a step the srun plugin asks the controller to protect.
struct StepRegistration {
  static constexpr const char* kOp = "register";
  using Reply = RegisterReply;
  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;
  std::string run_id;  // stable across relaunches of one protected launch
  std::uint32_t attempt = 0;
  std::vector<std::string> argv;
  std::string cwd;
  std::string nodelist;
  // --auto-resume-min-nodes: after a fault the step may go on, smaller, on
  // the job's healthy nodes while at least this many are left (0: it keeps
  // its size). Left out of the JSON when 0.
  std::uint32_t min_nodes = 0;
  // --auto-resume-hang-timeout (progress.hpp): "hang_timeout" is seconds or
  // "auto", left out when off; --auto-resume-hang-signal: "hang_signal",
  // 1-64, left out when 0.
  HangTimeout hang_timeout;
  std::uint32_t hang_signal = 0;

  json to_json() const;
  static StepRegistration from_json(const json& body);
};
using RegisterRequest = StepRegistration;
struct RegisterReply {
  std::string run_id;
  std::uint32_t attempt = 0;
  bool duplicate = false;  // registered before: nothing changed

  json to_json() const;
  static RegisterReply from_json(const json& result);
};

// `status`: protected steps, newest first.
struct StatusRequest {
  static constexpr const char* kOp = "status";
  using Reply = StatusReply;
  std::optional<std::uint32_t> job_id;  // only this job's steps
  std::optional<std::uint32_t> limit;   // rows at most (1-kMaxPageRows)
  std::optional<std::int64_t> before;   // a reply's `next`: the page after it

  json to_json() const;
  static StatusRequest from_json(const json& body);
};
struct StatusReply {
  struct Step {
    StepRegistration step;
    std::uint32_t uid = 0;
    StepState state = StepState::registered;
    std::int64_t created_at = 0;
    Verdict verdict = Verdict::none;  // these three are left out of the JSON when
    std::string message;              // none or empty
    RepairPhase phase = RepairPhase::none;

    json to_json() const;
    static Step from_json(const json& item);
  };
  std::vector<Step> steps;
  std::optional<std::int64_t> next;      // more steps: ask again with before=next
  std::optional<GuardState> controller;  // whether the controller acts

  json to_json() const;
  static StatusReply from_json(const json& result);
};

// `events`: what the controller did, in order.
struct EventsRequest {
  static constexpr const char* kOp = "events";
  using Reply = EventsReply;
  // Unix seconds. Wider than the wire's unsigned 32 bits so that a client
  // sends what it was given and the server names what it refuses.
  std::optional<std::int64_t> since;
  std::optional<std::uint32_t> limit;  // rows at most (1-kMaxPageRows)
  std::optional<std::int64_t> after;   // a reply's `next`: the events after it
  std::string group;                   // only this node group's events (empty: every event)
  std::string level;  // only events this grave or graver: info, warning, error (empty: all)

  json to_json() const;
  static EventsRequest from_json(const json& body);
};
struct EventsReply {
  struct Event {
    std::int64_t id = 0;
    std::int64_t at = 0;  // Unix seconds
    std::uint32_t job_id = 0;
    std::string run_id;
    std::string kind;
    std::string detail;
    std::string node;            // a node's events; empty for a step's
    std::int64_t uid = 0;        // on whose behalf: the step's owner, a replacement's requester
    std::string group;           // a node group's events (continuous provisioning); may be absent
    std::string level = "info";  // info, warning or error; may be absent (info)
    // What it is about: cluster, group, instance, node or job; may be absent.
    std::string resource;

    json to_json() const;
    static Event from_json(const json& item);
  };
  std::vector<Event> events;
  std::optional<std::int64_t> next;  // more events: ask again with after=next

  json to_json() const;
  static EventsReply from_json(const json& result);
};

// `verdict`: what happens to a protected step.
struct VerdictRequest {
  static constexpr const char* kOp = "verdict";
  using Reply = VerdictReply;
  std::string run_id;
  std::uint32_t attempt = 0;
  bool ended = false;  // srun's step has ended

  json to_json() const;
  static VerdictRequest from_json(const json& body);
};
struct VerdictReply {
  struct Relaunch {
    std::string nodelist;  // the repaired allocation, in Slurm's hostlist form
    std::uint32_t num_nodes = 0;
    // The nodes the relaunched step runs on (srun's --nodes, in place of
    // the one it was given); 0, left out of the JSON: as many as before.
    std::uint32_t step_nodes = 0;

    json to_json() const;
    static Relaunch from_json(const json& item);
  };
  std::string run_id;
  std::uint32_t attempt = 0;
  Verdict verdict = Verdict::wait;
  std::string message;
  std::optional<Relaunch> relaunch;  // with Verdict::relaunch

  json to_json() const;
  static VerdictReply from_json(const json& result);
};

// `cancel`: srun was stopped while it waited; do not relaunch.
struct CancelRequest {
  static constexpr const char* kOp = "cancel";
  using Reply = CancelReply;
  std::string run_id;
  std::uint32_t attempt = 0;
  std::string reason;  // left out of the JSON when empty

  json to_json() const;
  static CancelRequest from_json(const json& body);
};
struct CancelReply {
  std::string run_id;
  std::uint32_t attempt = 0;
  Verdict verdict = Verdict::cancelled;  // a step decided before keeps its own
  std::string message;

  json to_json() const;
  static CancelReply from_json(const json& result);
};

// `heartbeat`: a node agent says its node is alive, and reports what it
// found probing the nodes the controller asked it to (cross-checks: a
// node's slurmd seen from another node). The reply names the nodes it
// should probe next; the agent probes them at once and sends their results
// in an extra heartbeat.
inline constexpr std::size_t kMaxPeerProbes = 16;
inline constexpr std::uint32_t kMinHeartbeatInterval = 100;        // ms
inline constexpr std::uint32_t kMaxHeartbeatInterval = 60'000;     // ms
inline constexpr std::uint32_t kDefaultHeartbeatInterval = 2'000;  // an agent that does not say
struct PeerProbe {
  std::string node;     // a node name
  std::string address;  // its NodeAddr: a name or a numeric address, 1-255 bytes
  std::uint16_t port = 0;
  bool deep = false;  // a deep probe (probe.hpp); left out of the JSON when false
};
// What a node's progress files of one step said (progress.hpp), per rank:
// how long ago it beat (by the node's clock) and what the file held.
inline constexpr std::size_t kMaxProgressSteps = 64;    // steps per heartbeat
inline constexpr std::size_t kMaxProgressRanks = 1024;  // ranks per heartbeat, all steps
struct RankProgress {
  std::uint32_t rank = 0;
  std::uint32_t age_ms = 0;  // since its last beat
  Beat beat{};               // "step", "section", "section_s": left out when not said
  bool operator==(const RankProgress&) const = default;
};
struct StepProgress {
  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;
  std::vector<RankProgress> ranks{};  // the ranks that beat at least once
  bool operator==(const StepProgress&) const = default;
};
// The quick checks (docs/resume.md, "Hangs and crashes"): the controller
// asks a node's agent to run them once a protected step failed ("check" in
// the reply), and the agent says how they went ("checked") in its
// heartbeats while the controller still asks.
inline constexpr std::size_t kMaxCheckDetailBytes = 1024;
struct CheckAsk {
  std::uint64_t id = 0;          // 1 or more: the controller's, for this ask
  std::uint32_t timeout_ms = 0;  // the longest the checks may take (1 ms to 10 min)
  bool operator==(const CheckAsk&) const = default;
};
struct CheckDone {
  std::uint64_t id = 0;
  bool passed = false;  // false: a check failed (the checker's exit status 1)
  std::string detail;   // what failed, or why nothing could be told (printable, 1 KiB at most)
  bool operator==(const CheckDone&) const = default;
};
struct HeartbeatRequest {
  static constexpr const char* kOp = "heartbeat";
  using Reply = HeartbeatReply;
  std::string node;       // a node name: 1-64 letters, digits, '-', '_', '.'
  bool stopping = false;  // the agent is going away; left out of the JSON when false
  // Node -> what its probe found (at most kMaxPeerProbes; left out when empty).
  std::map<std::string, ProbeResult> peers;
  // Milliseconds between the agent's heartbeats (kMinHeartbeatInterval to
  // kMaxHeartbeatInterval; 0: not said, left out of the JSON): the
  // controller counts the agent silent after two of them and a second.
  std::uint32_t interval_ms = 0;
  // The node's progress files, per step ("progress"; left out when empty):
  // at most kMaxProgressSteps steps and kMaxProgressRanks ranks in all.
  std::vector<StepProgress> progress{};
  // The quick checks' outcome, for the ask it answers ("checked").
  std::optional<CheckDone> checked{};

  json to_json() const;
  static HeartbeatRequest from_json(const json& body);
};
struct HeartbeatReply {
  std::vector<PeerProbe> probe;     // at most kMaxPeerProbes; left out when empty
  std::optional<CheckAsk> check{};  // run the quick checks now ("check"; left out when none)

  json to_json() const;
  static HeartbeatReply from_json(const json& result);
};

// `replace`: an admin asks for a node's replacement.
// The mode, with its names in states.hpp: wait (running jobs finish
// first), now (protected steps on the node are resumed elsewhere at once),
// force (and the other jobs on it are killed).
using ReplaceMode = RepairMode;

struct ReplaceRequest {
  static constexpr const char* kOp = "replace";
  using Reply = ReplaceReply;
  std::string node;
  ReplaceMode mode = ReplaceMode::wait;

  json to_json() const;
  static ReplaceRequest from_json(const json& body);
};
struct ReplaceReply {
  std::string node;
  std::string message;  // what was done, or how far a replacement under way got

  json to_json() const;
  static ReplaceReply from_json(const json& result);
};

// `nodes`: replacements under way and node agents' heartbeats: of the
// nodes named (at most kMaxNodesListed; "nodes", left out when empty), or
// of all, the kMaxNodesListed heard longest ago when more are heard (the
// rest counted in "heartbeats_left_out"): a reply fits in a message at any
// cluster's size.
inline constexpr std::size_t kMaxNodesListed = 500;
struct NodesRequest {
  static constexpr const char* kOp = "nodes";
  using Reply = NodesReply;
  std::vector<std::string> nodes;  // node names; empty: all
  json to_json() const;
  static NodesRequest from_json(const json& body);
};
struct NodesReply {
  struct Replacement {
    std::string node;
    NodeRepairState state = NodeRepairState::waiting;
    std::string reason;
    RepairMode mode = RepairMode::wait;
    std::int64_t attempts = 0;  // provider calls so far
    std::int64_t started_at = 0;
    std::string detail;

    json to_json() const;
    static Replacement from_json(const json& item);
  };
  std::vector<Replacement> replacements;
  std::map<std::string, double> heartbeats;  // node -> seconds since its last heartbeat
  std::uint32_t heartbeats_left_out = 0;     // heard, not listed (left out of the JSON when 0)

  json to_json() const;
  static NodesReply from_json(const json& result);
};

// `pause`, `unpause`, `resume_actions` (root and SlurmUser): the guard
// rails. A pause stops every action until `unpause`; `resume_actions`
// closes a tripped circuit breaker.
struct PauseRequest {
  static constexpr const char* kOp = "pause";
  using Reply = GuardReply;
  std::string reason;  // left out of the JSON when empty

  json to_json() const;
  static PauseRequest from_json(const json& body);
};
struct UnpauseRequest {
  static constexpr const char* kOp = "unpause";
  using Reply = GuardReply;
  json to_json() const;
  static UnpauseRequest from_json(const json& body);
};
struct ResumeActionsRequest {
  static constexpr const char* kOp = "resume_actions";
  using Reply = GuardReply;
  json to_json() const;
  static ResumeActionsRequest from_json(const json& body);
};
struct GuardReply {
  std::string message;  // what was done
  GuardState controller;

  json to_json() const;
  static GuardReply from_json(const json& result);
};

// `tasks_exited` (root and SlurmUser: slurmstepd): every task of a
// protected step on one node has exited, and how. Reported once per node
// by the step daemon, before it tells srun that its tasks exited, so that
// the controller knows by the time srun reports the end whether every node
// of the step ended its tasks with status 0 (then no node is at fault).
struct TasksExitedReply;
struct TasksExitedRequest {
  static constexpr const char* kOp = "tasks_exited";
  using Reply = TasksExitedReply;
  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;
  std::string run_id;                    // 1-kMaxRunIdBytes; left out of the JSON when empty
  std::optional<std::uint32_t> attempt;  // left out when unknown
  std::string node;                      // the reporting node's Slurm name
  std::uint32_t node_id = 0;             // its index in the step's nodes (S_JOB_NODEID)
  std::uint32_t tasks = 0;               // this node's tasks of the step (at least 1)
  std::uint32_t failed = 0;              // of them, those whose status was not 0 (<= tasks)

  bool clean() const { return failed == 0; }
  json to_json() const;
  static TasksExitedRequest from_json(const json& body);
};
struct TasksExitedReply {
  bool counted = false;  // the report is about a protected step waiting for its end
  std::string message;   // what came of it

  json to_json() const;
  static TasksExitedReply from_json(const json& result);
};

// Continuous provisioning (root and SlurmUser; docs/provisioning.md). Each
// op answers `unavailable` while node_provisioning is off.
struct GroupsReply;
struct GroupReply;
struct UsageReply;
struct LifecycleLogReply;

inline constexpr std::size_t kMaxGroupNameBytes = 40;

// `groups`: every node group the controller keeps, and where it stands.
struct GroupsRequest {
  static constexpr const char* kOp = "groups";
  using Reply = GroupsReply;
  json to_json() const;
  static GroupsRequest from_json(const json& body);
};
struct GroupsReply {
  struct Group {
    std::string name;
    std::string type;         // compute or service
    std::string status;       // Creating, Updating, InService, Degraded, Failed, Deleting
    std::uint32_t count = 0;  // the operation's (desired) count
    std::uint32_t min_count = 0;
    std::uint32_t max_count = 0;
    std::uint32_t in_service = 0;  // instances released for jobs
    std::uint32_t starting = 0;    // creating, joining or held for min_count
    std::uint32_t leaving = 0;     // draining or terminating
    std::uint64_t operation = 0;
    std::string detail;  // stopped, failed, waiting for capacity, a roll: in words (may be empty)

    json to_json() const;
    static Group from_json(const json& item);
  };
  std::vector<Group> groups;

  json to_json() const;
  static GroupsReply from_json(const json& result);
};

// `group_set`: writes count and/or min_count into the group's file (the one
// desired state); the controller starts the operation at once.
struct GroupSetRequest {
  static constexpr const char* kOp = "group_set";
  using Reply = GroupReply;
  std::string name;
  std::optional<std::uint32_t> count;
  std::optional<std::uint32_t> min_count;
  json to_json() const;
  static GroupSetRequest from_json(const json& body);
};
// `group_apply`: reads the group files now (as each tick does), so that a
// change starts its operation at once; a file in error is named.
struct GroupApplyRequest {
  static constexpr const char* kOp = "group_apply";
  using Reply = GroupReply;
  json to_json() const;
  static GroupApplyRequest from_json(const json& body);
};
// `group_retry`: a group stopped by lifecycle failures (or failed by the
// provider's configuration error) creates again.
struct GroupRetryRequest {
  static constexpr const char* kOp = "group_retry";
  using Reply = GroupReply;
  std::string name;
  json to_json() const;
  static GroupRetryRequest from_json(const json& body);
};
// `group_roll`: replaces every in-service instance of the group, `batch` at
// a time (each drained first; its jobs end before it goes).
struct GroupRollRequest {
  static constexpr const char* kOp = "group_roll";
  using Reply = GroupReply;
  std::string name;
  std::uint32_t batch = 1;
  json to_json() const;
  static GroupRollRequest from_json(const json& body);
};
// `group_plan`: what the include file (slurm_conf_include) would become for
// the group files as they are now, and how it would be applied; nothing is
// written.
struct GroupPlanReply;
struct GroupPlanRequest {
  static constexpr const char* kOp = "group_plan";
  using Reply = GroupPlanReply;
  json to_json() const;
  static GroupPlanRequest from_json(const json& body);
};
struct GroupPlanReply {
  static constexpr std::size_t kMaxDiffLines = 500;
  std::string path;               // the include file
  std::string change;             // none, reconfigure or restart; empty with an error
  std::vector<std::string> diff;  // "-LINE" and "+LINE", at most kMaxDiffLines
  std::uint32_t diff_left_out = 0;
  std::string error;  // why it cannot be written (or merge mode is off)
  json to_json() const;
  static GroupPlanReply from_json(const json& result);
};
struct GroupReply {
  std::string message;  // what was done
  json to_json() const;
  static GroupReply from_json(const json& result);
};

// `usage`: per-instance metering rows and per-group instance-hours.
struct UsageRequest {
  static constexpr const char* kOp = "usage";
  using Reply = UsageReply;
  std::string group;                   // empty: every group
  std::optional<std::int64_t> since;   // Unix seconds: billable time from then on
  std::optional<std::uint32_t> limit;  // instance rows at most (1-kMaxPageRows)
  json to_json() const;
  static UsageRequest from_json(const json& body);
};
struct UsageReply {
  struct Instance {
    std::string group;
    std::string node;
    std::string instance_id;
    std::string token;
    std::uint64_t operation = 0;
    std::int64_t requested = 0;  // Unix seconds; 0: not (yet)
    std::int64_t started = 0;
    std::int64_t in_service = 0;
    std::int64_t terminated = 0;
    std::string end_reason;
    double hours = 0;  // billable within the window
    json to_json() const;
    static Instance from_json(const json& item);
  };
  struct Group {
    std::string group;
    std::uint64_t instances = 0;  // with billable time in the window
    double instance_hours = 0;
    json to_json() const;
    static Group from_json(const json& item);
  };
  std::vector<Group> groups;
  std::vector<Instance> instances;  // newest first
  std::uint64_t left_out = 0;       // instance rows not sent (the limit, the reply's size)
  json to_json() const;
  static UsageReply from_json(const json& result);
};

// `lifecycle_log`: the end of a node's last lifecycle script log.
struct LifecycleLogRequest {
  static constexpr const char* kOp = "lifecycle_log";
  using Reply = LifecycleLogReply;
  std::string node;
  json to_json() const;
  static LifecycleLogRequest from_json(const json& body);
};
struct LifecycleLogReply {
  std::string node;
  std::string path;
  std::string text;        // the log's last bytes
  std::uint64_t size = 0;  // the whole log's bytes
  json to_json() const;
  static LifecycleLogReply from_json(const json& result);
};

}  // namespace ar::proto
