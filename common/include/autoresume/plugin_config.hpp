#pragma once
// The SPANK plugin's settings, from its plugstack.conf arguments.

#include <chrono>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "autoresume/client.hpp"
#include "autoresume/endpoint.hpp"
#include "autoresume/progress.hpp"

namespace ar {

struct PluginConfig {
  // Where auto-resumed listens.
  Endpoint controller{"127.0.0.1", kDefaultPort};
  // 1: a step that asks for auto-resume fails when the controller cannot be
  // reached. 0: it runs unprotected, with a warning.
  bool required = false;
  // How long srun waits for the controller before deciding it is down.
  std::chrono::milliseconds connect_timeout{2000};
  // munged's socket for credentials; empty: munge's default.
  std::string munge_socket;
  // How long srun waits for the controller's verdict after a protected step
  // ended (the controller answering `wait` all along) before it stops
  // waiting. At least the controller's verdict_wait (end_window +
  // repair_timeout + the longest backoff: 2403 s with its defaults).
  std::chrono::milliseconds verdict_timeout{2'700'000};
  // How long srun keeps asking, after the step ended, a controller that
  // does not answer (down, or accepting without answering) before it stops
  // waiting.
  std::chrono::milliseconds unreachable_timeout{60'000};
  // The uid the controller runs as, if not root: its replies must come from
  // root or this uid.
  uid_t controller_uid = 0;
  // Where the step daemon makes each protected step's progress files
  // (progress.hpp): a folder of root's on local disk. The node agent's
  // --progress-dir must be the same.
  std::string progress_dir = kDefaultProgressDir;

  static constexpr std::chrono::seconds kMaxVerdictTimeout{86'400};
  static constexpr std::chrono::seconds kMaxUnreachableTimeout{3'600};
};

// How the plugin's client reaches the controller.
ClientOptions client_options(const PluginConfig& config);

// Every argument must be a known `key=value`; the first unknown key or bad
// value throws ConfigError naming it. A key given twice: the last one wins,
// as in plugstack.conf lines generally.
PluginConfig parse_plugin_config(std::span<const std::string> args);

// The keys parse_plugin_config accepts, for messages and docs.
std::string_view plugin_config_keys();

}  // namespace ar
