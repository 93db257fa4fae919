#pragma once
// Node providers: how a failed node is replaced. `local` (development and
// tests) runs a command that starts the node's slurmd again, so the same
// hostname comes back as a new instance.

#include <chrono>
#include <string>
#include <vector>

namespace ar {

// Runs `command` ("{node}" replaced by `node`) and waits for it up to
// `timeout`. Returns an empty string on success, else why it failed, with
// the tail of its output.
std::string run_restart_command(const std::vector<std::string>& command, const std::string& node,
                                std::chrono::milliseconds timeout);

}  // namespace ar
