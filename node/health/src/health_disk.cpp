// The check "disk": the file systems a job writes to (its checkpoints, its
// scratch) still take a write. A node whose local disk went read-only after
// I/O errors, filled up, or hangs fails a training's next checkpoint, and a
// crash from it looks like the application's own.
//
// The probes run in a child process of their own (its own session, its
// output to /dev/null): a hung file system (a dead NFS server, a disk that
// stopped answering) holds its caller in an uninterruptible wait that no
// signal ends. The check fails at its deadline and leaves the child behind,
// holding no descriptor of the checker's (whose caller reads the checker's
// output to its end). The child speaks through a pipe in fixed records and
// calls only system calls: no allocation, which a child of a threaded
// process must not do.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "autoresume/health.hpp"

namespace ar::health {

namespace {

constexpr std::size_t kProbeBytes = 4096;
constexpr std::size_t kMaxName = 4096;

// What the child found about one path (`path`: its index), or that it is
// done (`path` -1).
enum class Found : std::int32_t {
  probing,        // the probe of this path begins
  cannot_look,    // statvfs failed (value: errno)
  read_only,      // mounted read-only
  low_space,      // value: MiB free
  cannot_create,  // value: errno
  cannot_write,   // value: errno, or 0 for a short write
  cannot_sync,    // value: errno
  cannot_read,    // value: errno, or 0 for a short read
  differs,        // read back other than written
  name_too_long,  // the test file's name would not fit
  done,
};
struct Record {
  std::int32_t path = -1;
  Found what = Found::done;
  std::int64_t value = 0;
};

void say(int fd, std::int32_t path, Found what, std::int64_t value) {
  const Record record{path, what, value};
  // A record is far below PIPE_BUF: written whole or not at all.
  [[maybe_unused]] const auto ignored = ::write(fd, &record, sizeof record);
}

// In the child: the probes of `paths`, reported on `fd`; system calls only.
void probe_all(int fd, const std::vector<std::filesystem::path>& paths,
               std::uint64_t min_free_bytes) {
  static char written[kProbeBytes];
  static char back[kProbeBytes];
  static char name[kMaxName];
  for (std::size_t i = 0; i < kProbeBytes; ++i) written[i] = static_cast<char>('a' + i % 26);
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const auto index = static_cast<std::int32_t>(i);
    const char* dir = paths[i].c_str();
    say(fd, index, Found::probing, 0);
    struct statvfs fs {};
    if (::statvfs(dir, &fs) != 0) {
      say(fd, index, Found::cannot_look, errno);
      continue;
    }
    if ((fs.f_flag & ST_RDONLY) != 0) {
      say(fd, index, Found::read_only, 0);
      continue;
    }
    const auto free_bytes = static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
    if (min_free_bytes > 0 && free_bytes < min_free_bytes) {
      say(fd, index, Found::low_space, static_cast<std::int64_t>(free_bytes / (1024 * 1024)));
      continue;
    }
    // A name no one can guess ahead (the time in nanoseconds and this
    // child's pid), tried again if it is taken.
    int out = -1;
    int error = 0;
    for (int attempt = 0; attempt < 8 && out < 0; ++attempt) {
      struct timespec now {};
      ::clock_gettime(CLOCK_REALTIME, &now);
      const int length =
          std::snprintf(name, sizeof name, "%s/.auto-resume-disk-check.%d.%ld.%d", dir,
                        static_cast<int>(::getpid()), static_cast<long>(now.tv_nsec), attempt);
      if (length < 0 || static_cast<std::size_t>(length) >= sizeof name) {
        error = -1;
        break;
      }
      out = ::open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      error = out < 0 ? errno : 0;
      if (out < 0 && error != EEXIST) break;
    }
    if (error == -1) {
      say(fd, index, Found::name_too_long, 0);
      continue;
    }
    if (out < 0) {
      say(fd, index, Found::cannot_create, error);
      continue;
    }
    bool bad = false;
    const auto wrote = ::write(out, written, kProbeBytes);
    if (wrote != static_cast<ssize_t>(kProbeBytes)) {
      say(fd, index, Found::cannot_write, wrote < 0 ? errno : 0);
      bad = true;
    } else if (::fsync(out) != 0) {
      say(fd, index, Found::cannot_sync, errno);
      bad = true;
    }
    ::close(out);
    if (!bad) {
      const int in = ::open(name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      const auto got = in < 0 ? -1 : ::read(in, back, kProbeBytes);
      if (got != static_cast<ssize_t>(kProbeBytes))
        say(fd, index, Found::cannot_read, got < 0 ? errno : 0);
      else if (std::memcmp(back, written, kProbeBytes) != 0)
        say(fd, index, Found::differs, 0);
      if (in >= 0) ::close(in);
    }
    ::unlink(name);
  }
  say(fd, -1, Found::done, 0);
}

std::string errno_text(std::int64_t error) {
  return error == 0 ? "cut short" : std::strerror(static_cast<int>(error));
}

std::string text_of(const Record& r, std::uint64_t min_free_bytes) {
  switch (r.what) {
    case Found::cannot_look:
      return "cannot look at it: " + errno_text(r.value);
    case Found::read_only:
      return "mounted read-only";
    case Found::low_space:
      return std::to_string(r.value) +
             " MiB free, under disk_min_free_mb=" + std::to_string(min_free_bytes / (1024 * 1024));
    case Found::cannot_create:
      return "cannot create a test file: " + errno_text(r.value);
    case Found::cannot_write:
      return "cannot write a test file: " + errno_text(r.value);
    case Found::cannot_sync:
      return "cannot sync a test file: " + errno_text(r.value);
    case Found::cannot_read:
      return "cannot read a test file back: " + errno_text(r.value);
    case Found::differs:
      return "a test file read back differs from what was written";
    case Found::name_too_long:
      return "the path is too long for a test file in it";
    case Found::probing:
    case Found::done:
      break;
  }
  return "?";
}

std::string seconds_text(std::chrono::milliseconds timeout) {
  const auto ms = timeout.count();
  return ms % 1000 == 0 ? std::to_string(ms / 1000) + " s"
                        : std::to_string(ms / 1000) + "." + std::to_string(ms % 1000 / 100) + " s";
}

}  // namespace

Result check_disk(const std::vector<std::filesystem::path>& paths, std::uint64_t min_free_bytes,
                  std::chrono::milliseconds timeout) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return {"disk", Status::fail, std::string("cannot make a pipe: ") + std::strerror(errno)};
  const pid_t child = ::fork();
  if (child < 0) {
    const int error = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return {"disk", Status::fail, std::string("cannot start the probe: ") + std::strerror(error)};
  }
  if (child == 0) {
    ::setsid();
    const int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) {
      ::dup2(null, 0);
      ::dup2(null, 1);
      ::dup2(null, 2);
    }
    ::close(fds[0]);
    probe_all(fds[1], paths, min_free_bytes);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::vector<std::string> problems;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::int32_t at = 0;  // the path the child was on when last heard
  bool done = false;
  while (!done) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    struct pollfd in {
      fds[0], POLLIN, 0
    };
    if (left.count() <= 0 || ::poll(&in, 1, static_cast<int>(left.count())) == 0) break;
    Record record;
    const auto got = ::read(fds[0], &record, sizeof record);
    if (got < 0 && errno == EINTR) continue;
    if (got != static_cast<ssize_t>(sizeof record)) break;  // the child is gone
    if (record.path < 0) {
      done = true;
    } else if (static_cast<std::size_t>(record.path) >= paths.size()) {
      break;  // not the child's
    } else if (record.what == Found::probing) {
      at = record.path;
    } else {
      problems.push_back(paths[static_cast<std::size_t>(record.path)].string() + ": " +
                         text_of(record, min_free_bytes));
    }
  }
  ::close(fds[0]);
  if (!done) {
    // Hung (or gone without a word): left behind, never waited for.
    ::kill(child, SIGKILL);
    std::string where = "the file systems";
    if (!paths.empty())
      where = paths[std::min(static_cast<std::size_t>(at), paths.size() - 1)].string();
    return {"disk", Status::fail,
            where + ": no answer within " + seconds_text(timeout) + " (a hung file system)"};
  }
  ::waitpid(child, nullptr, 0);
  if (!problems.empty()) {
    std::string detail;
    for (const auto& p : problems) detail += (detail.empty() ? "" : "; ") + p;
    return {"disk", Status::fail, detail};
  }
  std::string checked;
  for (const auto& p : paths) checked += (checked.empty() ? "" : ", ") + p.string();
  return {"disk", Status::pass, checked + " take a write"};
}

}  // namespace ar::health
