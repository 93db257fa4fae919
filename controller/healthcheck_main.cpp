// auto-resume-healthcheck: runs the health checks on this node and marks it
// for replacement when one fails (state=fail reason="Action:Replace <check>:
// <detail>"), so that the resume controller moves protected steps off it.
// Fit for slurmd's HealthCheckProgram: the passive checks (gpu, the default)
// take seconds; the active one (cpu: stress-ng) runs only on an idle or
// drained node, or with --on-demand.

#include <fmt/core.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "autoresume/health.hpp"
#include "autoresume/version.hpp"
#include "provider.hpp"
#include "slurm_adapter.hpp"

namespace {

std::string this_node() {
  if (const char* name = std::getenv("SLURMD_NODENAME")) return name;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string name(host);
  return name.substr(0, name.find('.'));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "auto-resume-healthcheck: run this node's health checks; mark it for replacement when one "
      "fails",
      "auto-resume-healthcheck"};
  std::string node = this_node();
  std::vector<std::string> checks{"gpu"};
  std::optional<unsigned> gpus;
  std::string nvidia_smi = "nvidia-smi";
  bool dry_run = false;
  bool on_demand = false;
  bool record_baseline = false;
  double timeout_s = 30;
  unsigned stress_seconds = 60;
  std::string baseline_file = "/var/lib/auto-resume/cpu-baseline";
  double min_fraction = 0.5;
  app.add_option("--node", node,
                 "The node checked and marked (default: $SLURMD_NODENAME or the host name)")
      ->capture_default_str();
  app.add_option("--check", checks, "Checks to run: gpu (passive), cpu (stress-ng, active)")
      ->check(CLI::IsMember({"gpu", "cpu"}))
      ->capture_default_str();
  app.add_option("--gpus", gpus,
                 "GPUs this node must have (default: its configured GRES, from slurmctld)");
  app.add_option("--nvidia-smi", nvidia_smi, "The nvidia-smi to run")->capture_default_str();
  app.add_option("--timeout", timeout_s, "Seconds each tool may take")
      ->check(CLI::Range(1.0, 600.0))
      ->capture_default_str();
  app.add_flag("--dry-run", dry_run, "Report only; do not mark the node");
  app.add_option("--stress-seconds", stress_seconds, "How long the cpu check stresses the node")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_option("--baseline-file", baseline_file, "This node's recorded cpu throughput")
      ->capture_default_str();
  app.add_option("--min-fraction", min_fraction,
                 "The cpu check fails below this fraction of the baseline")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  app.add_flag("--record-baseline", record_baseline,
               "Write the cpu check's throughput as this node's baseline");
  app.add_flag("--on-demand", on_demand, "Run active checks even while the node runs jobs");
  app.set_version_flag("-V,--version", std::string("auto-resume-healthcheck ") + ar::kVersion);
  CLI11_PARSE(app, argc, argv);

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
    if (!gpus) gpus = ar::health::gpu_count_from_gres(info->gres);
    const auto timeout = std::chrono::milliseconds(static_cast<long>(timeout_s * 1000));
    std::vector<ar::health::Result> results;
    for (const auto& check : checks) {
      if (check == "cpu") {
        if (!on_demand && !info->idle && !info->drain) {
          fmt::print(
              "cpu: skipped: {} runs jobs (active checks run on idle or drained nodes, or with "
              "--on-demand)\n",
              node);
          continue;
        }
        std::optional<double> baseline;
        if (std::ifstream in(baseline_file); in) {
          double value = 0;
          if (in >> value && value > 0) baseline = value;
        }
        const auto threads = std::to_string(std::max(1U, std::thread::hardware_concurrency()));
        const auto run =
            ar::run_command({"stress-ng", "--cpu", threads, "--io", "1", "--verify",
                             "--metrics-brief", "--timeout", std::to_string(stress_seconds) + "s"},
                            std::chrono::seconds(stress_seconds) + timeout);
        if (!run.error.empty()) {
          results.push_back({"cpu", ar::health::Status::fail, run.error});
          continue;
        }
        results.push_back(
            ar::health::check_cpu_stress(run.output, run.status, baseline, min_fraction));
        if (record_baseline && results.back().status == ar::health::Status::pass) {
          const auto rate = ar::health::cpu_ops_per_second(run.output).value_or(0);
          std::ofstream out(baseline_file);
          if (!(out << rate << "\n"))
            throw std::runtime_error("cannot write the baseline to '" + baseline_file + "'");
          fmt::print("cpu: baseline {:.0f} bogo ops/s written to {}\n", rate, baseline_file);
        }
        continue;
      }
      if (*gpus == 0) {
        results.push_back(ar::health::check_nvidia_smi("", 0));
        continue;
      }
      // A GPU node whose tool is missing or failing fails the check.
      const auto run = ar::run_command({nvidia_smi, "-q", "-x"}, timeout);
      if (run.status == 0)
        results.push_back(ar::health::check_nvidia_smi(run.output, *gpus));
      else
        results.push_back({"gpu", ar::health::Status::fail,
                           run.error.empty() ? fmt::format("{} -q -x exited {}: {}", nvidia_smi,
                                                           run.status, run.output.substr(0, 200))
                                             : run.error});
    }
    int status = 0;
    for (const auto& r : results) {
      fmt::print("{}: {}: {}\n", r.check, ar::health::to_string(r.status), r.detail);
      if (r.status != ar::health::Status::fail) continue;
      status = 1;
      const auto reason = ar::health::node_reason(r, ar::health::Action::replace);
      if (dry_run) {
        fmt::print("{}: would mark {} FAIL: {}\n", r.check, node, reason);
        continue;
      }
      ar::slurm::set_node_fail(node, reason);
      fmt::print("{}: marked {} FAIL: {}\n", r.check, node, reason);
      break;  // one mark: the first failure's reason
    }
    return status;
  } catch (const std::exception& e) {
    fmt::print(stderr, "auto-resume-healthcheck: {}\n", e.what());
    return 2;
  }
}
