// The callers the service's tests act as, and a reply's outcome.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>
#include <string>

namespace ar::test {

inline constexpr uid_t kOwner = 1000;
inline constexpr uid_t kOther = 2000;
inline constexpr uid_t kRoot = 0;
inline constexpr uid_t kSlurmUser = 64030;

// "ok", or the error code.
inline std::string outcome(const nlohmann::json& reply) {
  return reply["ok"] == true ? "ok" : reply["error"]["code"].get<std::string>();
}

}  // namespace ar::test
