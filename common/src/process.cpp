#include "autoresume/process.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
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

[[noreturn]] void fail_errno(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}

// argv and the environment as exec takes them, built before any fork.
struct ExecArgs {
  std::vector<std::string> words;
  std::vector<char*> argv;
  std::vector<std::string> env_words;
  std::vector<char*> envp;  // empty: ours

  ExecArgs(const std::vector<std::string>& args, const CommandOptions& options) : words(args) {
    for (auto& word : words) argv.push_back(word.data());
    argv.push_back(nullptr);
    if (!options.environment) return;
    env_words = *options.environment;
    for (auto& word : env_words) envp.push_back(word.data());
    envp.push_back(nullptr);
  }
  char** env() { return envp.empty() ? environ : envp.data(); }
};

// The command's stdin: /dev/null, or a memory file holding `input` (no
// pipe to feed, so no wait and no SIGPIPE whatever the command does).
int input_file(const std::string& input) {
  if (input.empty()) {
    const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail_errno("/dev/null");
    return fd;
  }
  const int fd = memfd_create("command-input", MFD_CLOEXEC);
  if (fd < 0) fail_errno("memfd_create");
  std::size_t done = 0;
  while (done < input.size()) {
    const auto n = write(fd, input.data() + done, input.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = errno;
      close(fd);
      errno = error;
      fail_errno("writing a command's input");
    }
    done += static_cast<std::size_t>(n);
  }
  if (lseek(fd, 0, SEEK_SET) != 0) {
    const int error = errno;
    close(fd);
    errno = error;
    fail_errno("lseek");
  }
  return fd;
}

// The supplementary groups of `as.uid`'s passwd entry, as initgroups would
// set them; just `as.gid` for a uid without one.
std::vector<gid_t> groups_of(const RunAs& as) {
  std::vector<char> buffer(16384);
  passwd entry{};
  passwd* found = nullptr;
  while (getpwuid_r(as.uid, &entry, buffer.data(), buffer.size(), &found) == ERANGE)
    buffer.resize(buffer.size() * 2);
  if (found == nullptr) return {as.gid};
  int count = 32;
  std::vector<gid_t> groups(static_cast<std::size_t>(count));
  while (getgrouplist(found->pw_name, as.gid, groups.data(), &count) < 0)
    groups.resize(static_cast<std::size_t>(count) + 32);
  groups.resize(static_cast<std::size_t>(count));
  return groups;
}

// What a child that could not exec writes back: the step and its errno.
struct ChildError {
  int step = 0;
  int error = 0;
};
constexpr const char* kSteps[] = {"setsid", "dup2", "setgroups", "setgid", "setuid", "exec"};

[[noreturn]] void child_failed(int report, int step) {
  const ChildError e{step, errno};
  [[maybe_unused]] const auto n = write(report, &e, sizeof e);
  _exit(127);
}

// The child, between fork and exec: async-signal-safe calls only (the
// parent may have other threads, holding locks of malloc or of stdio).
// The identity changes are raw system calls, for this one thread.
[[noreturn]] void exec_as(char** argv, char** envp, int in, int out, int report, const RunAs& as,
                          const gid_t* groups, std::size_t group_count) {
  // A session of its own: its own process group (a timeout kills the
  // group), and no controlling terminal of ours to push keys into.
  if (setsid() < 0) child_failed(report, 0);
  if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0) child_failed(report, 1);
  // Nothing of ours outlives the exec (the report pipe is close-on-exec too).
  close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  if (syscall(SYS_setgroups, group_count, groups) != 0) child_failed(report, 2);
  if (syscall(SYS_setgid, as.gid) != 0) child_failed(report, 3);
  if (syscall(SYS_setuid, as.uid) != 0) child_failed(report, 4);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execve(argv[0], argv, envp);
  child_failed(report, 5);
}

// Starts args as another user (fork, then exec); `out` becomes its stdout
// and stderr.
pid_t fork_as(ExecArgs& args, int in, int out, const RunAs& as) {
  const auto& path = args.words[0];
  if (path.empty() || path[0] != '/')
    throw std::runtime_error("cannot run '" + path + "' as uid " + std::to_string(as.uid) +
                             ": not an absolute path");
  const auto groups = groups_of(as);
  int report[2];
  if (pipe2(report, O_CLOEXEC) != 0) fail_errno("pipe");
  // No signal handler of ours may run in the child before its exec.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid = fork();
  if (pid == 0)
    exec_as(args.argv.data(), args.env(), in, out, report[1], as, groups.data(), groups.size());
  const int fork_error = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  close(report[1]);
  if (pid < 0) {
    close(report[0]);
    errno = fork_error;
    fail_errno("cannot run " + path + ": fork");
  }
  ChildError e;
  ssize_t n = 0;
  while ((n = read(report[0], &e, sizeof e)) < 0 && errno == EINTR) {
  }
  close(report[0]);
  if (n != static_cast<ssize_t>(sizeof e)) return pid;  // closed by the exec
  while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  const auto step = e.step >= 0 && e.step < 6 ? kSteps[e.step] : "?";
  throw std::runtime_error("cannot run " + path + " as uid " + std::to_string(as.uid) + " gid " +
                           std::to_string(as.gid) + ": " + step + ": " + std::strerror(e.error));
}

// Starts args with posix_spawn, as we are.
pid_t spawn(ExecArgs& args, int in, int out) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in, 0);
  posix_spawn_file_actions_adddup2(&actions, out, 1);
  posix_spawn_file_actions_adddup2(&actions, out, 2);
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
  const int rc = posix_spawnp(&pid, args.argv[0], &actions, &attr, args.argv.data(), args.env());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw std::runtime_error("cannot run " + args.words[0] + ": " + std::strerror(rc));
  return pid;
}

}  // namespace

void cancel_commands() { g_cancelled.store(true); }

Spawned spawn_command(const std::vector<std::string>& argv, const CommandOptions& options) {
  if (argv.empty()) throw std::runtime_error("no command");
  ExecArgs args(argv, options);
  const int in = input_file(options.input);
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    close(in);
    fail_errno("pipe");
  }
  pid_t pid = -1;
  try {
    pid =
        options.user ? fork_as(args, in, pipe_fds[1], *options.user) : spawn(args, in, pipe_fds[1]);
  } catch (...) {
    close(in);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    throw;
  }
  close(in);
  close(pipe_fds[1]);
  return {pid, pipe_fds[0]};
}

CommandResult run_command(const std::vector<std::string>& args, std::chrono::milliseconds timeout,
                          const CommandOptions& options) {
  CommandResult result;
  Spawned child;
  try {
    child = spawn_command(args, options);
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
    if (g_cancelled.load() || (options.stop != nullptr && options.stop->load())) {
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
    // And the command itself, should it have left its group (a command run
    // as a user may be taken over by that user).
    kill(pid, SIGKILL);
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

namespace ar {

CommandResult ProcessRunner::run_with_env(const std::vector<std::string>& argv,
                                          std::chrono::milliseconds timeout,
                                          const std::vector<std::string>& environment) {
  CommandOptions options;
  std::vector<std::string> all;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) all.emplace_back(*e);
  all.insert(all.end(), environment.begin(), environment.end());
  options.environment = std::move(all);
  return run_command(argv, timeout, options);
}

}  // namespace ar
