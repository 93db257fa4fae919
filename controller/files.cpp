#include "files.hpp"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "autoresume/connect.hpp"

namespace ar::files {

namespace {

std::string why() { return std::strerror(errno); }

using net::Fd;

void check_stat(const struct stat& st, const std::filesystem::path& folder, std::string_view what) {
  if (!S_ISDIR(st.st_mode))
    throw std::runtime_error(fmt::format("{}: {} is not a directory", what, folder.string()));
  if (st.st_uid != geteuid())
    throw std::runtime_error(fmt::format(
        "{}: the folder {} belongs to uid {}, not to the controller's uid {}: the controller "
        "writes only in a folder of its own that no one else may write to",
        what, folder.string(), st.st_uid, geteuid()));
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    throw std::runtime_error(fmt::format(
        "{}: the folder {} may be written by others (mode {:o}): the controller writes only in "
        "a folder of its own that no one else may write to (chmod go-w)",
        what, folder.string(), st.st_mode & 07777));
}

void write_all(int fd, const std::string& text, const std::string& name) {
  std::size_t done = 0;
  while (done < text.size()) {
    const auto n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(fmt::format("cannot write {}: {}", name, why()));
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

void check_own_folder(const std::filesystem::path& folder, std::string_view what) {
  struct stat st {};
  if (::stat(folder.c_str(), &st) != 0)
    throw std::runtime_error(fmt::format("{}: {}: {}", what, folder.string(), why()));
  check_stat(st, folder, what);
}

std::string replace_file(const std::filesystem::path& path, const std::string& text) {
  const auto name = path.filename().string();
  if (name.empty() || name == "." || name == "..")
    throw std::runtime_error(fmt::format("cannot write {}: not a file name", path.string()));
  const auto folder = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  // The folder is opened once and every name is taken relative to it: a
  // folder swapped after the check is not written to.
  Fd dir(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0)
    throw std::runtime_error(
        fmt::format("cannot write {}: its folder {}: {}", path.string(), folder.string(), why()));
  struct stat st {};
  if (::fstat(dir.get(), &st) != 0)
    throw std::runtime_error(fmt::format("cannot write {}: {}", path.string(), why()));
  check_stat(st, folder, "cannot write " + path.string());

  struct stat was {};
  const bool existed =
      ::fstatat(dir.get(), name.c_str(), &was, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(was.st_mode);
  const auto temporary = name + ".auto-resume.tmp";
  const auto shown = (folder / temporary).string();
  // A leftover of a write that died midway (no one else writes here).
  if (::unlinkat(dir.get(), temporary.c_str(), 0) != 0 && errno != ENOENT)
    throw std::runtime_error(fmt::format("cannot remove the leftover {}: {}", shown, why()));
  Fd out(::openat(dir.get(), temporary.c_str(),
                  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (out.get() < 0) throw std::runtime_error(fmt::format("cannot create {}: {}", shown, why()));
  std::string warning;
  try {
    write_all(out.get(), text, shown);
    const mode_t mode = existed ? (was.st_mode & 07777) : 0644;
    if (::fchmod(out.get(), mode) != 0)
      throw std::runtime_error(fmt::format("cannot set the mode of {}: {}", shown, why()));
    if (existed && ::fchown(out.get(), was.st_uid, was.st_gid) != 0)
      warning =
          fmt::format("{}: cannot give it back to uid {}: {}", path.string(), was.st_uid, why());
    if (::fsync(out.get()) != 0)
      throw std::runtime_error(fmt::format("cannot sync {}: {}", shown, why()));
    if (::close(out.release()) != 0)
      throw std::runtime_error(fmt::format("cannot close {}: {}", shown, why()));
    if (::renameat(dir.get(), temporary.c_str(), dir.get(), name.c_str()) != 0)
      throw std::runtime_error(
          fmt::format("cannot rename {} to {}: {}", shown, path.string(), why()));
  } catch (...) {
    ::unlinkat(dir.get(), temporary.c_str(), 0);
    throw;
  }
  ::fsync(dir.get());  // the rename itself: best effort
  return warning;
}

}  // namespace ar::files
