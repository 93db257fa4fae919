#include "autoresume/progress_files.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>

#include "autoresume/progress.hpp"

namespace ar {

namespace {

// The most names read of one folder: a task can make as many files as it
// likes in its own, and the agent reads them every interval.
constexpr std::size_t kMaxNames = 4096;

// The names in the folder `dir` (an open descriptor, kept open), at most
// kMaxNames; `truncated` is set when there were more.
std::vector<std::string> names_in(int dir, bool& truncated) {
  std::vector<std::string> names;
  const int copy = dup(dir);
  if (copy < 0) return names;
  DIR* listing = fdopendir(copy);
  if (listing == nullptr) {
    close(copy);
    return names;
  }
  while (const dirent* entry = readdir(listing)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (names.size() == kMaxNames) {
      truncated = true;
      break;
    }
    names.push_back(name);
  }
  closedir(listing);
  return names;
}

int open_dir(int parent, const std::string& name) {
  return openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

// One rank's file: its age and what it holds; nothing if it is not a plain
// file that can be read.
std::optional<proto::RankProgress> read_rank(int dir, const std::string& name, std::uint32_t rank,
                                             std::chrono::system_clock::time_point now) {
  const int fd = openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return std::nullopt;
  }
  char text[kMaxBeatBytes + 1];
  const auto n = read(fd, text, sizeof text);
  close(fd);
  const auto mtime = std::chrono::system_clock::time_point{
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds{st.st_mtim.tv_sec} + std::chrono::nanoseconds{st.st_mtim.tv_nsec})};
  const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(now - mtime).count();
  proto::RankProgress out;
  out.rank = rank;
  // A file from the future (the clock stepped back) beat just now.
  out.age_ms = static_cast<std::uint32_t>(std::clamp<std::int64_t>(age, 0, 0xffffffffLL));
  if (n > 0) {
    if (const auto beat = parse_beat(std::string_view(text, static_cast<std::size_t>(n))))
      out.beat = *beat;
  }
  return out;
}

}  // namespace

ProgressScan scan_progress(const std::string& base, const std::string& node,
                           std::chrono::system_clock::time_point now) {
  ProgressScan scan;
  const int base_fd = open(base.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (base_fd < 0) return scan;
  const int node_fd = open_dir(base_fd, node);
  close(base_fd);
  if (node_fd < 0) return scan;
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::string> steps;
  for (const auto& name : names_in(node_fd, scan.truncated))
    if (const auto ids = parse_progress_step_name(name)) steps[*ids] = name;
  std::size_t ranks_left = proto::kMaxProgressRanks;
  for (const auto& [ids, name] : steps) {
    if (scan.steps.size() == proto::kMaxProgressSteps || ranks_left == 0) {
      scan.truncated = true;
      break;
    }
    const int dir = open_dir(node_fd, name);
    if (dir < 0) continue;
    std::map<std::uint32_t, std::string> ranks;
    for (const auto& file : names_in(dir, scan.truncated))
      if (const auto rank = parse_rank_name(file)) ranks[*rank] = file;
    proto::StepProgress step{ids.first, ids.second, {}};
    for (const auto& [rank, file] : ranks) {
      if (ranks_left == 0) {
        scan.truncated = true;
        break;
      }
      if (auto found = read_rank(dir, file, rank, now)) {
        step.ranks.push_back(std::move(*found));
        --ranks_left;
      }
    }
    close(dir);
    if (!step.ranks.empty()) scan.steps.push_back(std::move(step));
  }
  close(node_fd);
  return scan;
}

}  // namespace ar
