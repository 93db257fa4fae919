#pragma once
// Runs other programs: a command with a deadline and its output kept, or a
// child whose output the caller reads as it goes. Used by the controller's
// providers and by the programs on nodes (health checks, the node agent).

#include <sys/types.h>

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

// Runs commands: the process runner above, or a test's stand-in.
class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  // As run_command.
  virtual CommandResult run(const std::vector<std::string>& argv,
                            std::chrono::milliseconds timeout) = 0;
  // As cancel_commands.
  virtual void cancel_all() = 0;
};

class ProcessRunner final : public CommandRunner {
 public:
  CommandResult run(const std::vector<std::string>& argv,
                    std::chrono::milliseconds timeout) override {
    return run_command(argv, timeout);
  }
  void cancel_all() override { cancel_commands(); }
};

}  // namespace ar
