// The store's state_dir: checked to be the controller's alone, and locked
// for the store's life (Store::StateLock).
#include <fcntl.h>
#include <fmt/core.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "store/store.hpp"

namespace ar {

namespace {

// Steps hold every user's command lines: the folder is the controller's
// alone. A missing one is created with mode 700 (mkdir: one that appears
// meanwhile is checked as any other). An existing one must be a directory,
// not a symlink, of this uid that no one else may write to (it is then
// made 700); a shared one (/tmp, mode 1777), another user's or a symlink
// (which someone could have planted in a shared parent) is refused and
// left as it is.
void prepare_state_dir(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT)
      throw std::runtime_error(fmt::format("state_dir {}: {}", dir.string(), std::strerror(errno)));
    if (dir.has_parent_path()) fs::create_directories(dir.parent_path());
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      throw std::runtime_error(fmt::format("state_dir {}: {}", dir.string(), std::strerror(errno)));
    if (lstat(dir.c_str(), &st) != 0)
      throw std::runtime_error(fmt::format("state_dir {}: {}", dir.string(), std::strerror(errno)));
  }
  if (S_ISLNK(st.st_mode))
    throw std::runtime_error(fmt::format(
        "state_dir {} is a symbolic link: give the controller a directory of its own (a missing "
        "one is created with mode 700)",
        dir.string()));
  if (!S_ISDIR(st.st_mode))
    throw std::runtime_error(fmt::format("state_dir {} is not a directory", dir.string()));
  if (st.st_uid != geteuid())
    throw std::runtime_error(fmt::format(
        "state_dir {} belongs to uid {}, not to this controller's uid {}: give the controller a "
        "directory of its own (a missing one is created with mode 700)",
        dir.string(), st.st_uid, geteuid()));
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    throw std::runtime_error(fmt::format(
        "state_dir {} may be written by others (mode {:o}): give the controller a directory of "
        "its own (a missing one is created with mode 700)",
        dir.string(), st.st_mode & 07777));
  if ((st.st_mode & 07777) != 0700 && chmod(dir.c_str(), 0700) != 0)
    throw std::runtime_error(fmt::format("state_dir {}: {}", dir.string(), std::strerror(errno)));
}

}  // namespace

Store::StateLock::StateLock(const std::filesystem::path& state_dir) {
  prepare_state_dir(state_dir);
  const auto file = state_dir / "lock";
  fd_.reset(::open(file.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd_.valid())
    throw std::runtime_error(
        fmt::format("cannot open {}: {}", file.string(), std::strerror(errno)));
  if (flock(fd_.get(), LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char pid[32] = "";
    const auto n = ::pread(fd_.get(), pid, sizeof pid - 1, 0);
    fd_.reset(-1);
    if (error == EWOULDBLOCK)
      throw std::runtime_error(fmt::format(
          "state_dir {} is in use by another controller{}: one state serves one controller "
          "(two would undo each other's repairs)",
          state_dir.string(),
          n > 0 ? fmt::format(" (pid {})", std::string(pid, static_cast<std::size_t>(n)))
                : std::string()));
    throw std::runtime_error(
        fmt::format("cannot lock {}: {}", file.string(), std::strerror(error)));
  }
  const auto pid = std::to_string(getpid());
  if (::ftruncate(fd_.get(), 0) != 0 ||
      ::pwrite(fd_.get(), pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    // Only what the refusal of a second controller shows: not fatal.
  }
}

}  // namespace ar
