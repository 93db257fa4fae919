// auto-resume: the command line tool for users and admins.

#include <fmt/core.h>

#include <CLI/CLI.hpp>

#include "autoresume/daemon_config.hpp"
#include "autoresume/keyvalue.hpp"
#include "autoresume/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{"auto-resume: inspect and steer slurm-auto-resume", "auto-resume"};
  app.set_version_flag("-V,--version", std::string("auto-resume ") + ar::kVersion);
  app.require_subcommand(1);

  auto* check = app.add_subcommand("check-config", "Validate a controller configuration file");
  std::string config_file;
  check->add_option("FILE", config_file, "Configuration file")->required();

  CLI11_PARSE(app, argc, argv);

  if (check->parsed()) {
    try {
      fmt::print("{}", ar::render(ar::load_daemon_config(config_file)));
    } catch (const ar::ConfigError& e) {
      fmt::print(stderr, "auto-resume: {}\n", e.what());
      return 1;
    }
  }
  return 0;
}
