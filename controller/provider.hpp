#pragma once
// Node providers: how a failed node is replaced, so that the same hostname
// comes back as a new instance. `local` (development and tests) runs
// local_restart_command, which starts the node's slurmd again; `command`
// runs the site's provider_command as `PROGRAM replace NODE`
// (docs/providers.md has the contract).

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "autoresume/daemon_config.hpp"

namespace ar {

// A command's end: its exit status (-1: it could not run or timed out) and
// its output (stdout and stderr together, at most the last 64 KiB).
struct CommandResult {
  int status = -1;
  std::string output;
  std::string error;  // why it did not run to an exit status, if it did not
};

// Runs argv (argv[0] a path, or a name looked up in PATH) with stdin from
// /dev/null, in its own process group, with no descriptor of ours but
// stdout and stderr; kills the group after `timeout`.
CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

// Starts argv like run_command (stdin /dev/null, its own process group, no
// descriptor of ours, no signal blocked) and hands back its pid and the read
// end of a pipe with its stdout and stderr, for a caller that reads as it
// goes. Throws std::runtime_error when it cannot start.
struct Spawned {
  pid_t pid = -1;
  int output = -1;
};
Spawned spawn_command(const std::vector<std::string>& argv);

// Makes every command running now or later stop at once (its process group
// killed, reported as stopped): for a controller that is shutting down.
void cancel_commands();

// Runs `command` ("{node}" replaced by `node`) and waits for it up to
// `timeout`. Returns an empty string on success, else why it failed, with
// the tail of its output.
std::string run_restart_command(const std::vector<std::string>& command, const std::string& node,
                                std::chrono::milliseconds timeout);

// Asks the configured provider to replace `node`, waiting up to
// provider_timeout. Returns an empty string once the provider has done its
// part (the node's new instance registers with slurmctld by itself), else
// why it failed, with the tail of the provider's output.
std::string replace_node(const DaemonConfig& config, const std::string& node);

// Whether the configured provider can replace nodes at all.
bool can_replace(const DaemonConfig& config);

}  // namespace ar
