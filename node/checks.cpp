#include "checks.hpp"

#include <arpa/inet.h>
#include <fmt/core.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <future>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "autoresume/health_dcgm.hpp"
#include "autoresume/health_efa.hpp"
#include "autoresume/health_neuron.hpp"
#include "autoresume/process.hpp"

namespace ar::healthcheck {

namespace {

using health::HealthConfig;
using health::Result;
using health::Status;

// The longest the disk check waits for its file systems.
constexpr std::chrono::milliseconds kDiskTimeout{10'000};

health::ToolRun tool_run(CommandResult run) {
  return {run.status, std::move(run.output), std::move(run.error)};
}

Result check_gpu(const HealthConfig& config, unsigned gpus) {
  // A GPU node whose tool is missing or failing fails the check.
  const auto run = run_command({config.nvidia_smi, "-q", "-x"}, config.timeout);
  if (run.status == 0) return health::check_nvidia_smi(run.output, gpus);
  return {"gpu", Status::fail,
          run.error.empty() ? fmt::format("{} -q -x exited {}: {}", config.nvidia_smi, run.status,
                                          run.output.substr(0, 200))
                            : run.error};
}

Result check_dcgm(const HealthConfig& config, unsigned gpus) {
  return health::check_dcgm_health(
      tool_run(run_command({config.dcgmi, "health", "-c", "-j"}, config.timeout)), gpus);
}

Result check_dcgm_diag(const HealthConfig& config, unsigned gpus) {
  return health::check_dcgm_diag(
      tool_run(run_command({config.dcgmi, "diag", "-r", std::to_string(config.diag_level), "-j"},
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
health::EfaPingpong pingpong(const HealthConfig& config, const std::string& domain) {
  const auto port = std::to_string(free_port());
  const std::vector<std::string> base{
      config.fi_pingpong, "-p", "efa", "-e", "rdm", "-d", domain, "-I", "100"};
  auto server_argv = base;
  server_argv.insert(server_argv.end(), {"-B", port});
  auto client_argv = base;
  client_argv.insert(client_argv.end(), {"-P", port, "127.0.0.1"});
  const auto deadline = std::chrono::steady_clock::now() + config.timeout;
  auto server =
      std::async(std::launch::async, [&] { return run_command(server_argv, config.timeout); });
  CommandResult client;
  for (;;) {
    const auto left = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   deadline - std::chrono::steady_clock::now()),
                               std::chrono::milliseconds{1});
    client = run_command(client_argv, left);
    const bool refused = client.error.empty() && client.status != 0 &&
                         client.output.find("Connection refused") != std::string::npos;
    if (!refused || std::chrono::steady_clock::now() >= deadline) break;
    // Not listening yet, or gone: a server that ended is not waited for.
    if (server.wait_for(std::chrono::milliseconds{100}) == std::future_status::ready) break;
  }
  return {domain, tool_run(server.get()), tool_run(std::move(client))};
}

Result check_efa(const HealthConfig& config) {
  const auto listing = tool_run(run_command({config.fi_info, "-p", "efa"}, config.timeout));
  std::vector<health::EfaPingpong> pingpongs;
  const auto domains = health::efa_devices(listing.output);
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
  return health::check_efa(listing, config.efa_devices, pingpongs);
}

Result check_cpu(const HealthConfig& config, bool record_baseline) {
  std::optional<double> baseline;
  if (std::ifstream in(config.baseline_file); in) {
    double value = 0;
    if (in >> value && value > 0) baseline = value;
  }
  const auto threads = std::to_string(std::max(1U, std::thread::hardware_concurrency()));
  const auto run =
      run_command({config.stress_ng, "--cpu", threads, "--io", "1", "--verify", "--metrics-brief",
                   "--timeout", std::to_string(config.stress_seconds) + "s"},
                  std::chrono::seconds(config.stress_seconds) + config.timeout);
  if (!run.error.empty()) return {"cpu", Status::fail, run.error};
  auto result = health::check_cpu_stress(run.output, run.status, baseline, config.min_fraction);
  if (record_baseline && result.status == Status::pass) {
    const auto rate = health::cpu_ops_per_second(run.output).value_or(0);
    std::ofstream out(config.baseline_file);
    if (!(out << rate << "\n"))
      throw std::runtime_error("cannot write the baseline to '" + config.baseline_file.string() +
                               "'");
    fmt::print("cpu: baseline {:.0f} bogo ops/s written to {}\n", rate,
               config.baseline_file.string());
  }
  return result;
}

// How many of the devices `check` looks at this node must have (cpu looks
// at none: health::not_applicable never skips it).
unsigned expected_devices(std::string_view check, const HealthConfig& config, unsigned gpus) {
  if (check == "neuron") return config.neuron_devices;
  if (check == "efa") return config.efa_devices;
  return gpus;  // gpu, dcgm, dcgm-diag
}

}  // namespace

Result run_check(std::string_view check, const HealthConfig& config, unsigned gpus,
                 bool record_baseline) {
  if (auto skip = health::not_applicable(check, expected_devices(check, config, gpus)))
    return *skip;
  if (check == "gpu") return check_gpu(config, gpus);
  if (check == "dcgm") return check_dcgm(config, gpus);
  if (check == "dcgm-diag") return check_dcgm_diag(config, gpus);
  if (check == "neuron")
    return health::check_neuron_sysfs(config.neuron_sysfs, config.neuron_devices);
  if (check == "efa") return check_efa(config);
  if (check == "disk")
    // At most 10 s: the agent's quick checks give the whole checker 24 s
    // by default (docs/resume.md), and a hung file system must be said
    // within them.
    return health::check_disk(config.disk_paths, config.disk_min_free_mb * 1024 * 1024,
                              std::min(config.timeout, kDiskTimeout));
  return check_cpu(config, record_baseline);
}

}  // namespace ar::healthcheck
