#pragma once
// The health checks as auto-resume-healthcheck runs them on this node: each
// gathers its input (runs nvidia-smi, dcgmi, fi_info and fi_pingpong,
// stress-ng; reads the Neuron driver's sysfs tree) and hands it to its
// parser in ar_health for the verdict.

#include <string_view>

#include "autoresume/health.hpp"
#include "autoresume/health_config.hpp"

namespace ar::healthcheck {

// Runs `check` (one of health::kChecks) under `config` on a node that must
// have `gpus` GPUs. A check of hardware the node is not configured to have
// runs no tool: it is not applicable. With `record_baseline`, a passing cpu
// check writes its throughput to config.baseline_file (throws
// std::runtime_error when it cannot).
health::Result run_check(std::string_view check, const health::HealthConfig& config, unsigned gpus,
                         bool record_baseline);

}  // namespace ar::healthcheck
