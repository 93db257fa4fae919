#include "autoresume/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace ar {

namespace {

std::atomic<bool> g_cancelled{false};

}  // namespace

void cancel_commands() { g_cancelled.store(true); }

Spawned spawn_command(const std::vector<std::string>& args) {
  if (args.empty()) throw std::runtime_error("no command");
  auto words = args;
  std::vector<char*> argv;
  for (auto& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  // Nothing of ours (a daemon's listening socket above all) may outlive us
  // in a command that runs on after a restart.
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group, so that a timeout kills what it started too; no
  // signal blocked, whatever the calling thread blocks.
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(pipe_fds[1]);
  if (rc != 0) {
    close(pipe_fds[0]);
    throw std::runtime_error("cannot run " + words[0] + ": " + std::strerror(rc));
  }
  return {pid, pipe_fds[0]};
}

CommandResult run_command(const std::vector<std::string>& args, std::chrono::milliseconds timeout) {
  CommandResult result;
  Spawned child;
  try {
    child = spawn_command(args);
  } catch (const std::runtime_error& e) {
    result.error = e.what();
    return result;
  }
  const auto pid = child.pid;
  const auto& words = args;
  const int output = child.output;

  constexpr std::size_t kKeep = 64 * 1024;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  bool cancelled = false;
  bool open = true;  // the pipe: a command may close its output and run on
  int status = 0;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    if (g_cancelled.load()) {
      cancelled = true;
      break;
    }
    const int slice = static_cast<int>(std::min<long>(left.count(), 200));
    if (!open) {
      const auto done = waitpid(pid, &status, WNOHANG);
      if (done == pid || (done < 0 && errno != EINTR)) break;
      poll(nullptr, 0, std::min(slice, 20));
      continue;
    }
    pollfd p{output, POLLIN, 0};
    const int ready = poll(&p, 1, slice);
    if (ready <= 0) continue;  // EINTR or a spurious wake: the deadline decides
    char buffer[4096];
    const auto n = read(output, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {  // the command and everything it started closed the pipe
      open = false;
      continue;
    }
    result.output.append(buffer, static_cast<std::size_t>(n));
    if (result.output.size() > kKeep) result.output.erase(0, result.output.size() - kKeep);
  }
  close(output);
  if (timed_out || cancelled) {
    kill(-pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (cancelled) {
    result.error = words[0] + " was stopped: the controller is shutting down";
  } else if (timed_out) {
    result.error =
        words[0] + " did not finish within " + std::to_string(timeout.count() / 1000) + " s";
  } else if (WIFEXITED(status)) {
    result.status = WEXITSTATUS(status);
  } else {
    result.error = words[0] + " was killed by signal " + std::to_string(WTERMSIG(status));
  }
  return result;
}

}  // namespace ar
