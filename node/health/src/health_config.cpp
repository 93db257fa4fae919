#include "autoresume/health_config.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>

#include "autoresume/keyvalue.hpp"

namespace ar::health {

namespace {

constexpr std::string_view kKnownKeys =
    "checks, drain_only, gpus, neuron_devices, efa_devices, nvidia_smi, dcgmi, fi_info, "
    "fi_pingpong, stress_ng, neuron_sysfs, timeout, stress_seconds, baseline_file, min_fraction, "
    "diag_level, diag_timeout, disk_paths, disk_min_free_mb";

std::string in_quotes(std::string_view text) { return "'" + std::string(text) + "'"; }

std::string known_checks() {
  std::string out;
  for (const auto check : kChecks) out += (out.empty() ? "" : ", ") + std::string(check);
  return out;
}

// Each entry of a comma-separated list, trimmed, in order, to `take`; none
// for an empty value; an empty entry is refused.
void for_each_entry(std::string_view key, std::string_view value,
                    const std::function<void(std::string_view)>& take) {
  std::size_t start = 0;
  while (start <= value.size() && !value.empty()) {
    const auto end = std::min(value.find(',', start), value.size());
    const auto entry = trim(value.substr(start, end - start));
    start = end + 1;
    if (entry.empty()) invalid_value(key, value, "an empty entry in the list");
    take(entry);
  }
}

// "gpu,cpu": known checks, each once; empty: none.
std::vector<std::string> parse_checks(std::string_view key, std::string_view value) {
  std::vector<std::string> checks;
  for_each_entry(key, value, [&](std::string_view entry) {
    const auto name = lower(entry);
    if (std::ranges::find(kChecks, name) == std::end(kChecks))
      invalid_value(key, value,
                    "unknown check " + in_quotes(name) + " (known: " + known_checks() + ")");
    if (std::ranges::find(checks, name) != checks.end())
      invalid_value(key, value, "check " + in_quotes(name) + " is named twice");
    checks.push_back(name);
  });
  return checks;
}

// A program: a name looked up in PATH, or an absolute path.
std::string parse_program(std::string_view key, std::string_view value) {
  if (value.empty() || value.find_first_of(" \t") != std::string_view::npos ||
      (value.find('/') != std::string_view::npos && value.front() != '/'))
    invalid_value(key, value, "expected a program name (looked up in PATH) or an absolute path");
  return std::string(value);
}

double parse_fraction(std::string_view key, std::string_view value) {
  double out = 0;
  const auto* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, out);
  if (value.empty() || ec != std::errc() || ptr != end || !std::isfinite(out) || out < 0.01 ||
      out > 1.0)
    invalid_value(key, value, "expected a fraction from 0.01 to 1");
  return out;
}

}  // namespace

bool is_active_check(std::string_view check) { return check == "cpu" || check == "dcgm-diag"; }

Action action_for(const HealthConfig& config, std::string_view check) {
  return std::ranges::find(config.drain_only, check) != config.drain_only.end() ? Action::drain
                                                                                : Action::replace;
}

const Result* result_to_mark(const std::vector<Result>& results, const HealthConfig& config) {
  const Result* mark = nullptr;
  for (const auto& r : results) {
    if (r.status != Status::fail) continue;
    if (action_for(config, r.check) == Action::replace) return &r;
    if (mark == nullptr) mark = &r;
  }
  return mark;
}

void apply_health_setting(HealthConfig& config, std::string_view key_text, std::string_view value) {
  const auto key = lower(key_text);
  if (key == "checks") {
    config.checks = parse_checks(key, value);
    if (config.checks.empty()) invalid_value(key, value, "expected at least one check");
  } else if (key == "drain_only") {
    config.drain_only = parse_checks(key, value);
  } else if (key == "gpus") {
    config.gpus = static_cast<unsigned>(parse_uint(key, value, 0, 1024));
  } else if (key == "neuron_devices") {
    config.neuron_devices = static_cast<unsigned>(parse_uint(key, value, 0, 1024));
  } else if (key == "efa_devices") {
    config.efa_devices = static_cast<unsigned>(parse_uint(key, value, 0, 1024));
  } else if (key == "nvidia_smi") {
    config.nvidia_smi = parse_program(key, value);
  } else if (key == "dcgmi") {
    config.dcgmi = parse_program(key, value);
  } else if (key == "fi_info") {
    config.fi_info = parse_program(key, value);
  } else if (key == "fi_pingpong") {
    config.fi_pingpong = parse_program(key, value);
  } else if (key == "stress_ng") {
    config.stress_ng = parse_program(key, value);
  } else if (key == "neuron_sysfs") {
    config.neuron_sysfs = parse_absolute_path(key, value);
  } else if (key == "timeout") {
    config.timeout = parse_seconds(key, value, std::chrono::seconds{600});
  } else if (key == "stress_seconds") {
    config.stress_seconds = static_cast<unsigned>(parse_uint(key, value, 1, 3600));
  } else if (key == "baseline_file") {
    config.baseline_file = parse_absolute_path(key, value);
  } else if (key == "min_fraction") {
    config.min_fraction = parse_fraction(key, value);
  } else if (key == "diag_level") {
    config.diag_level = static_cast<unsigned>(parse_uint(key, value, 1, 4));
  } else if (key == "disk_paths") {
    if (value.empty()) invalid_value(key, value, "an empty entry in the list");
    std::vector<std::filesystem::path> paths;
    for_each_entry(key, value, [&](std::string_view path) {
      paths.emplace_back(parse_absolute_path(key, path));
    });
    config.disk_paths = std::move(paths);
  } else if (key == "disk_min_free_mb") {
    config.disk_min_free_mb = parse_uint(key, value, 0, 1ULL << 40);
  } else if (key == "diag_timeout") {
    config.diag_timeout = parse_seconds(key, value, std::chrono::hours{24});
  } else {
    throw ConfigError("unknown key " + in_quotes(key) + " (known: " + std::string(kKnownKeys) +
                      ")");
  }
}

HealthConfig parse_health_config(std::string_view text, std::string_view origin) {
  HealthConfig config;
  parse_settings(text, origin, [&](const std::string& key, const std::string& value) {
    apply_health_setting(config, key, value);
  });
  return config;
}

HealthConfig load_health_config(const std::filesystem::path& file) {
  return parse_health_config(read_config_file(file), file.string());
}

}  // namespace ar::health
