// auto-resumed: the controller daemon.

#include <fmt/core.h>

#include <CLI/CLI.hpp>

#include "autoresume/daemon_config.hpp"
#include "autoresume/keyvalue.hpp"
#include "autoresume/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{"auto-resumed: the slurm-auto-resume controller daemon", "auto-resumed"};
  std::string config_file = "/etc/slurm/auto-resumed.conf";
  bool check_only = false;
  app.add_option("-c,--config", config_file, "Configuration file (Key=Value lines)")
      ->capture_default_str();
  app.add_flag("--check-config", check_only,
               "Load the configuration, print the effective settings and exit");
  app.set_version_flag("-V,--version", std::string("auto-resumed ") + ar::kVersion);
  CLI11_PARSE(app, argc, argv);

  ar::DaemonConfig config;
  try {
    config = ar::load_daemon_config(config_file);
  } catch (const ar::ConfigError& e) {
    fmt::print(stderr, "auto-resumed: {}\n", e.what());
    return 1;
  }
  if (check_only) {
    fmt::print("{}", ar::render(config));
    return 0;
  }
  fmt::print(stderr, "auto-resumed: configuration {} is valid; the service loop is not built yet\n",
             config_file);
  return 1;
}
