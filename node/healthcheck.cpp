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

#include <arpa/inet.h>
#include <fmt/core.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "autoresume/health.hpp"
#include "autoresume/health_config.hpp"
#include "autoresume/health_dcgm.hpp"
#include "autoresume/health_efa.hpp"
#include "autoresume/health_neuron.hpp"
#include "autoresume/keyvalue.hpp"
#include "autoresume/process.hpp"
#include "autoresume/version.hpp"
#include "node_name.hpp"
#include "slurm_adapter.hpp"

namespace {

using ar::health::HealthConfig;
using ar::health::Result;
using ar::health::Status;

ar::health::ToolRun tool_run(ar::CommandResult run) {
  return {run.status, std::move(run.output), std::move(run.error)};
}

Result check_gpu(const HealthConfig& config, unsigned gpus) {
  if (gpus == 0) return ar::health::check_nvidia_smi("", 0);
  // A GPU node whose tool is missing or failing fails the check.
  const auto run = ar::run_command({config.nvidia_smi, "-q", "-x"}, config.timeout);
  if (run.status == 0) return ar::health::check_nvidia_smi(run.output, gpus);
  return {"gpu", Status::fail,
          run.error.empty() ? fmt::format("{} -q -x exited {}: {}", config.nvidia_smi, run.status,
                                          run.output.substr(0, 200))
                            : run.error};
}

Result check_dcgm(const HealthConfig& config, unsigned gpus) {
  if (gpus == 0) return ar::health::check_dcgm_health({}, 0);
  return ar::health::check_dcgm_health(
      tool_run(ar::run_command({config.dcgmi, "health", "-c", "-j"}, config.timeout)), gpus);
}

Result check_dcgm_diag(const HealthConfig& config, unsigned gpus) {
  if (gpus == 0) return ar::health::check_dcgm_diag({}, 0);
  return ar::health::check_dcgm_diag(
      tool_run(
          ar::run_command({config.dcgmi, "diag", "-r", std::to_string(config.diag_level), "-j"},
                          config.diag_timeout)),
      gpus);
}

// A TCP port free on this host now, for fi_pingpong's control connection
// (its own default, 47592, if none can be had).
std::uint16_t free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 47592;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof addr;
  std::uint16_t port = 47592;
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API
  auto* any = reinterpret_cast<sockaddr*>(&addr);
  if (bind(fd, any, sizeof addr) == 0 && getsockname(fd, any, &length) == 0)
    port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

// One loopback fi_pingpong through the EFA device of `domain`: a server,
// and a client sent to it at 127.0.0.1, as the EFA installer's own test
// does. The client is started again while the server is not listening yet
// ("Connection refused"), until `timeout`.
ar::health::EfaPingpong pingpong(const HealthConfig& config, const std::string& domain) {
  const auto port = std::to_string(free_port());
  const std::vector<std::string> base{
      config.fi_pingpong, "-p", "efa", "-e", "rdm", "-d", domain, "-I", "100"};
  auto server_argv = base;
  server_argv.insert(server_argv.end(), {"-B", port});
  auto client_argv = base;
  client_argv.insert(client_argv.end(), {"-P", port, "127.0.0.1"});
  const auto deadline = std::chrono::steady_clock::now() + config.timeout;
  auto server =
      std::async(std::launch::async, [&] { return ar::run_command(server_argv, config.timeout); });
  ar::CommandResult client;
  for (;;) {
    const auto left = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   deadline - std::chrono::steady_clock::now()),
                               std::chrono::milliseconds{1});
    client = ar::run_command(client_argv, left);
    const bool refused = client.error.empty() && client.status != 0 &&
                         client.output.find("Connection refused") != std::string::npos;
    if (!refused || std::chrono::steady_clock::now() >= deadline) break;
    // Not listening yet, or gone: a server that ended is not waited for.
    if (server.wait_for(std::chrono::milliseconds{100}) == std::future_status::ready) break;
  }
  return {domain, tool_run(server.get()), tool_run(std::move(client))};
}

Result check_efa(const HealthConfig& config) {
  if (config.efa_devices == 0) return ar::health::check_efa({}, 0, {});
  const auto listing = tool_run(ar::run_command({config.fi_info, "-p", "efa"}, config.timeout));
  std::vector<ar::health::EfaPingpong> pingpongs;
  const auto domains = ar::health::efa_devices(listing.output);
  if (listing.error.empty() && listing.status == 0 && domains.size() >= config.efa_devices) {
    // Through the device, not libfabric's shared-memory shortcut for peers
    // on the same host.
    setenv("FI_EFA_ENABLE_SHM_TRANSFER", "0", 1);
    for (const auto& domain : domains) {
      pingpongs.push_back(pingpong(config, domain));
      const auto& last = pingpongs.back();
      if (last.server.status != 0 || last.client.status != 0) break;  // one failure is enough
    }
  }
  return ar::health::check_efa(listing, config.efa_devices, pingpongs);
}

Result check_cpu(const HealthConfig& config, bool record_baseline) {
  std::optional<double> baseline;
  if (std::ifstream in(config.baseline_file); in) {
    double value = 0;
    if (in >> value && value > 0) baseline = value;
  }
  const auto threads = std::to_string(std::max(1U, std::thread::hardware_concurrency()));
  const auto run =
      ar::run_command({config.stress_ng, "--cpu", threads, "--io", "1", "--verify",
                       "--metrics-brief", "--timeout", std::to_string(config.stress_seconds) + "s"},
                      std::chrono::seconds(config.stress_seconds) + config.timeout);
  if (!run.error.empty()) return {"cpu", Status::fail, run.error};
  auto result = ar::health::check_cpu_stress(run.output, run.status, baseline, config.min_fraction);
  if (record_baseline && result.status == Status::pass) {
    const auto rate = ar::health::cpu_ops_per_second(run.output).value_or(0);
    std::ofstream out(config.baseline_file);
    if (!(out << rate << "\n"))
      throw std::runtime_error("cannot write the baseline to '" + config.baseline_file.string() +
                               "'");
    fmt::print("cpu: baseline {:.0f} bogo ops/s written to {}\n", rate,
               config.baseline_file.string());
  }
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "auto-resume-healthcheck: run this node's health checks; mark it for replacement (or drain "
      "it) when one fails. Options override the configuration file's keys (docs/health.md).",
      "auto-resume-healthcheck"};
  std::string node = ar::this_node_name();
  std::string config_file;
  bool dry_run = false;
  bool on_demand = false;
  bool record_baseline = false;
  std::vector<std::string> checks;
  std::vector<std::string> drain_only;
  // Options that set a key of the file, as the file would.
  struct Setting {
    const char* option;
    const char* key;
    const char* type;
    const char* help;
    std::string value;
  };
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
  };
  app.add_option("--node", node,
                 "The node checked and marked (default: $SLURMD_NODENAME or the host name)")
      ->capture_default_str();
  app.add_option("--config", config_file,
                 std::string("The configuration file (default: ") +
                     ar::health::kDefaultHealthConfig + ", if it exists)")
      ->type_name("FILE");
  app.add_option("--check", checks,
                 "Checks to run (default gpu): gpu, dcgm, neuron, efa (passive); cpu, dcgm-diag "
                 "(active)")
      ->type_name("CHECK");
  app.add_option("--drain-only", drain_only,
                 "Checks whose failure only drains the node (Action:Drain) instead of failing it")
      ->type_name("CHECK");
  for (auto& setting : settings)
    app.add_option(setting.option, setting.value, setting.help)->type_name(setting.type);
  app.add_flag("--dry-run", dry_run, "Report only; do not mark the node");
  app.add_flag("--record-baseline", record_baseline,
               "Write the cpu check's throughput as this node's baseline");
  app.add_flag("--on-demand", on_demand, "Run active checks even while the node runs jobs");
  app.set_version_flag("-V,--version", std::string("auto-resume-healthcheck ") + ar::kVersion);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // usage errors exit 2, as configuration errors do
  }

  HealthConfig config;
  try {
    if (!config_file.empty())
      config = ar::health::load_health_config(config_file);
    else if (std::error_code ec; std::filesystem::exists(ar::health::kDefaultHealthConfig, ec))
      config = ar::health::load_health_config(ar::health::kDefaultHealthConfig);
    auto join = [](const std::vector<std::string>& items) {
      std::string out;
      for (const auto& item : items) out += (out.empty() ? "" : ",") + item;
      return out;
    };
    auto set = [&](const char* option, const char* key, std::string value) {
      try {
        ar::health::apply_health_setting(config, key, value);
      } catch (const ar::ConfigError& e) {
        throw ar::ConfigError(std::string(option) + ": " + e.what());
      }
    };
    if (app.count("--check") > 0) set("--check", "checks", join(checks));
    if (app.count("--drain-only") > 0) set("--drain-only", "drain_only", join(drain_only));
    for (auto& setting : settings) {
      if (app.count(setting.option) == 0) continue;
      // A relative path on the command line is relative to here.
      if (setting.key == std::string_view("baseline_file") ||
          setting.key == std::string_view("neuron_sysfs"))
        setting.value = std::filesystem::absolute(setting.value).string();
      set(setting.option, setting.key, setting.value);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "auto-resume-healthcheck: {}\n", e.what());
    return 2;
  }

  try {
    ar::slurm::init();
    ar::slurm::NodeWatcher watcher;
    std::optional<ar::slurm::NodeInfo> info;
    for (const auto& n : watcher.load())
      if (n.name == node) info = n;
    if (!info) {
      fmt::print(stderr, "auto-resume-healthcheck: slurmctld does not know node '{}'\n", node);
      return 2;
    }
    const unsigned gpus = config.gpus ? *config.gpus : ar::health::gpu_count_from_gres(info->gres);
    std::vector<Result> results;
    for (const auto& check : config.checks) {
      if (ar::health::is_active_check(check) && !on_demand && !info->idle && !info->drain) {
        fmt::print(
            "{}: skipped: {} runs jobs (active checks run on idle or drained nodes, or with "
            "--on-demand)\n",
            check, node);
        continue;
      }
      Result r;
      if (check == "gpu")
        r = check_gpu(config, gpus);
      else if (check == "dcgm")
        r = check_dcgm(config, gpus);
      else if (check == "dcgm-diag")
        r = check_dcgm_diag(config, gpus);
      else if (check == "neuron")
        r = ar::health::check_neuron_sysfs(config.neuron_sysfs, config.neuron_devices);
      else if (check == "efa")
        r = check_efa(config);
      else
        r = check_cpu(config, record_baseline);
      fmt::print("{}: {}: {}\n", r.check, ar::health::to_string(r.status), r.detail);
      results.push_back(std::move(r));
    }

    const Result* mark = ar::health::result_to_mark(results, config);
    if (mark == nullptr) return 0;
    const auto action = ar::health::action_for(config, mark->check);
    const auto reason = ar::health::node_reason(*mark, action);
    const char* state = action == ar::health::Action::replace ? "FAIL" : "DRAIN";
    if (dry_run) {
      fmt::print("{}: would mark {} {}: {}\n", mark->check, node, state, reason);
      return 1;
    }
    if (action == ar::health::Action::replace)
      ar::slurm::set_node_fail(node, reason);
    else
      ar::slurm::set_node_drain(node, reason);
    fmt::print("{}: marked {} {}: {}\n", mark->check, node, state, reason);
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "auto-resume-healthcheck: {}\n", e.what());
    return 2;
  }
}
