#include "autoresume/health_config.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <type_traits>

#include "autoresume/keyvalue.hpp"
#include "autoresume/text.hpp"

namespace ar::health {

namespace {

std::string in_quotes(std::string_view text) { return "'" + std::string(text) + "'"; }

std::string known_checks() { return join(kChecks, ", ", std::identity{}); }

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

namespace {

// Every key of the file, one row each: its name and how its value is read.
// The unknown-key error lists them (healthcheck.conf(5) is checked
// against that list: test/smoke/man_keys.sh).
struct HealthKey {
  std::string_view name;
  void (*apply)(HealthConfig& config, const std::string& key, std::string_view value);
};
// The appliers of the keys that take a count in [Min, Max], a program, an
// absolute path: one each, for the field they set.
template <auto Field, std::uint64_t Min, std::uint64_t Max>
void set_count(HealthConfig& config, const std::string& key, std::string_view value) {
  using T = std::remove_reference_t<decltype(config.*Field)>;
  config.*Field = static_cast<T>(parse_uint(key, value, Min, Max));
}
template <auto Field>
void set_program(HealthConfig& config, const std::string& key, std::string_view value) {
  config.*Field = parse_program(key, value);
}
template <auto Field>
void set_path(HealthConfig& config, const std::string& key, std::string_view value) {
  config.*Field = parse_absolute_path(key, value);
}

constexpr auto health_keys() {
  using C = HealthConfig;
  using K = const std::string&;
  using V = std::string_view;
  return std::array{
      HealthKey{"checks",
                [](C& c, K key, V value) {
                  c.checks = parse_checks(key, value);
                  if (c.checks.empty()) invalid_value(key, value, "expected at least one check");
                }},
      HealthKey{"drain_only",
                [](C& c, K key, V value) { c.drain_only = parse_checks(key, value); }},
      HealthKey{"gpus", set_count<&C::gpus, 0, 1024>},
      HealthKey{"neuron_devices", set_count<&C::neuron_devices, 0, 1024>},
      HealthKey{"efa_devices", set_count<&C::efa_devices, 0, 1024>},
      HealthKey{"nvidia_smi", set_program<&C::nvidia_smi>},
      HealthKey{"dcgmi", set_program<&C::dcgmi>},
      HealthKey{"fi_info", set_program<&C::fi_info>},
      HealthKey{"fi_pingpong", set_program<&C::fi_pingpong>},
      HealthKey{"stress_ng", set_program<&C::stress_ng>},
      HealthKey{"neuron_sysfs", set_path<&C::neuron_sysfs>},
      HealthKey{"timeout",
                [](C& c, K key, V value) {
                  c.timeout = parse_seconds(key, value, std::chrono::seconds{600});
                }},
      HealthKey{"stress_seconds", set_count<&C::stress_seconds, 1, 3600>},
      HealthKey{"baseline_file", set_path<&C::baseline_file>},
      HealthKey{"min_fraction",
                [](C& c, K key, V value) { c.min_fraction = parse_fraction(key, value); }},
      HealthKey{"diag_level", set_count<&C::diag_level, 1, 4>},
      HealthKey{"diag_timeout",
                [](C& c, K key, V value) {
                  c.diag_timeout = parse_seconds(key, value, std::chrono::hours{24});
                }},
      HealthKey{"disk_paths",
                [](C& c, K key, V value) {
                  if (value.empty()) invalid_value(key, value, "an empty entry in the list");
                  std::vector<std::filesystem::path> paths;
                  for_each_entry(key, value, [&](std::string_view path) {
                    paths.emplace_back(parse_absolute_path(key, path));
                  });
                  c.disk_paths = std::move(paths);
                }},
      HealthKey{"disk_min_free_mb", set_count<&C::disk_min_free_mb, 0, (1ULL << 40)>},
  };
}
constexpr auto kHealthKeys = health_keys();

}  // namespace

void apply_health_setting(HealthConfig& config, std::string_view key_text, std::string_view value) {
  const auto key = lower(key_text);
  for (const auto& known : kHealthKeys)
    if (known.name == key) return known.apply(config, key, value);
  throw ConfigError("unknown key " + in_quotes(key) +
                    " (known: " + join(kHealthKeys, ", ", &HealthKey::name) + ")");
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
