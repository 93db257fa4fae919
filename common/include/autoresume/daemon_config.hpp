#pragma once
// The controller's configuration file, in Slurm's `Key=Value` style: one
// setting per line, `#` starts a comment, keys are case-insensitive.

#include <filesystem>
#include <string>
#include <string_view>

#include "autoresume/endpoint.hpp"

namespace ar {

// How failed nodes are replaced. Only `local` (slurmd processes on this
// machine, for development and tests) exists so far.
enum class ProviderKind { local };

std::string_view to_string(ProviderKind kind);

struct DaemonConfig {
  Endpoint listen{"127.0.0.1", kDefaultPort};
  std::filesystem::path state_dir = "/var/lib/auto-resume";
  ProviderKind provider = ProviderKind::local;  // must be named in the file
  unsigned max_attempts = 3;
  // munged's socket for decoding credentials; empty: munge's default.
  std::string munge_socket;
};

// Parses the text of a configuration file; `origin` (the file's name) starts
// every error message, with the line number: "FILE:3: unknown key 'x'".
DaemonConfig parse_daemon_config(std::string_view text, std::string_view origin);

// Reads and parses a file; a missing or unreadable file is a ConfigError.
DaemonConfig load_daemon_config(const std::filesystem::path& file);

// The effective configuration, in the file's own format.
std::string render(const DaemonConfig& config);

}  // namespace ar
