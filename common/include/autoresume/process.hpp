#pragma once
// Runs other programs: a command with a deadline and its output kept, or a
// child whose output the caller reads as it goes. Used by the controller's
// providers and by the programs on nodes (health checks, the node agent).

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <optional>
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

// A user a command runs as: a root daemon's program on a user's behalf.
struct RunAs {
  uid_t uid = 0;
  gid_t gid = 0;
};

// How a command starts, beyond its argv.
struct CommandOptions {
  // Its uid and gid, with the user's supplementary groups (of the passwd
  // entry of `uid`, if it has one; else `gid` alone). Needs root; argv[0]
  // must then be an absolute path. Started by fork and exec: between the
  // two, the child makes only async-signal-safe calls (the caller may be
  // multithreaded), and every signal is reset to its default action.
  std::optional<RunAs> user;
  // Its whole environment ("NAME=value" each), instead of ours.
  std::optional<std::vector<std::string>> environment;
  // Its stdin (else /dev/null).
  std::string input;
  // Once set, the command is stopped as by cancel_commands: this call's
  // own stop (cancel_commands stops every command of the process).
  const std::atomic<bool>* stop = nullptr;
};

// Runs argv (argv[0] a path, or a name looked up in PATH) with stdin from
// /dev/null (or options.input), in its own process group, with no
// descriptor of ours but stdout and stderr; kills the group after
// `timeout`.
CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                          const CommandOptions& options = {});

// Starts argv like run_command (stdin /dev/null or options.input, its own
// process group, no descriptor of ours, no signal blocked) and hands back
// its pid and the read end of a pipe with its stdout and stderr, for a
// caller that reads as it goes. Throws std::runtime_error when it cannot
// start (for options.user: also when it cannot take that user's identity,
// naming the call that failed).
struct Spawned {
  pid_t pid = -1;
  int output = -1;
};
Spawned spawn_command(const std::vector<std::string>& argv, const CommandOptions& options = {});

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
  // As run, with `environment` ("NAME=value" each) added to ours.
  virtual CommandResult run_with_env(const std::vector<std::string>& argv,
                                     std::chrono::milliseconds timeout,
                                     const std::vector<std::string>& environment) = 0;
  // As cancel_commands.
  virtual void cancel_all() = 0;
};

class ProcessRunner final : public CommandRunner {
 public:
  CommandResult run(const std::vector<std::string>& argv,
                    std::chrono::milliseconds timeout) override {
    return run_command(argv, timeout);
  }
  CommandResult run_with_env(const std::vector<std::string>& argv,
                             std::chrono::milliseconds timeout,
                             const std::vector<std::string>& environment) override;
  void cancel_all() override { cancel_commands(); }
};

}  // namespace ar
