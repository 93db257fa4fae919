#pragma once
// Node providers: how a failed node is replaced, so that the same hostname
// comes back as a new instance. `local` (development and tests) runs
// local_restart_command, which starts the node's slurmd again; `command`
// runs the site's provider_command as `PROGRAM replace NODE`
// (docs/providers.md has the contract).

#include <chrono>
#include <string>
#include <vector>

#include "autoresume/daemon_config.hpp"
#include "autoresume/process.hpp"

namespace ar {

// The last 2,000 bytes of a command's output ("..." first when cut), for
// an error message.
std::string output_tail(const std::string& output);

// Runs `command` ("{node}" replaced by `node`) and waits for it up to
// `timeout`. Returns an empty string on success, else why it failed, with
// the tail of its output.
std::string run_restart_command(CommandRunner& runner, const std::vector<std::string>& command,
                                const std::string& node, std::chrono::milliseconds timeout);

// Asks the configured provider to replace `node`, waiting up to
// provider_timeout. Returns an empty string once the provider has done its
// part (the node's new instance registers with slurmctld by itself), else
// why it failed, with the tail of the provider's output.
std::string replace_node(const DaemonConfig& config, CommandRunner& runner,
                         const std::string& node);

}  // namespace ar
