#include "autoresume/option.hpp"

#include <string>

#include "autoresume/keyvalue.hpp"

namespace ar {

bool parse_auto_resume(const char* value) {
  if (value == nullptr)
    throw ConfigError(std::string("--") + kOptionName + " requires a value: 0 or 1");
  if (std::string_view(value) == "0") return false;
  if (std::string_view(value) == "1") return true;
  throw ConfigError(std::string("invalid --") + kOptionName + " value '" + value +
                    "': expected 0 or 1");
}

std::uint32_t parse_node_count(const char* name, const char* value) {
  if (value == nullptr || *value == '\0')
    throw ConfigError(std::string("--") + name + " requires a value: a node count");
  const std::string_view text(value);
  std::uint64_t count = 0;
  for (const char c : text) {
    if (c < '0' || c > '9' || count > kMaxNodeCount) {
      count = kMaxNodeCount + 1;
      break;
    }
    count = count * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (count > kMaxNodeCount)
    throw ConfigError(std::string("invalid --") + name + " value '" + value +
                      "': expected a node count from 0 to " + std::to_string(kMaxNodeCount));
  return static_cast<std::uint32_t>(count);
}

std::optional<std::uint32_t> nodes_without_spares(std::uint32_t job_nodes, std::uint32_t spares) {
  if (spares == 0 || job_nodes <= spares) return std::nullopt;
  return job_nodes - spares;
}

}  // namespace ar
