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

std::optional<std::string> task_refusal(bool asked, bool required, std::string_view config_error,
                                        const char* registered) {
  if (!asked) return std::nullopt;
  if (!config_error.empty())
    return "the plugin's plugstack.conf line is bad (" + std::string(config_error) + ")";
  if (required && (registered == nullptr || *registered == '\0'))
    return std::string(
        "the step asked for --auto-resume=1, srun did not register it with the controller, and "
        "plugstack.conf says required=1");
  return std::nullopt;
}

}  // namespace ar
