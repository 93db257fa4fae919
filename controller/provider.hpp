#pragma once
// Node providers: how a failed node is replaced. `local` (development and
// tests) runs a command that starts the node's slurmd again, so the same
// hostname comes back as a new instance.

#include <chrono>
#include <string>
#include <vector>

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

// Runs `command` ("{node}" replaced by `node`) and waits for it up to
// `timeout`. Returns an empty string on success, else why it failed, with
// the tail of its output.
std::string run_restart_command(const std::vector<std::string>& command, const std::string& node,
                                std::chrono::milliseconds timeout);

}  // namespace ar
