#pragma once
// auto-resume-healthcheck's configuration file: slurmd runs its
// HealthCheckProgram without arguments, so what to check lives here. One
// `key=value` per line, `#` starts a comment, keys are case-insensitive;
// the command line's options override the file's keys. docs/health.md lists
// the keys.

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "autoresume/health.hpp"
#include "autoresume/health_neuron.hpp"

namespace ar::health {

// Read when it exists and no --config is given.
inline constexpr const char* kDefaultHealthConfig = "/etc/auto-resume/healthcheck.conf";

// The checks, passive first: gpu (nvidia-smi), dcgm (DCGM's health
// watches), neuron (the Neuron driver's counters), efa (fi_info and
// fi_pingpong), disk (the file systems jobs write to take a write); then the
// active ones, which stress the node and run only on idle or drained nodes
// (or on demand): cpu (stress-ng), dcgm-diag.
inline constexpr std::string_view kChecks[] = {"gpu",  "dcgm", "neuron",   "efa",
                                               "disk", "cpu",  "dcgm-diag"};
bool is_active_check(std::string_view check);

struct HealthConfig {
  std::vector<std::string> checks{"gpu"};
  // Checks whose failure only DRAINs the node ("Action:Drain <check>: ...")
  // instead of FAILing it for replacement.
  std::vector<std::string> drain_only;
  // The GPUs the node must have; unset: its configured GRES (slurmctld's).
  std::optional<unsigned> gpus;
  unsigned neuron_devices = 0;  // 0: the node is not meant to have any
  unsigned efa_devices = 0;
  // The tools: a name looked up in PATH, or an absolute path.
  std::string nvidia_smi = "nvidia-smi";
  std::string dcgmi = "dcgmi";
  std::string fi_info = "fi_info";
  std::string fi_pingpong = "fi_pingpong";
  std::string stress_ng = "stress-ng";
  std::filesystem::path neuron_sysfs = kNeuronSysfs;
  // How long each tool of a passive check may take (each fi_pingpong too).
  std::chrono::milliseconds timeout{30'000};
  // cpu: how long stress-ng runs; its recorded throughput and the fraction
  // of it below which the check fails.
  unsigned stress_seconds = 60;
  std::filesystem::path baseline_file = "/var/lib/auto-resume/cpu-baseline";
  double min_fraction = 0.5;
  // disk: the file systems that must take a write, and the space each
  // must have free (MiB; 0: not looked at). All of them get `timeout`, at
  // most 10 s.
  std::vector<std::filesystem::path> disk_paths{"/tmp"};
  std::uint64_t disk_min_free_mb = 1024;
  // dcgm-diag: `dcgmi diag -r diag_level`, which may take diag_timeout.
  unsigned diag_level = 2;
  std::chrono::milliseconds diag_timeout{900'000};
};

// What a failed `check` does to the node under `config`.
Action action_for(const HealthConfig& config, std::string_view check);

// The one result a run marks the node for: the first failure that asks for
// replacement, else the first that asks for a drain; nullptr if none
// failed.
const Result* result_to_mark(const std::vector<Result>& results, const HealthConfig& config);

// Sets one key from its text, as the file and the command line give it.
// Throws ConfigError naming the key and the bad value (an unknown key too).
// Lists ("checks", "drain_only") are comma-separated.
void apply_health_setting(HealthConfig& config, std::string_view key, std::string_view value);

// Parses a file's text; `origin` (its name) and the line number start each
// error: "FILE:3: invalid value 'x' for timeout: ...". A key set twice is
// an error.
HealthConfig parse_health_config(std::string_view text, std::string_view origin);

// Reads and parses `file`; a missing or unreadable file is a ConfigError.
HealthConfig load_health_config(const std::filesystem::path& file);

}  // namespace ar::health
