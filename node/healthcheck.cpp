// auto-resume-healthcheck: runs the health checks on this node and marks it
// when one fails: for replacement (state=fail reason="Action:Replace
// <check>: <detail>"), so that the resume controller moves protected steps
// off it, or, for a check named in drain_only, DRAIN only ("Action:Drain
// <check>: <detail>": no new jobs, running ones go on).
// Fit for slurmd's HealthCheckProgram, which runs it without arguments: the
// configuration file (/etc/auto-resume/healthcheck.conf) says what to
// check. The passive checks (gpu, dcgm, neuron, efa) take seconds; the
// active ones (cpu: stress-ng, dcgm-diag: dcgmi diag) run only on an idle
// or drained node, or with --on-demand. docs/health.md has the details.
//
// Exit status: 0 all passed (or not applicable, or skipped), 1 a check
// failed, 2 bad usage or configuration, or slurmctld could not be asked.

#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "autoresume/health.hpp"
#include "autoresume/health_config.hpp"
#include "autoresume/keyvalue.hpp"
#include "autoresume/text.hpp"
#include "autoresume/version.hpp"
#include "checks.hpp"
#include "node_name.hpp"
#include "slurm_adapter.hpp"

namespace {

using ar::health::HealthConfig;
using ar::health::Result;

// An option that sets a key of the configuration file, as the file would.
struct Setting {
  const char* option;
  const char* key;
  const char* type;
  const char* help;
  std::string value;
};

// What the command line asks for.
struct Options {
  std::string node = ar::this_node_name();
  std::string config_file;
  bool dry_run = false;
  bool on_demand = false;
  bool record_baseline = false;
  std::vector<std::string> checks;
  std::vector<std::string> drain_only;
  std::vector<Setting> settings{
      {"--gpus", "gpus", "N",
       "GPUs this node must have (default: its configured GRES, from slurmctld)", ""},
      {"--neuron-devices", "neuron_devices", "N",
       "Neuron devices this node must have (default 0: none; the neuron check is n/a)", ""},
      {"--efa-devices", "efa_devices", "N",
       "EFA devices this node must have (default 0: none; the efa check is n/a)", ""},
      {"--nvidia-smi", "nvidia_smi", "PROGRAM", "The nvidia-smi to run (default nvidia-smi)", ""},
      {"--dcgmi", "dcgmi", "PROGRAM", "The dcgmi to run (default dcgmi)", ""},
      {"--fi-info", "fi_info", "PROGRAM", "The fi_info to run (default fi_info)", ""},
      {"--fi-pingpong", "fi_pingpong", "PROGRAM", "The fi_pingpong to run (default fi_pingpong)",
       ""},
      {"--stress-ng", "stress_ng", "PROGRAM", "The stress-ng to run (default stress-ng)", ""},
      {"--neuron-sysfs", "neuron_sysfs", "DIR",
       "The Neuron driver's sysfs tree (default /sys/devices/virtual/neuron_device)", ""},
      {"--timeout", "timeout", "SECONDS",
       "How long each tool of a passive check may take (default 30)", ""},
      {"--stress-seconds", "stress_seconds", "SECONDS",
       "How long the cpu check stresses the node (default 60)", ""},
      {"--baseline-file", "baseline_file", "FILE",
       "This node's recorded cpu throughput (default /var/lib/auto-resume/cpu-baseline)", ""},
      {"--min-fraction", "min_fraction", "FRACTION",
       "The cpu check fails below this fraction of the baseline (default 0.5)", ""},
      {"--diag-level", "diag_level", "1-4", "dcgm-diag: the level of dcgmi diag -r (default 2)",
       ""},
      {"--diag-timeout", "diag_timeout", "SECONDS",
       "dcgm-diag: how long dcgmi diag may take (default 900)", ""},
      {"--disk-paths", "disk_paths", "PATHS",
       "disk: the file systems that must take a write, comma-separated (default /tmp)", ""},
      {"--disk-min-free-mb", "disk_min_free_mb", "MIB",
       "disk: the space each must have free (default 1024; 0: not looked at)", ""},
  };
};

// The command line's options, bound to `options` (which must stay put).
void add_options(CLI::App& app, Options& options) {
  app.add_option("--node", options.node,
                 "The node checked and marked (default: $SLURMD_NODENAME or the host name)")
      ->capture_default_str();
  app.add_option("--config", options.config_file,
                 std::string("The configuration file (default: ") +
                     ar::health::kDefaultHealthConfig + ", if it exists)")
      ->type_name("FILE");
  app.add_option("--check", options.checks,
                 "Checks to run (default gpu): gpu, dcgm, neuron, efa, disk (passive); cpu, "
                 "dcgm-diag (active)")
      ->type_name("CHECK");
  app.add_option("--drain-only", options.drain_only,
                 "Checks whose failure only drains the node (Action:Drain) instead of failing it")
      ->type_name("CHECK");
  for (auto& setting : options.settings)
    app.add_option(setting.option, setting.value, setting.help)->type_name(setting.type);
  app.add_flag("--dry-run", options.dry_run, "Report only; do not mark the node");
  app.add_flag("--record-baseline", options.record_baseline,
               "Write the cpu check's throughput as this node's baseline");
  app.add_flag("--on-demand", options.on_demand, "Run active checks even while the node runs jobs");
  app.set_version_flag("-V,--version", std::string("auto-resume-healthcheck ") + ar::kVersion);
}

// The configuration: the file's (--config, else the default file if it
// exists), with the keys the command line's options set. Throws on a bad
// file or value, naming the option that gave it.
HealthConfig load_config(const CLI::App& app, Options& options) {
  HealthConfig config;
  if (!options.config_file.empty())
    config = ar::health::load_health_config(options.config_file);
  else if (std::error_code ec; std::filesystem::exists(ar::health::kDefaultHealthConfig, ec))
    config = ar::health::load_health_config(ar::health::kDefaultHealthConfig);
  auto set = [&](const char* option, const char* key, const std::string& value) {
    try {
      ar::health::apply_health_setting(config, key, value);
    } catch (const ar::ConfigError& e) {
      throw ar::ConfigError(std::string(option) + ": " + e.what());
    }
  };
  if (app.count("--check") > 0) set("--check", "checks", ar::join(options.checks, ","));
  if (app.count("--drain-only") > 0)
    set("--drain-only", "drain_only", ar::join(options.drain_only, ","));
  for (auto& setting : options.settings) {
    if (app.count(setting.option) == 0) continue;
    // A relative path on the command line is relative to here.
    if (setting.key == std::string_view("baseline_file") ||
        setting.key == std::string_view("neuron_sysfs"))
      setting.value = std::filesystem::absolute(setting.value).string();
    set(setting.option, setting.key, setting.value);
  }
  return config;
}

// Runs the configured checks on `info`'s node, printing each result. Active
// checks are skipped while the node runs jobs, unless asked for on demand.
std::vector<Result> run_checks(const HealthConfig& config, const ar::slurm::NodeInfo& info,
                               const Options& options) {
  const unsigned gpus = config.gpus ? *config.gpus : ar::health::gpu_count_from_gres(info.gres);
  std::vector<Result> results;
  for (const auto& check : config.checks) {
    if (ar::health::is_active_check(check) && !options.on_demand && !info.idle && !info.drain) {
      fmt::print(
          "{}: skipped: {} runs jobs (active checks run on idle or drained nodes, or with "
          "--on-demand)\n",
          check, info.name);
      continue;
    }
    auto result = ar::healthcheck::run_check(check, config, gpus, options.record_baseline);
    fmt::print("{}: {}: {}\n", result.check, ar::health::to_string(result.status), result.detail);
    results.push_back(std::move(result));
  }
  return results;
}

// Marks the node for the failure that counts, if a check failed (FAIL for
// replacement, or DRAIN): the exit status, 0 when none failed, else 1.
int mark_node(const std::vector<Result>& results, const HealthConfig& config,
              const Options& options) {
  const Result* mark = ar::health::result_to_mark(results, config);
  if (mark == nullptr) return 0;
  const auto action = ar::health::action_for(config, mark->check);
  const auto reason = ar::health::node_reason(*mark, action);
  const char* state = action == ar::health::Action::replace ? "FAIL" : "DRAIN";
  if (options.dry_run) {
    fmt::print("{}: would mark {} {}: {}\n", mark->check, options.node, state, reason);
    return 1;
  }
  if (action == ar::health::Action::replace)
    ar::slurm::set_node_fail(options.node, reason);
  else
    ar::slurm::set_node_drain(options.node, reason);
  fmt::print("{}: marked {} {}: {}\n", mark->check, options.node, state, reason);
  return 1;
}

// Checks the node as slurmctld knows it and marks it: the exit status.
int check_node(const HealthConfig& config, const Options& options) {
  ar::slurm::init();
  ar::slurm::NodeWatcher watcher;
  std::optional<ar::slurm::NodeInfo> info;
  for (const auto& n : watcher.load())
    if (n.name == options.node) info = n;
  if (!info) {
    fmt::print(stderr, "auto-resume-healthcheck: slurmctld does not know node '{}'\n",
               options.node);
    return 2;
  }
  return mark_node(run_checks(config, *info, options), config, options);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "auto-resume-healthcheck: run this node's health checks; mark it for replacement (or drain "
      "it) when one fails. Options override the configuration file's keys (docs/health.md).",
      "auto-resume-healthcheck"};
  Options options;
  add_options(app, options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // usage errors exit 2, as configuration errors do
  }
  try {
    const auto config = load_config(app, options);
    return check_node(config, options);
  } catch (const std::exception& e) {
    fmt::print(stderr, "auto-resume-healthcheck: {}\n", e.what());
    return 2;
  }
}
