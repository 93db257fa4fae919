#pragma once
// The controller's configuration file, in Slurm's `Key=Value` style: one
// setting per line, `#` starts a comment, keys are case-insensitive.

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "autoresume/endpoint.hpp"

namespace ar {

// How failed nodes are replaced: `local` (slurmd processes on this machine,
// for development and tests: local_restart_command), `command` (the site's
// own script: provider_command, whose contract docs/nodes.md states),
// `spares` (a pool of idle nodes drained with reason "spare" in each
// partition: a resume takes one at once, and the failed node is replaced in
// the background by provider_command, else local_restart_command, and
// returns to the pool).
enum class ProviderKind { local, command, spares };

// One entry of heartbeat_bind: the nodes (a hostlist expression, expanded by
// the controller) whose agents may also send heartbeats from `network`.
struct HeartbeatBind {
  std::string nodes;    // "gpu[1-64]"
  std::string address;  // numeric IPv4 or IPv6, as written
  unsigned prefix = 0;  // the network's prefix length (32 or 128: one address)
  bool v6 = false;

  std::string str() const;  // "gpu[1-64]=10.1.0.0/16"
  bool operator==(const HeartbeatBind&) const = default;
};

std::string_view to_string(ProviderKind kind);

// Whether the controller acts on what it finds (`act`), or only says what it
// would do (`observe`: no mark, drain, shrink, requeue, relaunch or
// replacement; docs/guard.md).
enum class ActionMode { act, observe };
std::string_view to_string(ActionMode mode);

// A circuit breaker's limit per hour: a count of actions, or a percent of
// the nodes slurmctld lists (at least kMinimum actions then).
struct ActionLimit {
  unsigned value = 5;
  bool percent = true;
  static constexpr unsigned kMinimum = 2;

  // The count the limit allows among `nodes` nodes.
  unsigned of(std::size_t nodes) const;
  std::string str() const;  // "5%" or "12"
  bool operator==(const ActionLimit&) const = default;
};

// Continuous provisioning (docs/provisioning.md): off by default.
enum class Provisioning { off, continuous };
std::string_view to_string(Provisioning mode);

struct ProvisionConfig {
  Provisioning mode = Provisioning::off;  // node_provisioning
  // One NAME.conf per node group (controller/provision/groups.hpp).
  std::filesystem::path groups_dir = "/etc/auto-resume/groups";
  // The provider program: `PROGRAM create GROUP NODE TOKEN`, `PROGRAM
  // terminate GROUP NODE INSTANCE_ID`, `PROGRAM list` (contract v2).
  std::filesystem::path command;
  std::chrono::milliseconds timeout{900'000};  // one call of it
  // A create that has not returned within create_timeout is abandoned: the
  // slot tries again (a new token) and whatever the hung call makes once
  // it returns is terminated. 0: wait for `timeout`.
  std::chrono::milliseconds create_timeout{300'000};
  unsigned max_parallel_creates = 16;  // creates in flight, all groups
  // A slot's retryable failed create waits create_backoff, doubled for each
  // further one up to 600 s; an alert event after create_alert_after in a row.
  std::chrono::milliseconds create_backoff{10'000};
  unsigned create_alert_after = 5;
  std::chrono::milliseconds capacity_backoff{300'000};  // a group without capacity waits
  unsigned max_bootstrap_failures = 3;                  // lifecycle failures in a row stop a group
  std::chrono::milliseconds min_count_timeout{3LL * 3600 * 1000};
  std::filesystem::path lifecycle_log_dir = "/var/log/auto-resume/lifecycle";
  // An instance the provider's `list` shows and the controller does not
  // know (no open metering record with its token) is terminated once it
  // has been listed this long; 0: never (whole seconds).
  std::chrono::milliseconds orphan_timeout{1'800'000};
  // Merge mode (docs/provisioning.md, "The include file"): the controller
  // writes the groups' lines into slurm_conf_include, which slurm_conf
  // (empty: $SLURM_CONF, else /etc/slurm/slurm.conf) must Include. Empty:
  // the admin declares the slots by hand.
  std::filesystem::path slurm_conf;
  std::filesystem::path slurm_conf_include;
  // Run for a change of the include's NodeName lines (a new group, a new
  // max_count); empty: a restart_required event, and the admin restarts.
  std::vector<std::string> slurmctld_restart_command;
  std::chrono::milliseconds slurmctld_restart_timeout{120'000};  // command + slurmctld back
};

struct DaemonConfig {
  Endpoint listen{"127.0.0.1", kDefaultPort};
  // The Prometheus endpoint (HTTP GET /metrics); none by default. A port
  // alone listens on loopback: the metrics name node groups, and a scrape
  // reads the store.
  std::optional<Endpoint> metrics_listen;
  // Run for each give_up and requeued event, as Slurm runs MailProg:
  // `PROGRAM -s SUBJECT USER`, the event's detail on stdin and its facts in
  // AUTO_RESUME_* variables (docs/resume.md); empty: none.
  std::filesystem::path notify_command;
  std::filesystem::path state_dir = "/var/lib/auto-resume";
  ProviderKind provider = ProviderKind::local;  // must be named in the file
  // The relaunch budget of one run: at most max_attempts relaunches within
  // attempt_window; an attempt that runs healthy for healthy_after (0: off)
  // starts the count and the backoff over. The window is long next to
  // healthy_after so that a run failing just before healthy_after each time
  // still gives up (config_warnings). docs/resume.md, "Relaunch budget".
  unsigned max_attempts = 3;
  std::chrono::milliseconds attempt_window{24LL * 3600 * 1000};
  std::chrono::milliseconds healthy_after{30LL * 60 * 1000};
  // Hung steps (docs/resume.md, "Hangs and crashes"): an attempt of a run
  // that beat before must beat within hang_first_beat_timeout of its start;
  // --auto-resume-hang-timeout=auto is never shorter than
  // hang_timeout_floor; a hang signal is followed by hang_signal_grace
  // before the step is cancelled; more than max_hang_restarts hangs in a row
  // with no new highest step between them end in give_up.
  std::chrono::milliseconds hang_first_beat_timeout{30LL * 60 * 1000};
  std::chrono::milliseconds hang_timeout_floor{60'000};
  std::chrono::milliseconds hang_signal_grace{10'000};
  unsigned max_hang_restarts = 3;
  // After a protected step failed with no node at fault, the node agents
  // run their quick checks (quick; none: off) and the verdict waits for
  // them failure_check_timeout at most. docs/resume.md.
  bool failure_check = true;
  std::chrono::milliseconds failure_check_timeout{30'000};
  // munged's socket for decoding credentials; empty: munge's default.
  std::string munge_socket;

  // The wait before the second relaunch of a run; it doubles for each
  // further one, up to kMaxBackoff. The first relaunch does not wait.
  std::chrono::milliseconds backoff{10'000};
  static constexpr std::chrono::seconds kMaxBackoff{600};
  // How often the slurmd of each node under a running protected step is
  // probed, and how many probes in a row must go unanswered (0: no probes)
  // before the node counts as failed, ahead of Slurm's SlurmdTimeout.
  // Before a node that only the probes find silent is taken (Slurm still
  // shows it up), the agents of two other nodes are asked to probe it
  // (cross-checks); and while more than probe_max_silent_percent of the
  // nodes probed are silent at once, none counts (the controller's own
  // network is the likelier fault).
  std::chrono::milliseconds probe_interval{1'000};
  // How often the engine reads slurmctld's node list and the protected
  // jobs and steps while nothing is under way (no repair, no suspicion, no
  // step ending, no call of the controller's in flight); while something
  // is, at every look (0: always at every look). A read of 10,000 nodes
  // costs slurmctld about 10 ms (docs/design.md, "Sizing").
  std::chrono::milliseconds slurm_read_interval{5'000};
  unsigned probe_failures = 3;
  unsigned probe_max_silent_percent = 50;
  // After a step ends on its own, how long to look for a node at fault
  // before answering no_fault (a node's failure can end the step before
  // Slurm or a probe has seen it).
  std::chrono::milliseconds end_window{3'000};
  // The longest a repair (node out, replacement, expansion) may take before
  // the step gets give_up. With no idle node a repair waits for the
  // provider's replacement: the default lets one whole try of it
  // (provider_timeout + register_timeout + kJoinAllowance) finish
  // (config_warnings, docs/resume.md).
  std::chrono::milliseconds repair_timeout{1'800'000};
  // What a replaced node that is back takes to join the job (its helper
  // allocation, which the engine waits 30 s for before it chooses another
  // node, and the merge), counted into a repair that waits for it.
  static constexpr std::chrono::seconds kJoinAllowance{60};
  // Decided steps and events older than this are forgotten (checked hourly).
  std::chrono::milliseconds retention{30LL * 24 * 3600 * 1000};
  // A relaunch needs at least this much of the job's time limit left.
  std::chrono::milliseconds min_time_left{120'000};
  // provider=local: the command that starts a node's slurmd again, split on
  // blanks, "{node}" replaced by the node's name. Unset: only idle nodes of
  // the job's partition replace failed ones.
  std::vector<std::string> local_restart_command;
  // provider=command (or spares): the program run as `PROGRAM replace NODE`.
  std::filesystem::path provider_command;
  // provider=spares: how many spare nodes each partition keeps.
  unsigned spares = 1;
  // The longest one provider call may take (then it is killed and counts as
  // failed), how often it is tried for one replacement, and the wait before
  // the second try (doubling for each further one).
  std::chrono::milliseconds provider_timeout{600'000};
  unsigned provider_retries = 3;
  std::chrono::milliseconds provider_backoff{10'000};
  // How long a replaced node's new instance may take to register with
  // slurmctld after the provider's call succeeded (a boot); then the try
  // counts as failed.
  std::chrono::milliseconds register_timeout{900'000};

  // Node agents' heartbeats: a node heard from before and silent this long,
  // whose slurmd does not answer either, is marked FAIL for replacement
  // (0: off). Nothing is marked while more than heartbeat_max_silent_percent
  // of the nodes heard from are silent at once.
  std::chrono::milliseconds heartbeat_timeout{10'000};
  unsigned heartbeat_max_silent_percent = 50;
  // A heartbeat for a node is taken only from the node's own address: its
  // NodeAddr or NodeHostname as slurmctld has them (resolved), or an address
  // of these entries (`NODES=ADDRESS[/PREFIX]`, blank-separated) for the
  // node. This catches an agent started with another node's --node.
  std::vector<HeartbeatBind> heartbeat_bind;

  // Guard rails (docs/guard.md): `observe` acts on nothing and says what it
  // would have done. The circuit breaker: more node marks (FAIL or DOWN set
  // by the controller) or node replacements (provider calls) within an
  // hour than these allow, not counting those whose repair succeeded, stop
  // every action until an admin's `auto-resume resume-actions`, or until
  // breaker_reset_after has passed with nothing held back (0: only the
  // admin's).
  ActionMode mode = ActionMode::act;
  ActionLimit max_marks_per_hour{};
  ActionLimit max_replacements_per_hour{};
  std::chrono::milliseconds breaker_reset_after{3'600'000};

  // Connections (docs/protocol.md, "Limits"). A connection that has not
  // authenticated (sent its first request) within auth_timeout is closed;
  // at most max_unauthenticated wait for that at once (a new one closes the
  // oldest of them that has sent nothing whole yet). Once authenticated, a
  // user other than root and SlurmUser holds at most max_user_connections.
  // Of the daemon's descriptors (RLIMIT_NOFILE), reserved_fds are never used
  // for connections (the engine's slurmctld calls, the store, the provider's
  // processes) and privileged_connections only for root's and SlurmUser's.
  std::chrono::milliseconds auth_timeout{5'000};
  unsigned max_unauthenticated = 128;
  unsigned max_user_connections = 1024;  // each protected srun holds one
  unsigned reserved_fds = 128;
  unsigned privileged_connections = 128;

  // The store's growth (docs/security.md, "Bounds"): the protected steps
  // one job, and one user, may register within an hour (a relaunch counts
  // but is never refused), and the MiB the store's data may take; past
  // either, a new step is refused (`busy`) and runs unprotected.
  unsigned max_job_steps_per_hour = 600;
  unsigned max_user_steps_per_hour = 3000;
  unsigned max_store_mb = 1024;

  ProvisionConfig provision;
};

// Parses the text of a configuration file; `origin` (the file's name) starts
// every error message, with the line number: "FILE:3: unknown key 'x'".
DaemonConfig parse_daemon_config(std::string_view text, std::string_view origin);

// Reads and parses a file; a missing or unreadable file is a ConfigError.
DaemonConfig load_daemon_config(const std::filesystem::path& file);

// The effective configuration, in the file's own format: each key whose
// feature is on (a key that only a provider, continuous provisioning or
// merge mode reads is left out without it), in the table's order.
std::string render(const DaemonConfig& config);

// One key of the file, from the table that parses and prints them all
// (daemon_config.cpp): what `auto-resumed --settings` prints, and what the
// man page and the example file are checked against.
struct SettingInfo {
  std::string key;
  std::string default_value;  // as the file would write it; "unset", or why there is none
  std::string values;         // what it takes: "0 to 100", "0, or 0.1 s to 600 s"
  std::string doc;            // what it does, in one line
};
std::vector<SettingInfo> daemon_settings();
// daemon_settings() for people: for each key, its name on a line, then
// "    default DEFAULT; takes VALUES" and "    DOC".
std::string describe_settings();

// Whether the configured provider can replace nodes at all: `local` with
// local_restart_command, `command`, `spares` with either command.
bool can_replace(const DaemonConfig& config);

// The longest a repair's wait for a replaced node may take: one provider
// call, the new instance's registration and kJoinAllowance.
std::chrono::milliseconds replacement_wait(const DaemonConfig& config);

// The longest srun may wait for a verdict: end_window + repair_timeout + the
// longest backoff (kMaxBackoff), the controller's own deadline
// (controller/resume/deadline.hpp). The plugstack line's verdict_timeout
// must be at least this.
std::chrono::milliseconds verdict_wait(const DaemonConfig& config);

// Settings that parse but contradict each other, one sentence each naming
// the values, what goes wrong and what to change: a repair given up before
// the replacement it waits for can be back, a relaunch budget that never
// runs out for a run failing just before healthy_after, one longer than
// retention (the counted attempts are forgotten first), or srun's default
// verdict_timeout shorter than verdict_wait. The defaults give none.
// parse_daemon_config refuses what cannot work; these can, if not as meant.
std::vector<std::string> config_warnings(const DaemonConfig& config);

}  // namespace ar
