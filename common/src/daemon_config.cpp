#include "autoresume/daemon_config.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <set>

#include "autoresume/keyvalue.hpp"
#include "autoresume/plugin_config.hpp"
#include "autoresume/text.hpp"

namespace ar {

namespace {

// "1.5" for 1500 ms, "3" for 3000 ms: what parse_seconds reads back.
std::string seconds_text(std::chrono::milliseconds ms) {
  const auto whole = ms.count() / 1000;
  const auto frac = ms.count() % 1000;
  if (frac == 0) return std::to_string(whole);
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%lld.%03lld", static_cast<long long>(whole),
                static_cast<long long>(frac));
  std::string text(buffer);
  while (text.back() == '0') text.pop_back();
  return text;
}

ProviderKind parse_provider(std::string_view value) {
  if (value == "local") return ProviderKind::local;
  if (value == "command") return ProviderKind::command;
  if (value == "spares") return ProviderKind::spares;
  throw ConfigError("unknown provider '" + std::string(value) +
                    "' (available: local, command, spares)");
}

// metrics_listen: off, PORT (on loopback) or HOST:PORT.
std::optional<Endpoint> parse_metrics_listen(std::string_view key, std::string_view value) {
  if (value == "off") return std::nullopt;
  if (!value.empty() && value.find_first_not_of("0123456789") == std::string_view::npos) {
    try {
      return Endpoint{"127.0.0.1", static_cast<std::uint16_t>(parse_uint(key, value, 1, 65535))};
    } catch (const ConfigError&) {
      invalid_value(key, value, "the port must be a number from 1 to 65535");
    }
  }
  return parse_endpoint(key, value);
}

// A command line split on blanks; the program is an absolute path.
std::vector<std::string> parse_words(const std::string& key, std::string_view value) {
  std::vector<std::string> words;
  for (const auto word : blank_split(value)) words.emplace_back(word);
  if (words.empty()) throw ConfigError(key + " is empty");
  parse_absolute_path(key, words.front());
  return words;
}

// A command line whose arguments name the node with "{node}".
std::vector<std::string> parse_command(const std::string& key, std::string_view value) {
  auto words = parse_words(key, value);
  if (std::ranges::none_of(
          words, [](const std::string& w) { return w.find("{node}") != std::string::npos; }))
    throw ConfigError(key + " '" + std::string(value) + "' does not name the node ({node})");
  return words;
}

// heartbeat_bind: blank-separated NODES=ADDRESS[/PREFIX] entries.
std::vector<HeartbeatBind> parse_heartbeat_bind(const std::string& key, std::string_view value) {
  std::vector<HeartbeatBind> binds;
  for (const auto word : blank_split(value)) {
    const auto entry = std::string(word);
    const auto bad = [&](const std::string& why) {
      return ConfigError(key + " entry '" + entry + "' " + why +
                         " (write NODES=ADDRESS or NODES=ADDRESS/PREFIX, e.g. "
                         "gpu[1-8]=10.1.0.0/24)");
    };
    const auto equals = entry.find('=');
    if (equals == std::string::npos || equals == 0 || equals + 1 == entry.size())
      throw bad("is not NODES=ADDRESS");
    HeartbeatBind bind;
    bind.nodes = entry.substr(0, equals);
    auto network = entry.substr(equals + 1);
    const auto slash = network.find('/');
    bind.address = network.substr(0, slash);
    unsigned char bytes[16];
    if (inet_pton(AF_INET, bind.address.c_str(), bytes) == 1) {
      bind.prefix = 32;
    } else if (inet_pton(AF_INET6, bind.address.c_str(), bytes) == 1) {
      bind.prefix = 128;
      bind.v6 = true;
    } else {
      throw bad("has no numeric IPv4 or IPv6 address '" + bind.address + "'");
    }
    if (slash != std::string::npos) {
      try {
        bind.prefix = static_cast<unsigned>(
            parse_uint(key + " prefix", network.substr(slash + 1), 0, bind.prefix));
      } catch (const ConfigError& e) {
        throw bad(std::string("has a bad prefix: ") + e.what());
      }
    }
    binds.push_back(std::move(bind));
  }
  if (binds.empty()) throw ConfigError(key + " is empty");
  return binds;
}

// A count (1 to 1,000,000) or a percent of the nodes ("5%": 1 to 100).
ActionLimit parse_limit(const std::string& key, const std::string& value) {
  const bool percent = value.ends_with('%');
  try {
    const auto number = percent ? value.substr(0, value.size() - 1) : value;
    return {static_cast<unsigned>(parse_uint(key, number, 1, percent ? 100 : 1'000'000)), percent};
  } catch (const ConfigError&) {
    invalid_value(key, value,
                  "expected a count (1 to 1000000) or a percent of the nodes (1% to 100%)");
  }
}

// "0.1 s", "600 s", "24 h", "7 days": a bound of a duration, for people.
std::string duration_text(std::chrono::milliseconds ms) {
  const auto s = ms.count() / 1000;
  if (ms.count() % 1000 != 0 || s < 3600) return seconds_text(ms) + " s";
  if (s % 86400 == 0 && s > 86400) return std::to_string(s / 86400) + " days";
  if (s % 3600 == 0) return std::to_string(s / 3600) + " h";
  return std::to_string(s) + " s";
}

// ---- The table: every key of the file, one row each ----
//
// A row says how its value is read (parse) and written back (value), what
// it takes, what it does in one line, what must be on for it to be set at
// all, and when the effective configuration prints it. apply(), render(),
// the unknown-key error, the provisioning keys' checks and
// `auto-resumed --settings` are all made from it; the man page and the
// example file are checked against `--settings` (test/smoke/man_keys.sh).

// What must be on for a key to be set: nothing, node_provisioning, or
// slurm_conf_include too (merge mode). Ordered: each needs what the one
// before it needs.
enum class Needs { nothing, provisioning, include };

using Parse = std::function<void(DaemonConfig&, const std::string& key, const std::string& value)>;
using Value = std::function<std::string(const DaemonConfig&)>;

// How a key's value is read and written, and what it takes.
struct Kind {
  Parse parse;
  Value value;  // as the file would write it; empty: unset
  std::string values;
};

struct Setting {
  std::string_view key;
  Kind kind;
  std::string_view doc;
  Needs needs = Needs::nothing;
  // render() prints the key only where this holds; null: always.
  bool (*shown)(const DaemonConfig&) = nullptr;
  // Said instead of a default, for a key the file must set.
  std::string_view no_default = {};
};

template <class T>
T& at(DaemonConfig& config, T DaemonConfig::*member) {
  return config.*member;
}
template <class T>
T& at(DaemonConfig& config, T ProvisionConfig::*member) {
  return config.provision.*member;
}
template <class T>
const T& at(const DaemonConfig& config, T DaemonConfig::*member) {
  return config.*member;
}
template <class T>
const T& at(const DaemonConfig& config, T ProvisionConfig::*member) {
  return config.provision.*member;
}

// A whole number from min to max.
template <class M>
Kind count(M member, std::uint64_t min, std::uint64_t max) {
  return {[=](DaemonConfig& c, const std::string& key, const std::string& value) {
            at(c, member) = static_cast<unsigned>(parse_uint(key, value, min, max));
          },
          [=](const DaemonConfig& c) { return std::to_string(at(c, member)); },
          std::to_string(min) + " to " + std::to_string(max)};
}

// Seconds, fractions allowed, from min (by default 0.1 s) to max; with
// `zero`, 0 too (whatever 0 means for the key: its doc says).
struct Span {
  std::chrono::milliseconds max;
  std::chrono::milliseconds min{100};
  bool zero = false;
};
template <class M>
Kind duration(M member, Span span) {
  return {[=](DaemonConfig& c, const std::string& key, const std::string& value) {
            at(c, member) = span.zero && value == "0"
                                ? std::chrono::milliseconds{0}
                                : parse_seconds(key, value, span.max, span.min);
          },
          [=](const DaemonConfig& c) { return seconds_text(at(c, member)); },
          std::string(span.zero ? "0, or " : "") + duration_text(span.min) + " to " +
              duration_text(span.max)};
}

// An absolute path (a std::string or a std::filesystem::path member).
template <class M>
Kind path(M member) {
  return {[=](DaemonConfig& c, const std::string& key, const std::string& value) {
            at(c, member) = parse_absolute_path(key, value);
          },
          [=](const DaemonConfig& c) { return std::filesystem::path(at(c, member)).string(); },
          "an absolute path"};
}

// A circuit breaker's limit: a count or a percent of the nodes.
Kind limit(ActionLimit DaemonConfig::*member) {
  return {[=](DaemonConfig& c, const std::string& key, const std::string& value) {
            c.*member = parse_limit(key, value);
          },
          [=](const DaemonConfig& c) { return (c.*member).str(); },
          "a count (1 to 1000000), or a percent of the nodes (1% to 100%, at least 2 nodes)"};
}

// One of two words, each standing for a value of the member.
template <class M, class T>
Kind choice(M member, std::pair<std::string_view, T> first, std::pair<std::string_view, T> second) {
  const auto words = std::string(first.first) + " or " + std::string(second.first);
  return {[=](DaemonConfig& c, const std::string& key, const std::string& value) {
            if (value == first.first)
              at(c, member) = first.second;
            else if (value == second.first)
              at(c, member) = second.second;
            else
              invalid_value(key, value, "expected " + words);
          },
          [=](const DaemonConfig& c) {
            return std::string(at(c, member) == first.second ? first.first : second.first);
          },
          words};
}

bool provisioning_on(const DaemonConfig& c) { return c.provision.mode == Provisioning::continuous; }
bool merge_mode(const DaemonConfig& c) {
  return provisioning_on(c) && !c.provision.slurm_conf_include.empty();
}

const std::vector<Setting>& settings() {
  using std::chrono::hours;
  using std::chrono::minutes;
  using std::chrono::seconds;
  using C = DaemonConfig;
  using P = ProvisionConfig;
  using namespace std::string_view_literals;
  constexpr auto days = [](long long n) { return hours{24 * n}; };
  static const std::vector<Setting> table = {
      {"listen",
       {[](C& c, const std::string& key, const std::string& value) {
          c.listen = parse_endpoint(key, value);
        },
        [](const C& c) { return c.listen.str(); }, "HOST:PORT"},
       "the address to listen on: every login host, batch host and node must reach it"},
      {"metrics_listen",
       {[](C& c, const std::string& key, const std::string& value) {
          c.metrics_listen = parse_metrics_listen(key, value);
        },
        [](const C& c) { return c.metrics_listen ? c.metrics_listen->str() : "off"; },
        "off, PORT (on 127.0.0.1) or HOST:PORT"},
       "the Prometheus endpoint (HTTP GET /metrics); it names node groups, so keep it on loopback "
       "or a monitoring network"},
      {"state_dir", path(&C::state_dir),
       "the store's folder: the controller's own, mode 700, on local disk"},
      {"provider",
       {[](C& c, const std::string&, const std::string& value) {
          c.provider = parse_provider(value);
        },
        [](const C& c) { return std::string(to_string(c.provider)); }, "local, command or spares"},
       "how failed nodes are replaced (local is for development and tests)",
       Needs::nothing,
       nullptr,
       "none: the file must name it"},
      {"max_attempts", count(&C::max_attempts, 0, 100),
       "relaunches of one run within attempt_window before it is given up"},
      {"attempt_window", duration(&C::attempt_window, {.max = days(3650), .min = seconds{1}}),
       "the window max_attempts counts over"},
      {"healthy_after", duration(&C::healthy_after, {.max = days(3650), .zero = true}),
       "an attempt that runs this long starts the count and the backoff over (0: off)"},
      {"hang_first_beat_timeout",
       duration(&C::hang_first_beat_timeout, {.max = days(7), .min = seconds{1}}),
       "an attempt of a run that sent progress before must send it this soon after its start"},
      {"hang_timeout_floor", duration(&C::hang_timeout_floor, {.max = days(7), .min = seconds{1}}),
       "the shortest timeout --auto-resume-hang-timeout=auto learns"},
      {"hang_signal_grace", duration(&C::hang_signal_grace, {.max = seconds{600}, .zero = true}),
       "after the hang signal reached a hung step's tasks, the wait before the step is cancelled"},
      {"max_hang_restarts", count(&C::max_hang_restarts, 0, 100),
       "hangs in a row relaunched with no new highest training step; the next ends in give_up"},
      {"failure_check", choice(&C::failure_check, std::pair{"quick"sv, true}, {"none"sv, false}),
       "after a step failed with no node at fault, or hung: the node agents' quick checks "
       "(none: off)"},
      {"failure_check_timeout",
       duration(&C::failure_check_timeout, {.max = seconds{600}, .min = seconds{1}}),
       "the longest a verdict waits for the quick checks"},
      {"backoff", duration(&C::backoff, {.max = C::kMaxBackoff, .zero = true}),
       "the wait before a run's second relaunch, doubled for each further one"},
      {"probe_interval", duration(&C::probe_interval, {.max = seconds{60}}),
       "between probes of the slurmds under protected steps"},
      {"slurm_read_interval", duration(&C::slurm_read_interval, {.max = seconds{60}, .zero = true}),
       "between reads of slurmctld's nodes and jobs while nothing is under way (0: at every look)"},
      {"probe_failures", count(&C::probe_failures, 0, 100),
       "missed probes in a row that make a node failed (0: no probes)"},
      {"probe_max_silent_percent", count(&C::probe_max_silent_percent, 1, 100),
       "while more of the probed nodes than this are silent at once, none counts"},
      {"end_window", duration(&C::end_window, {.max = seconds{600}}),
       "after a step ended, how long to look for a failed node before answering no_fault"},
      {"repair_timeout", duration(&C::repair_timeout, {.max = hours{24}, .min = seconds{1}}),
       "a repair not done this long is given up (srun exits 75)"},
      {"retention", duration(&C::retention, {.max = days(3650), .min = hours{1}}),
       "how long decided steps and events are kept"},
      {"min_time_left", duration(&C::min_time_left, {.max = days(365), .zero = true}),
       "no relaunch with less of the job's time limit left"},
      {"provider_timeout", duration(&C::provider_timeout, {.max = hours{24}, .min = seconds{1}}),
       "the longest one provider call may take"},
      {"provider_retries", count(&C::provider_retries, 1, 100),
       "provider calls before a replacement is reported failed"},
      {"provider_backoff", duration(&C::provider_backoff, {.max = minutes{10}, .zero = true}),
       "the wait before the second provider call, doubled for each further one"},
      {"register_timeout", duration(&C::register_timeout, {.max = hours{24}, .min = seconds{1}}),
       "how long a new instance may take to register with slurmctld"},
      {"heartbeat_timeout",
       duration(&C::heartbeat_timeout, {.max = hours{1}, .min = seconds{1}, .zero = true}),
       "silence of a node's agent, its slurmd not answering either, that marks the node (0: off)"},
      {"heartbeat_max_silent_percent", count(&C::heartbeat_max_silent_percent, 1, 100),
       "while more of the nodes heard from than this are silent at once, none is marked"},
      {"auth_timeout", duration(&C::auth_timeout, {.max = seconds{60}, .min = seconds{1}}),
       "the longest a connection may take to authenticate"},
      {"max_unauthenticated", count(&C::max_unauthenticated, 1, 100'000),
       "connections waiting to authenticate at once"},
      {"max_user_connections", count(&C::max_user_connections, 1, 100'000),
       "connections of one user other than root and SlurmUser (each protected srun holds one)"},
      {"reserved_fds", count(&C::reserved_fds, 1, 100'000),
       "descriptors never used for connections (the controller's own work)"},
      {"privileged_connections", count(&C::privileged_connections, 1, 100'000),
       "descriptors kept for root's and SlurmUser's connections"},
      {"max_job_steps_per_hour", count(&C::max_job_steps_per_hour, 1, 1'000'000),
       "protected steps one job may register within an hour; the next run unprotected"},
      {"max_user_steps_per_hour", count(&C::max_user_steps_per_hour, 1, 1'000'000),
       "protected steps all the jobs of one user may register within an hour"},
      {"max_store_mb", count(&C::max_store_mb, 16, 1'048'576),
       "MiB the store's data may take; at it, new steps run unprotected"},
      {"mode",
       choice(&C::mode, std::pair{"act"sv, ActionMode::act}, {"observe"sv, ActionMode::observe}),
       "observe: act on nothing, log what would be done"},
      {"max_marks_per_hour", limit(&C::max_marks_per_hour),
       "node marks within an hour, of repairs not succeeded, before the circuit breaker trips"},
      {"max_replacements_per_hour", limit(&C::max_replacements_per_hour),
       "node replacements within an hour, of repairs not succeeded, before the breaker trips"},
      {"breaker_reset_after", duration(&C::breaker_reset_after, {.max = days(30), .zero = true}),
       "a tripped breaker resets itself after this long with nothing held back (0: only "
       "auto-resume resume-actions)"},
      {"spares", count(&C::spares, 1, 1000), "provider=spares: spare nodes kept per partition",
       Needs::nothing, [](const C& c) { return c.provider == ProviderKind::spares; }},
      {"heartbeat_bind",
       {[](C& c, const std::string& key, const std::string& value) {
          c.heartbeat_bind = parse_heartbeat_bind(key, value);
        },
        [](const C& c) {
          std::vector<std::string> entries;
          for (const auto& bind : c.heartbeat_bind) entries.push_back(bind.str());
          return join(entries, " ");
        },
        "NODES=ADDRESS[/PREFIX] ..., blank-separated"},
       "more addresses the nodes' heartbeats may come from, besides NodeAddr and NodeHostname",
       Needs::nothing,
       [](const C& c) { return !c.heartbeat_bind.empty(); }},
      {"provider_command", path(&C::provider_command),
       "provider=command (required) or spares: the program run as PROGRAM replace NODE",
       Needs::nothing, [](const C& c) { return !c.provider_command.empty(); }},
      {"notify_command", path(&C::notify_command),
       "run as Slurm's MailProg for each requeued and give_up verdict", Needs::nothing,
       [](const C& c) { return !c.notify_command.empty(); }},
      {"munge_socket", path(&C::munge_socket), "munged's socket (unset: munge's own)",
       Needs::nothing, [](const C& c) { return !c.munge_socket.empty(); }},
      {"node_provisioning",
       choice(&P::mode, std::pair{"off"sv, Provisioning::off},
              {"continuous"sv, Provisioning::continuous}),
       "continuous: keep each node group at its count (needs provision_command)", Needs::nothing,
       provisioning_on},
      {"groups_dir", path(&P::groups_dir),
       "the group files' folder, one NAME.conf a group: the controller's own", Needs::provisioning,
       provisioning_on},
      {"provision_command", path(&P::command),
       "the provider program (create, terminate, list); required by node_provisioning=continuous",
       Needs::provisioning, provisioning_on},
      {"provision_timeout", duration(&P::timeout, {.max = hours{24}, .min = seconds{1}}),
       "the longest one call of provision_command may take", Needs::provisioning, provisioning_on},
      {"create_timeout",
       duration(&P::create_timeout, {.max = hours{24}, .min = seconds{1}, .zero = true}),
       "a create not returned this long is abandoned and its slot tries again (0: wait for "
       "provision_timeout)",
       Needs::provisioning, provisioning_on},
      {"max_parallel_creates", count(&P::max_parallel_creates, 1, 10'000),
       "creates in flight, all groups together", Needs::provisioning, provisioning_on},
      {"create_backoff", duration(&P::create_backoff, {.max = seconds{600}, .min = seconds{1}}),
       "a slot's wait after a retryable failure, doubled for each further one up to 600 s",
       Needs::provisioning, provisioning_on},
      {"create_alert_after", count(&P::create_alert_after, 1, 1000),
       "retryable failures in a row before a create_failing event", Needs::provisioning,
       provisioning_on},
      {"capacity_backoff", duration(&P::capacity_backoff, {.max = hours{24}, .min = seconds{1}}),
       "a group's wait after the provider had no capacity", Needs::provisioning, provisioning_on},
      {"max_bootstrap_failures", count(&P::max_bootstrap_failures, 1, 1000),
       "lifecycle failures in a row that stop a group", Needs::provisioning, provisioning_on},
      {"min_count_timeout", duration(&P::min_count_timeout, {.max = days(7), .min = seconds{1}}),
       "how long an operation may wait for min_count before it rolls back", Needs::provisioning,
       provisioning_on},
      {"lifecycle_log_dir", path(&P::lifecycle_log_dir), "where the lifecycle scripts' output goes",
       Needs::provisioning, provisioning_on},
      {"orphan_timeout",
       {[](C& c, const std::string& key, const std::string& value) {
          c.provision.orphan_timeout = seconds{parse_uint(key, value, 0, 7 * 24 * 3600)};
        },
        [](const C& c) { return seconds_text(c.provision.orphan_timeout); },
        "0 to 604800 whole seconds"},
       "an instance the provider lists and the controller does not know is terminated after this "
       "long (0: never)",
       Needs::provisioning,
       provisioning_on},
      {"slurm_conf_include", path(&P::slurm_conf_include),
       "merge mode: the include file the controller writes (unset: the admin declares the slots)",
       Needs::provisioning, merge_mode},
      {"slurm_conf", path(&P::slurm_conf),
       "merge mode: the slurm.conf checked for the Include line (unset: $SLURM_CONF, else "
       "/etc/slurm/slurm.conf)",
       Needs::include, [](const C& c) { return merge_mode(c) && !c.provision.slurm_conf.empty(); }},
      {"slurmctld_restart_command",
       {[](C& c, const std::string& key, const std::string& value) {
          c.provision.slurmctld_restart_command = parse_words(key, value);
        },
        [](const C& c) { return join(c.provision.slurmctld_restart_command, " "); },
        "an absolute path and its arguments"},
       "merge mode: run for a change of the NodeName lines (unset: a restart_required event)",
       Needs::include,
       [](const C& c) { return merge_mode(c) && !c.provision.slurmctld_restart_command.empty(); }},
      {"slurmctld_restart_timeout",
       duration(&P::slurmctld_restart_timeout, {.max = seconds{3600}, .min = seconds{1}}),
       "merge mode: the restart command plus slurmctld's answer may take this long", Needs::include,
       merge_mode},
      {"local_restart_command",
       {[](C& c, const std::string& key, const std::string& value) {
          c.local_restart_command = parse_command(key, value);
        },
        [](const C& c) { return join(c.local_restart_command, " "); },
        "an absolute path and its arguments, {node} among them"},
       "provider=local, or spares without provider_command: restarts a node's slurmd",
       Needs::nothing,
       [](const C& c) { return !c.local_restart_command.empty(); }},
  };
  return table;
}

void apply(DaemonConfig& config, const std::string& key, const std::string& value) {
  for (const auto& setting : settings())
    if (setting.key == key) return setting.kind.parse(config, key, value);
  throw ConfigError("unknown key '" + key + "' (known: " + join(settings(), ", ", &Setting::key) +
                    ")");
}

}  // namespace

std::string HeartbeatBind::str() const {
  const bool whole = prefix == (v6 ? 128U : 32U);
  return nodes + "=" + address + (whole ? "" : "/" + std::to_string(prefix));
}

std::string_view to_string(ActionMode mode) {
  return mode == ActionMode::observe ? "observe" : "act";
}

unsigned ActionLimit::of(std::size_t nodes) const {
  if (!percent) return value;
  const auto share = (static_cast<std::uint64_t>(value) * nodes + 99) / 100;
  return static_cast<unsigned>(std::max<std::uint64_t>(kMinimum, share));
}

std::string ActionLimit::str() const { return std::to_string(value) + (percent ? "%" : ""); }

std::string_view to_string(ProviderKind kind) {
  switch (kind) {
    case ProviderKind::local:
      return "local";
    case ProviderKind::command:
      return "command";
    case ProviderKind::spares:
      return "spares";
  }
  return "?";
}

namespace {

void check_provision(const ProvisionConfig& config, const std::set<std::string>& seen,
                     std::string_view origin) {
  // The first key set that needs `needs` (or more).
  const auto set = [&](Needs needs) -> const Setting* {
    for (const auto& setting : settings())
      if (setting.needs >= needs && seen.contains(std::string(setting.key))) return &setting;
    return nullptr;
  };
  if (config.mode == Provisioning::off) {
    if (const auto* setting = set(Needs::provisioning))
      throw ConfigError(std::string(origin) + ": " + std::string(setting->key) +
                        " is set but node_provisioning is off (node_provisioning=continuous "
                        "turns it on)");
    return;
  }
  if (config.slurm_conf_include.empty())
    if (const auto* setting = set(Needs::include))
      throw ConfigError(std::string(origin) + ": " + std::string(setting->key) +
                        " is set but slurm_conf_include is not (the include file the "
                        "controller writes; without it the admin declares the slots)");
  if (config.command.empty())
    throw ConfigError(std::string(origin) +
                      ": node_provisioning=continuous needs provision_command (the program run "
                      "as 'PROGRAM create GROUP NODE TOKEN', 'PROGRAM terminate GROUP NODE "
                      "INSTANCE_ID' and 'PROGRAM list')");
}

}  // namespace

std::string_view to_string(Provisioning mode) {
  return mode == Provisioning::continuous ? "continuous" : "off";
}

DaemonConfig parse_daemon_config(std::string_view text, std::string_view origin) {
  DaemonConfig config;
  const auto seen = parse_settings(
      text, origin,
      [&](const std::string& key, const std::string& value) { apply(config, key, value); });
  if (!seen.contains("provider"))
    throw ConfigError(std::string(origin) +
                      ": provider is not set: name it explicitly (provider=local is for "
                      "development and tests)");
  if (config.provider == ProviderKind::command && config.provider_command.empty())
    throw ConfigError(std::string(origin) +
                      ": provider=command needs provider_command (the program run as "
                      "'PROGRAM replace NODE')");
  if (config.provider == ProviderKind::local && !config.provider_command.empty())
    throw ConfigError(std::string(origin) +
                      ": provider_command is set but provider is local, not command or spares");
  if (config.provider != ProviderKind::spares && seen.contains("spares"))
    throw ConfigError(std::string(origin) + ": spares is set but provider is " +
                      std::string(to_string(config.provider)) + ", not spares");
  check_provision(config.provision, seen, origin);
  return config;
}

DaemonConfig load_daemon_config(const std::filesystem::path& file) {
  return parse_daemon_config(read_config_file(file), file.string());
}

std::string render(const DaemonConfig& config) {
  std::string out;
  for (const auto& setting : settings())
    if (!setting.shown || setting.shown(config))
      out += std::string(setting.key) + "=" + setting.kind.value(config) + "\n";
  return out;
}

std::vector<SettingInfo> daemon_settings() {
  const DaemonConfig defaults;
  std::vector<SettingInfo> infos;
  for (const auto& setting : settings()) {
    auto value = setting.kind.value(defaults);
    if (!setting.no_default.empty()) value = setting.no_default;
    infos.push_back({std::string(setting.key), value.empty() ? "unset" : value, setting.kind.values,
                     std::string(setting.doc)});
  }
  return infos;
}

std::string describe_settings() {
  std::string out;
  for (const auto& info : daemon_settings())
    out += info.key + "\n    default " + info.default_value + "; takes " + info.values + "\n    " +
           info.doc + "\n";
  return out;
}

bool can_replace(const DaemonConfig& config) {
  switch (config.provider) {
    case ProviderKind::local:
      return !config.local_restart_command.empty();
    case ProviderKind::command:
      return !config.provider_command.empty();
    case ProviderKind::spares:
      return !config.provider_command.empty() || !config.local_restart_command.empty();
  }
  return false;
}

std::chrono::milliseconds replacement_wait(const DaemonConfig& config) {
  return config.provider_timeout + config.register_timeout + DaemonConfig::kJoinAllowance;
}

std::chrono::milliseconds verdict_wait(const DaemonConfig& config) {
  return config.end_window + config.repair_timeout + DaemonConfig::kMaxBackoff;
}

namespace {

void budget_warnings(const DaemonConfig& config, std::vector<std::string>& warnings) {
  // Relaunches that each ran just under healthy_after come healthy_after
  // apart: a window shorter than max_attempts of them never fills.
  const auto loop = config.healthy_after * config.max_attempts;
  if (config.healthy_after.count() > 0 && config.max_attempts > 0 && config.attempt_window < loop)
    warnings.push_back(
        "attempt_window=" + seconds_text(config.attempt_window) +
        " s is shorter than max_attempts x healthy_after = " + seconds_text(loop) +
        " s: a run that fails just before healthy_after=" + seconds_text(config.healthy_after) +
        " s every time never has max_attempts=" + std::to_string(config.max_attempts) +
        " relaunches within the window and is relaunched forever; raise attempt_window to " +
        seconds_text(loop) + " or more, or lower healthy_after");
  if (config.attempt_window > config.retention)
    warnings.push_back("attempt_window=" + seconds_text(config.attempt_window) +
                       " s is longer than retention=" + seconds_text(config.retention) +
                       " s: attempts older than retention are forgotten and no longer count; "
                       "raise retention to " +
                       seconds_text(config.attempt_window) + " or more");
}

}  // namespace

std::vector<std::string> config_warnings(const DaemonConfig& config) {
  std::vector<std::string> warnings;
  // Without a command the provider replaces nothing: a repair waits only
  // for an idle node (or a spare), never for a replacement.
  if (can_replace(config) && config.repair_timeout < replacement_wait(config)) {
    const auto limit = seconds_text(config.repair_timeout);
    const auto wait = seconds_text(replacement_wait(config));
    warnings.push_back(
        "repair_timeout=" + limit + " s is shorter than provider_timeout + register_timeout + " +
        std::to_string(DaemonConfig::kJoinAllowance.count()) + " s (the node joining the job) = " +
        wait + " s: with no " + (config.provider == ProviderKind::spares ? "spare and no " : "") +
        "idle node in the job's partition, a step waits for its failed node to be replaced and is "
        "given up (srun exits 75) after " +
        limit + " s, while the replacement may take up to " + wait +
        " s; raise repair_timeout to " + wait +
        " or more, or lower provider_timeout or register_timeout to what a replacement takes");
  }
  budget_warnings(config, warnings);
  if (const auto& p = config.provision; p.mode == Provisioning::continuous &&
                                        p.create_timeout.count() > 0 &&
                                        p.create_timeout >= p.timeout)
    warnings.push_back("create_timeout=" + seconds_text(p.create_timeout) +
                       " s is not shorter than provision_timeout=" + seconds_text(p.timeout) +
                       " s: a hung create is killed at provision_timeout before it is abandoned; "
                       "lower create_timeout");
  const auto srun_default = PluginConfig{}.verdict_timeout;
  if (verdict_wait(config) > srun_default) {
    const auto wait = seconds_text(verdict_wait(config));
    warnings.push_back(
        "srun may wait end_window + repair_timeout + " +
        std::to_string(DaemonConfig::kMaxBackoff.count()) + " s (the longest backoff) = " + wait +
        " s for a verdict, more than the plugin's default verdict_timeout=" +
        seconds_text(srun_default) + " s: unless the plugstack line sets verdict_timeout=" + wait +
        " or more, srun stops waiting first, cancels the repair and keeps the step's "
        "status; or lower repair_timeout or end_window");
  }
  return warnings;
}

}  // namespace ar
