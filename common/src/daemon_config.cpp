#include "autoresume/daemon_config.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

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

constexpr std::string_view kKnownKeys =
    "listen, metrics_listen, notify_command, state_dir, provider, max_attempts, attempt_window, "
    "healthy_after, hang_first_beat_timeout, hang_timeout_floor, hang_signal_grace, "
    "max_hang_restarts, failure_check, failure_check_timeout, munge_socket, "
    "backoff, probe_interval, slurm_read_interval, probe_failures, probe_max_silent_percent, "
    "end_window, "
    "repair_timeout, min_time_left, local_restart_command, "
    "provider_command, provider_timeout, provider_retries, provider_backoff, heartbeat_timeout, "
    "heartbeat_max_silent_percent, heartbeat_bind, spares, register_timeout, retention, "
    "auth_timeout, "
    "max_unauthenticated, max_user_connections, reserved_fds, privileged_connections, "
    "max_job_steps_per_hour, max_user_steps_per_hour, max_store_mb, "
    "mode, max_marks_per_hour, max_replacements_per_hour, breaker_reset_after, "
    "node_provisioning, groups_dir, "
    "provision_command, provision_timeout, create_timeout, max_parallel_creates, create_backoff, "
    "create_alert_after, capacity_backoff, max_bootstrap_failures, min_count_timeout, "
    "lifecycle_log_dir, orphan_timeout, slurm_conf, slurm_conf_include, "
    "slurmctld_restart_command, slurmctld_restart_timeout";

// The provisioning keys but node_provisioning itself.
constexpr std::array<std::string_view, 16> kProvisionKeys = {"groups_dir",
                                                             "provision_command",
                                                             "provision_timeout",
                                                             "create_timeout",
                                                             "max_parallel_creates",
                                                             "create_backoff",
                                                             "create_alert_after",
                                                             "capacity_backoff",
                                                             "max_bootstrap_failures",
                                                             "min_count_timeout",
                                                             "lifecycle_log_dir",
                                                             "orphan_timeout",
                                                             "slurm_conf",
                                                             "slurm_conf_include",
                                                             "slurmctld_restart_command",
                                                             "slurmctld_restart_timeout"};
// The keys that work only with slurm_conf_include.
constexpr std::array<std::string_view, 3> kIncludeKeys = {"slurm_conf", "slurmctld_restart_command",
                                                          "slurmctld_restart_timeout"};

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

// The connection limits; false for another key.
bool apply_limit(DaemonConfig& config, const std::string& key, const std::string& value) {
  auto count = [&](std::uint64_t max) {
    return static_cast<unsigned>(parse_uint(key, value, 1, max));
  };
  if (key == "auth_timeout")
    config.auth_timeout =
        parse_seconds(key, value, std::chrono::seconds{60}, std::chrono::seconds{1});
  else if (key == "max_unauthenticated")
    config.max_unauthenticated = count(100'000);
  else if (key == "max_user_connections")
    config.max_user_connections = count(100'000);
  else if (key == "reserved_fds")
    config.reserved_fds = count(100'000);
  else if (key == "privileged_connections")
    config.privileged_connections = count(100'000);
  else if (key == "max_job_steps_per_hour")
    config.max_job_steps_per_hour = count(1'000'000);
  else if (key == "max_user_steps_per_hour")
    config.max_user_steps_per_hour = count(1'000'000);
  else if (key == "max_store_mb")
    config.max_store_mb = static_cast<unsigned>(parse_uint(key, value, 16, 1'048'576));
  else
    return false;
  return true;
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

// The guard rails' settings; false for another key.
bool apply_provision(ProvisionConfig& config, const std::string& key, const std::string& value) {
  using std::chrono::hours;
  using std::chrono::seconds;
  if (key == "node_provisioning") {
    if (value == "off") {
      config.mode = Provisioning::off;
    } else if (value == "continuous") {
      config.mode = Provisioning::continuous;
    } else {
      invalid_value(key, value, "expected off or continuous");
    }
  } else if (key == "groups_dir") {
    config.groups_dir = parse_absolute_path(key, value);
  } else if (key == "provision_command") {
    config.command = parse_absolute_path(key, value);
  } else if (key == "provision_timeout") {
    config.timeout = parse_seconds(key, value, hours{24}, seconds{1});
  } else if (key == "create_timeout") {
    config.create_timeout = value == "0" ? std::chrono::milliseconds{0}
                                         : parse_seconds(key, value, hours{24}, seconds{1});
  } else if (key == "max_parallel_creates") {
    config.max_parallel_creates = static_cast<unsigned>(parse_uint(key, value, 1, 10'000));
  } else if (key == "create_backoff") {
    config.create_backoff = parse_seconds(key, value, seconds{600}, seconds{1});
  } else if (key == "create_alert_after") {
    config.create_alert_after = static_cast<unsigned>(parse_uint(key, value, 1, 1000));
  } else if (key == "capacity_backoff") {
    config.capacity_backoff = parse_seconds(key, value, hours{24}, seconds{1});
  } else if (key == "max_bootstrap_failures") {
    config.max_bootstrap_failures = static_cast<unsigned>(parse_uint(key, value, 1, 1000));
  } else if (key == "min_count_timeout") {
    config.min_count_timeout = parse_seconds(key, value, hours{24 * 7}, seconds{1});
  } else if (key == "lifecycle_log_dir") {
    config.lifecycle_log_dir = parse_absolute_path(key, value);
  } else if (key == "orphan_timeout") {
    config.orphan_timeout = std::chrono::seconds{parse_uint(key, value, 0, 7 * 24 * 3600)};
  } else if (key == "slurm_conf") {
    config.slurm_conf = parse_absolute_path(key, value);
  } else if (key == "slurm_conf_include") {
    config.slurm_conf_include = parse_absolute_path(key, value);
  } else if (key == "slurmctld_restart_command") {
    config.slurmctld_restart_command = parse_words(key, value);
  } else if (key == "slurmctld_restart_timeout") {
    config.slurmctld_restart_timeout = parse_seconds(key, value, seconds{3600}, seconds{1});
  } else {
    return false;
  }
  return true;
}

bool apply_guard(DaemonConfig& config, const std::string& key, const std::string& value) {
  if (key == "mode") {
    if (value == "act")
      config.mode = ActionMode::act;
    else if (value == "observe")
      config.mode = ActionMode::observe;
    else
      invalid_value(key, value, "expected act or observe");
  } else if (key == "max_marks_per_hour") {
    config.max_marks_per_hour = parse_limit(key, value);
  } else if (key == "max_replacements_per_hour") {
    config.max_replacements_per_hour = parse_limit(key, value);
  } else if (key == "breaker_reset_after") {
    config.breaker_reset_after = value == "0"
                                     ? std::chrono::milliseconds{0}
                                     : parse_seconds(key, value, std::chrono::hours{24 * 30});
  } else {
    return false;
  }
  return true;
}

void apply(DaemonConfig& config, const std::string& key, const std::string& value) {
  if (key == "listen") {
    config.listen = parse_endpoint(key, value);
  } else if (key == "metrics_listen") {
    config.metrics_listen = parse_metrics_listen(key, value);
  } else if (key == "state_dir") {
    config.state_dir = parse_absolute_path(key, value);
  } else if (key == "provider") {
    config.provider = parse_provider(value);
  } else if (key == "max_attempts") {
    config.max_attempts = static_cast<unsigned>(parse_uint(key, value, 0, 100));
  } else if (key == "attempt_window") {
    config.attempt_window =
        parse_seconds(key, value, std::chrono::hours{24 * 3650}, std::chrono::seconds{1});
  } else if (key == "healthy_after") {
    config.healthy_after = value == "0" ? std::chrono::milliseconds{0}
                                        : parse_seconds(key, value, std::chrono::hours{24 * 3650});
  } else if (key == "hang_first_beat_timeout") {
    config.hang_first_beat_timeout =
        parse_seconds(key, value, std::chrono::hours{24 * 7}, std::chrono::seconds{1});
  } else if (key == "hang_timeout_floor") {
    config.hang_timeout_floor =
        parse_seconds(key, value, std::chrono::hours{24 * 7}, std::chrono::seconds{1});
  } else if (key == "hang_signal_grace") {
    config.hang_signal_grace = value == "0" ? std::chrono::milliseconds{0}
                                            : parse_seconds(key, value, std::chrono::seconds{600});
  } else if (key == "failure_check") {
    if (value != "quick" && value != "none") invalid_value(key, value, "expected quick or none");
    config.failure_check = value == "quick";
  } else if (key == "failure_check_timeout") {
    config.failure_check_timeout =
        parse_seconds(key, value, std::chrono::seconds{600}, std::chrono::seconds{1});
  } else if (key == "max_hang_restarts") {
    config.max_hang_restarts = static_cast<unsigned>(parse_uint(key, value, 0, 100));
  } else if (key == "munge_socket") {
    config.munge_socket = parse_absolute_path(key, value);
  } else if (key == "backoff") {
    config.backoff = value == "0" ? std::chrono::milliseconds{0}
                                  : parse_seconds(key, value, DaemonConfig::kMaxBackoff);
  } else if (key == "probe_interval") {
    config.probe_interval = parse_seconds(key, value, std::chrono::seconds{60});
  } else if (key == "slurm_read_interval") {
    config.slurm_read_interval = value == "0" ? std::chrono::milliseconds{0}
                                              : parse_seconds(key, value, std::chrono::seconds{60});
  } else if (key == "probe_failures") {
    config.probe_failures = static_cast<unsigned>(parse_uint(key, value, 0, 100));
  } else if (key == "probe_max_silent_percent") {
    config.probe_max_silent_percent = static_cast<unsigned>(parse_uint(key, value, 1, 100));
  } else if (key == "end_window") {
    config.end_window = parse_seconds(key, value, std::chrono::seconds{600});
  } else if (key == "retention") {
    config.retention =
        parse_seconds(key, value, std::chrono::hours{24 * 3650}, std::chrono::hours{1});
  } else if (key == "repair_timeout") {
    config.repair_timeout =
        parse_seconds(key, value, std::chrono::hours{24}, std::chrono::seconds{1});
  } else if (key == "min_time_left") {
    config.min_time_left = value == "0" ? std::chrono::milliseconds{0}
                                        : parse_seconds(key, value, std::chrono::hours{24 * 365});
  } else if (key == "local_restart_command") {
    config.local_restart_command = parse_command(key, value);
  } else if (key == "provider_command") {
    config.provider_command = parse_absolute_path(key, value);
  } else if (key == "notify_command") {
    config.notify_command = parse_absolute_path(key, value);
  } else if (key == "provider_timeout") {
    config.provider_timeout =
        parse_seconds(key, value, std::chrono::hours{24}, std::chrono::seconds{1});
  } else if (key == "provider_retries") {
    config.provider_retries = static_cast<unsigned>(parse_uint(key, value, 1, 100));
  } else if (key == "provider_backoff") {
    config.provider_backoff = value == "0" ? std::chrono::milliseconds{0}
                                           : parse_seconds(key, value, std::chrono::minutes{10});
  } else if (key == "register_timeout") {
    config.register_timeout =
        parse_seconds(key, value, std::chrono::hours{24}, std::chrono::seconds{1});
  } else if (key == "heartbeat_timeout") {
    config.heartbeat_timeout =
        value == "0" ? std::chrono::milliseconds{0}
                     : parse_seconds(key, value, std::chrono::hours{1}, std::chrono::seconds{1});
  } else if (key == "heartbeat_bind") {
    config.heartbeat_bind = parse_heartbeat_bind(key, value);
  } else if (key == "spares") {
    config.spares = static_cast<unsigned>(parse_uint(key, value, 1, 1000));
  } else if (key == "heartbeat_max_silent_percent") {
    config.heartbeat_max_silent_percent = static_cast<unsigned>(parse_uint(key, value, 1, 100));
  } else if (!apply_limit(config, key, value) && !apply_guard(config, key, value) &&
             !apply_provision(config.provision, key, value)) {
    throw ConfigError("unknown key '" + key + "' (known: " + std::string(kKnownKeys) + ")");
  }
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
  if (config.mode == Provisioning::off) {
    for (const auto key : kProvisionKeys)
      if (seen.contains(std::string(key)))
        throw ConfigError(std::string(origin) + ": " + std::string(key) +
                          " is set but node_provisioning is off (node_provisioning=continuous "
                          "turns it on)");
    return;
  }
  if (config.slurm_conf_include.empty())
    for (const auto key : kIncludeKeys)
      if (seen.contains(std::string(key)))
        throw ConfigError(std::string(origin) + ": " + std::string(key) +
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
  std::ostringstream out;
  out << "listen=" << config.listen.str() << "\n"
      << "metrics_listen=" << (config.metrics_listen ? config.metrics_listen->str() : "off") << "\n"
      << "state_dir=" << config.state_dir.string() << "\n"
      << "provider=" << to_string(config.provider) << "\n"
      << "max_attempts=" << config.max_attempts << "\n"
      << "attempt_window=" << seconds_text(config.attempt_window) << "\n"
      << "healthy_after=" << seconds_text(config.healthy_after) << "\n"
      << "hang_first_beat_timeout=" << seconds_text(config.hang_first_beat_timeout) << "\n"
      << "hang_timeout_floor=" << seconds_text(config.hang_timeout_floor) << "\n"
      << "hang_signal_grace=" << seconds_text(config.hang_signal_grace) << "\n"
      << "max_hang_restarts=" << config.max_hang_restarts << "\n"
      << "failure_check=" << (config.failure_check ? "quick" : "none") << "\n"
      << "failure_check_timeout=" << seconds_text(config.failure_check_timeout) << "\n"
      << "backoff=" << seconds_text(config.backoff) << "\n"
      << "probe_interval=" << seconds_text(config.probe_interval) << "\n"
      << "slurm_read_interval=" << seconds_text(config.slurm_read_interval) << "\n"
      << "probe_failures=" << config.probe_failures << "\n"
      << "probe_max_silent_percent=" << config.probe_max_silent_percent << "\n"
      << "end_window=" << seconds_text(config.end_window) << "\n"
      << "repair_timeout=" << seconds_text(config.repair_timeout) << "\n"
      << "retention=" << seconds_text(config.retention) << "\n"
      << "min_time_left=" << seconds_text(config.min_time_left) << "\n"
      << "provider_timeout=" << seconds_text(config.provider_timeout) << "\n"
      << "provider_retries=" << config.provider_retries << "\n"
      << "provider_backoff=" << seconds_text(config.provider_backoff) << "\n"
      << "register_timeout=" << seconds_text(config.register_timeout) << "\n"
      << "heartbeat_timeout=" << seconds_text(config.heartbeat_timeout) << "\n"
      << "heartbeat_max_silent_percent=" << config.heartbeat_max_silent_percent << "\n"
      << "auth_timeout=" << seconds_text(config.auth_timeout) << "\n"
      << "max_unauthenticated=" << config.max_unauthenticated << "\n"
      << "max_user_connections=" << config.max_user_connections << "\n"
      << "reserved_fds=" << config.reserved_fds << "\n"
      << "privileged_connections=" << config.privileged_connections << "\n"
      << "max_job_steps_per_hour=" << config.max_job_steps_per_hour << "\n"
      << "max_user_steps_per_hour=" << config.max_user_steps_per_hour << "\n"
      << "max_store_mb=" << config.max_store_mb << "\n"
      << "mode=" << to_string(config.mode) << "\n"
      << "max_marks_per_hour=" << config.max_marks_per_hour.str() << "\n"
      << "max_replacements_per_hour=" << config.max_replacements_per_hour.str() << "\n"
      << "breaker_reset_after=" << seconds_text(config.breaker_reset_after) << "\n";
  if (config.provider == ProviderKind::spares) out << "spares=" << config.spares << "\n";
  if (!config.heartbeat_bind.empty()) {
    out << "heartbeat_bind=";
    for (std::size_t i = 0; i < config.heartbeat_bind.size(); ++i)
      out << (i ? " " : "") << config.heartbeat_bind[i].str();
    out << "\n";
  }
  if (!config.provider_command.empty())
    out << "provider_command=" << config.provider_command.string() << "\n";
  if (!config.notify_command.empty())
    out << "notify_command=" << config.notify_command.string() << "\n";
  if (!config.munge_socket.empty()) out << "munge_socket=" << config.munge_socket << "\n";
  if (const auto& p = config.provision; p.mode == Provisioning::continuous) {
    out << "node_provisioning=" << to_string(p.mode) << "\n"
        << "groups_dir=" << p.groups_dir.string() << "\n"
        << "provision_command=" << p.command.string() << "\n"
        << "provision_timeout=" << seconds_text(p.timeout) << "\n"
        << "create_timeout=" << seconds_text(p.create_timeout) << "\n"
        << "max_parallel_creates=" << p.max_parallel_creates << "\n"
        << "create_backoff=" << seconds_text(p.create_backoff) << "\n"
        << "create_alert_after=" << p.create_alert_after << "\n"
        << "capacity_backoff=" << seconds_text(p.capacity_backoff) << "\n"
        << "max_bootstrap_failures=" << p.max_bootstrap_failures << "\n"
        << "min_count_timeout=" << seconds_text(p.min_count_timeout) << "\n"
        << "lifecycle_log_dir=" << p.lifecycle_log_dir.string() << "\n"
        << "orphan_timeout=" << seconds_text(p.orphan_timeout) << "\n";
    if (!p.slurm_conf_include.empty()) {
      out << "slurm_conf_include=" << p.slurm_conf_include.string() << "\n";
      if (!p.slurm_conf.empty()) out << "slurm_conf=" << p.slurm_conf.string() << "\n";
      if (!p.slurmctld_restart_command.empty())
        out << "slurmctld_restart_command=" << join(p.slurmctld_restart_command, " ") << "\n";
      out << "slurmctld_restart_timeout=" << seconds_text(p.slurmctld_restart_timeout) << "\n";
    }
  }
  if (!config.local_restart_command.empty()) {
    out << "local_restart_command=";
    for (std::size_t i = 0; i < config.local_restart_command.size(); ++i)
      out << (i ? " " : "") << config.local_restart_command[i];
    out << "\n";
  }
  return out.str();
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
