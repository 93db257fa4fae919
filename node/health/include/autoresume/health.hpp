#pragma once
// Health checks, free of Slurm: each check is a parser of what a tool or the
// kernel reports, and a verdict. The checker (auto-resume-healthcheck)
// gathers the input and marks the node; these functions only judge.
// DCGM, Neuron and EFA have their own headers (health_dcgm.hpp,
// health_neuron.hpp, health_efa.hpp); the checker's configuration file is
// health_config.hpp's. docs/health.md describes them all.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ar::health {

enum class Status {
  pass,
  fail,
  not_applicable,  // the node is not meant to have this hardware
};
std::string_view to_string(Status status);

struct Result {
  std::string check;  // e.g. "gpu", "neuron"
  Status status = Status::pass;
  std::string detail;  // what was seen: the reason text of a failure
};

// What a tool run by a check did: its exit status (-1: it did not exit on
// its own) and output, or why it did not run to an exit status. The same
// shape as the command runner's result, without depending on it.
struct ToolRun {
  int status = -1;
  std::string output;
  std::string error;  // e.g. "cannot run dcgmi: No such file or directory"
};

// The result of a check of hardware this node is not configured to have
// (`expected`, its configured count, is 0): not applicable, "no GPUs
// configured for this node" (gpu, dcgm, dcgm-diag), "no Neuron devices ..."
// (neuron), "no EFA devices ..." (efa). Nothing when `expected` > 0, and for
// a check that applies to every node (cpu, disk).
std::optional<Result> not_applicable(std::string_view check, unsigned expected);

// What a failed check does to the node: FAIL it for replacement, or only
// DRAIN it (no node fault: running jobs go on).
enum class Action { replace, drain };

// The node's reason for a failed check, which the resume controller reads:
// "Action:Replace <check>: <detail>" or "Action:Drain <check>: <detail>".
// Slurm keeps reasons short: the detail is cut to fit kMaxReason bytes.
inline constexpr std::size_t kMaxReason = 200;
std::string node_reason(const Result& result, Action action);

// GPU, from `nvidia-smi -q -x` (XML). `expected_gpus` is the node's
// configured GPU count (its GRES): 0 makes the check not applicable. Fails
// on output that is not nvidia-smi's XML, fewer GPUs than expected, a GPU
// that fell off the bus, pending page retirement, a row remapping pending
// or failed, and uncorrectable ECC errors.
Result check_nvidia_smi(std::string_view xml, unsigned expected_gpus);

// CPU stress, from `stress-ng --cpu N --io K --verify --metrics-brief`:
// its exit status and output. Fails when stress-ng failed or reported a
// failure (a verification error), when its output has no cpu metrics, and
// when the cpu throughput (bogo ops/s, real time) is below `min_fraction`
// of this node's recorded `baseline` (if there is one).
Result check_cpu_stress(std::string_view output, int exit_status, std::optional<double> baseline,
                        double min_fraction);
// The cpu throughput in stress-ng's metrics, if there is one.
std::optional<double> cpu_ops_per_second(std::string_view output);

// Disk: each of `paths` takes a write: not mounted read-only, at least
// `min_free_bytes` free to an unprivileged user (0: not looked at), and a
// small test file (a name no one can guess ahead) created, written, synced,
// read back and removed. The probes run in a child process: one that does
// not answer within `timeout` for all of them (a hung mount) fails the
// check and is left behind, holding none of the caller's descriptors.
Result check_disk(const std::vector<std::filesystem::path>& paths, std::uint64_t min_free_bytes,
                  std::chrono::milliseconds timeout);

// The GPUs a node's configured GRES string names ("gpu:8",
// "gpu:h100:4(S:0-1),gpu:a100:2", "foo:2" -> 0). Throws
// std::invalid_argument naming an entry whose count is not a number.
unsigned gpu_count_from_gres(std::string_view gres);

}  // namespace ar::health
