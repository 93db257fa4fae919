#pragma once
// What the tasks of a protected step learn about their allocation.

#include <cstdint>
#include <string>
#include <vector>

namespace ar {

inline constexpr std::uint16_t kMasterPortBase = 29500;

// The rendezvous port a protected step gets unless the user set MASTER_PORT:
// 29500 + (job_id % 1000) * 8 + attempt % 8, so that jobs sharing a first node
// rarely collide and a relaunch does not wait for the previous attempt's
// socket to be released. Always within [29500, 37499].
std::uint16_t default_master_port(std::uint32_t job_id, std::uint32_t attempt);

// "a,b,c": NODE_LIST's form.
std::string comma_list(const std::vector<std::string>& items);

}  // namespace ar
