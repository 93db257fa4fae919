#include "autoresume/task_env.hpp"

namespace ar {

std::uint16_t default_master_port(std::uint32_t job_id, std::uint32_t attempt) {
  return static_cast<std::uint16_t>(kMasterPortBase + (job_id % 1000) * 8 + attempt % 8);
}

std::string comma_list(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += ',';
    out += item;
  }
  return out;
}

}  // namespace ar
