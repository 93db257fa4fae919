// The check "disk": the file systems a job writes to (its checkpoints, its
// scratch) still take a write. A node whose local disk went read-only after
// I/O errors, filled up, or hangs fails a training's next checkpoint, and a
// crash from it looks like the application's own.

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "autoresume/health.hpp"

namespace ar::health {

namespace {

constexpr std::size_t kProbeBytes = 4096;

std::string errno_text(int error) { return std::strerror(error); }

// What is wrong with `path`, or nothing.
std::string probe(const std::filesystem::path& path, std::uint64_t min_free_bytes) {
  struct statvfs fs {};
  if (::statvfs(path.c_str(), &fs) != 0)
    return path.string() + ": cannot look at it: " + errno_text(errno);
  if ((fs.f_flag & ST_RDONLY) != 0) return path.string() + ": mounted read-only";
  const auto free_bytes = static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
  if (min_free_bytes > 0 && free_bytes < min_free_bytes)
    return path.string() + ": " + std::to_string(free_bytes / (1024 * 1024)) +
           " MiB free, under disk_min_free_mb=" + std::to_string(min_free_bytes / (1024 * 1024));
  const auto file = path / (".auto-resume-disk-check." + std::to_string(::getpid()));
  std::array<char, kProbeBytes> data{};
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>('a' + i % 26);
  const int out = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0) return path.string() + ": cannot create a test file: " + errno_text(errno);
  std::string error;
  if (::write(out, data.data(), data.size()) != static_cast<ssize_t>(data.size()))
    error = "cannot write a test file: " + errno_text(errno);
  else if (::fsync(out) != 0)
    error = "cannot sync a test file: " + errno_text(errno);
  ::close(out);
  if (error.empty()) {
    std::array<char, kProbeBytes> back{};
    const int in = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (in < 0 || ::read(in, back.data(), back.size()) != static_cast<ssize_t>(back.size()))
      error = "cannot read a test file back: " + errno_text(errno);
    else if (back != data)
      error = "a test file read back differs from what was written";
    if (in >= 0) ::close(in);
  }
  ::unlink(file.c_str());
  return error.empty() ? "" : path.string() + ": " + error;
}

}  // namespace

Result check_disk(const std::vector<std::filesystem::path>& paths, std::uint64_t min_free_bytes,
                  std::chrono::milliseconds timeout) {
  // On a thread of its own: a hung file system (a dead NFS server, a disk
  // that stopped answering) blocks its caller for good; the check fails at
  // `timeout` and the thread is left behind (the checker exits soon after).
  struct Shared {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
    std::size_t at = 0;  // the path being probed
    std::vector<std::string> problems;
  };
  auto shared = std::make_shared<Shared>();
  std::thread([shared, paths, min_free_bytes] {
    for (std::size_t i = 0; i < paths.size(); ++i) {
      {
        std::lock_guard lock(shared->mutex);
        shared->at = i;
      }
      auto problem = probe(paths[i], min_free_bytes);
      std::lock_guard lock(shared->mutex);
      if (!problem.empty()) shared->problems.push_back(std::move(problem));
    }
    std::lock_guard lock(shared->mutex);
    shared->done = true;
    shared->done_cv.notify_all();
  }).detach();
  std::unique_lock lock(shared->mutex);
  if (!shared->done_cv.wait_for(lock, timeout, [&] { return shared->done; }))
    return {"disk", Status::fail,
            paths[shared->at].string() + ": no answer within " +
                std::to_string(timeout.count() / 1000) + " s (a hung file system)"};
  if (!shared->problems.empty()) {
    std::string detail;
    for (const auto& p : shared->problems) detail += (detail.empty() ? "" : "; ") + p;
    return {"disk", Status::fail, detail};
  }
  std::string checked;
  for (const auto& p : paths) checked += (checked.empty() ? "" : ", ") + p.string();
  return {"disk", Status::pass, checked + " take a write"};
}

}  // namespace ar::health
