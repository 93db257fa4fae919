#include "autoresume/plugin_config.hpp"

#include "autoresume/keyvalue.hpp"

namespace ar {

std::string_view plugin_config_keys() {
  return "controller, required, connect_timeout, munge_socket, verdict_timeout, "
         "unreachable_timeout, controller_uid, progress_dir";
}

ClientOptions client_options(const PluginConfig& config) {
  return {
      config.controller, config.connect_timeout, config.munge_socket, config.controller_uid, {}};
}

PluginConfig parse_plugin_config(std::span<const std::string> args) {
  PluginConfig config;
  for (const auto& arg : args) {
    const auto [key, value] = split_key_value(arg);
    if (key == "controller") {
      config.controller = parse_endpoint(key, value);
    } else if (key == "required") {
      config.required = parse_flag(key, value);
    } else if (key == "connect_timeout") {
      config.connect_timeout = parse_seconds(key, value, std::chrono::seconds(60));
    } else if (key == "verdict_timeout") {
      config.verdict_timeout =
          parse_seconds(key, value, PluginConfig::kMaxVerdictTimeout, std::chrono::seconds(1));
    } else if (key == "unreachable_timeout") {
      config.unreachable_timeout =
          parse_seconds(key, value, PluginConfig::kMaxUnreachableTimeout, std::chrono::seconds(1));
    } else if (key == "munge_socket") {
      config.munge_socket = parse_absolute_path(key, value);
    } else if (key == "controller_uid") {
      config.controller_uid = static_cast<uid_t>(parse_uint(key, value, 0, 0xfffffffe));
    } else if (key == "progress_dir") {
      config.progress_dir = parse_absolute_path(key, value);
    } else {
      throw ConfigError("unknown plugstack.conf argument '" + key +
                        "' (known: " + std::string(plugin_config_keys()) + ")");
    }
  }
  return config;
}

}  // namespace ar
