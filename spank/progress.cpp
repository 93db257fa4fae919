// slurmstepd side (remote context): the progress files of a protected step
// (autoresume/progress.hpp). Before a task drops root, its step's folder is
// made (PROGRESS_DIR/NODE/JOB.STEP, the job owner's, 0700) in a tree of
// root's that nobody else can write to; each task then gets
// AUTO_RESUME_PROGRESS, its own file in it; the step daemon removes the
// folder when the step ends, and one it finds when the step starts (left by
// an earlier step with the same ids: a requeued job numbers its steps from
// 0 again, and a killed step daemon removes nothing). The node agent reads
// the files.
//
// Everything here runs as root with names that come from the step's
// environment (the user's): a node name is checked to be a plain name, no
// link is followed, and a folder that is not as expected is left alone
// (the step runs without the signal; nothing fails).

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

extern "C" {
#include <slurm/slurm.h>
}

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include "autoresume/progress.hpp"
#include "autoresume/task_env.hpp"
#include "plugin.hpp"

namespace ar::spank {

namespace {

// The step this hook runs for, when it is a registered protected step of
// srun's: its ids and this node's name.
struct ProgressStep {
  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;
  std::string node;
};

bool plain_name(const std::string& name) {
  if (name.empty() || name.size() > 64 || name == "." || name == "..") return false;
  for (const char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '_' || c == '.'))
      return false;
  return true;
}

std::optional<ProgressStep> progress_step(spank_t sp) {
  const auto& st = state();
  if (!st.enabled() || !st.config_error.empty()) return std::nullopt;
  ProgressStep out;
  std::uint32_t node_id = 0;
  if (spank_get_item(sp, S_JOB_ID, &out.job_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &out.step_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_NODEID, &node_id) != ESPANK_SUCCESS)
    return std::nullopt;
  if (out.step_id > SLURM_MAX_NORMAL_STEP_ID) return std::nullopt;
  char run_id[256] = "";
  if (spank_getenv(sp, kRegisteredVariable, run_id, sizeof run_id) != ESPANK_SUCCESS ||
      run_id[0] == '\0')
    return std::nullopt;
  const auto node = step_node_name(sp, node_id);
  if (!node || !plain_name(*node)) return std::nullopt;
  out.node = *node;
  return out;
}

// A folder of root's that only root writes to: made if missing, opened
// without following a link. -1 (and `why`) if it is not.
int root_dir(int parent, const char* path, std::string& why) {
  if (mkdirat(parent, path, 0755) != 0 && errno != EEXIST) {
    why = std::string("cannot make ") + path + ": " + std::strerror(errno);
    return -1;
  }
  const int fd = openat(parent, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0) {
    why = std::string("cannot open ") + path + ": " + std::strerror(errno);
    if (fd >= 0) close(fd);
    return -1;
  }
  if (st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    why = std::string(path) + " is not root's alone (owner uid " + std::to_string(st.st_uid) +
          ", or writable by others)";
    close(fd);
    return -1;
  }
  return fd;
}

// PROGRESS_DIR/NODE, opened; -1 (and `why`) if it cannot be.
int node_dir(const ProgressStep& step, std::string& why) {
  const int base = root_dir(AT_FDCWD, state().config.progress_dir.c_str(), why);
  if (base < 0) return -1;
  const int node = root_dir(base, step.node.c_str(), why);
  close(base);
  return node;
}

// Removes what `dir` holds (a depth of a few folders at most), never
// following a link.
void remove_inside(int dir, int depth) {
  DIR* listing = fdopendir(dup(dir));
  if (listing == nullptr) return;
  while (const dirent* entry = readdir(listing)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    if (unlinkat(dir, name.c_str(), 0) == 0 || errno != EISDIR || depth == 0) continue;
    const int inner = openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (inner < 0) continue;
    remove_inside(inner, depth - 1);
    close(inner);
    unlinkat(dir, name.c_str(), AT_REMOVEDIR);
  }
  closedir(listing);
}

}  // namespace

int remote_task_init_privileged(spank_t sp) {
  const auto step = progress_step(sp);
  if (!step) return ESPANK_SUCCESS;
  uid_t uid = 0;
  gid_t gid = 0;
  if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS)
    return ESPANK_SUCCESS;
  std::string why;
  const int node = node_dir(*step, why);
  if (node >= 0) {
    const auto name = progress_step_name(step->job_id, step->step_id);
    // Each task of the step comes here; the first one makes the folder.
    if (mkdirat(node, name.c_str(), 0700) == 0) {
      if (fchownat(node, name.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) != 0) {
        why = name + ": cannot give it to uid " + std::to_string(uid) + ": " + std::strerror(errno);
        unlinkat(node, name.c_str(), AT_REMOVEDIR);
      }
    } else if (errno != EEXIST) {
      why = "cannot make " + name + ": " + std::strerror(errno);
    }
    close(node);
  }
  if (!why.empty())
    slurm_verbose("%s: step %u.%u: no progress files (%s): the step cannot be found hung", kTag,
                  step->job_id, step->step_id, why.c_str());
  return ESPANK_SUCCESS;
}

void set_progress_variable(spank_t sp) {
  const auto step = progress_step(sp);
  if (!step) return;
  const auto dir =
      progress_step_dir(state().config.progress_dir, step->node, step->job_id, step->step_id);
  // The task runs as the job's owner now: the folder is its own, or none.
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) return;
  std::uint32_t rank = 0;
  if (spank_get_item(sp, S_TASK_GLOBAL_ID, &rank) != ESPANK_SUCCESS) return;
  const auto path = dir + "/" + std::to_string(rank);
  spank_setenv(sp, kProgressVariable, path.c_str(), 1);
}

int remote_init(spank_t sp) { return remote_exit(sp); }

int remote_exit(spank_t sp) {
  const auto step = progress_step(sp);
  if (!step) return ESPANK_SUCCESS;
  std::string why;
  const int node = node_dir(*step, why);
  if (node < 0) return ESPANK_SUCCESS;
  const auto name = progress_step_name(step->job_id, step->step_id);
  const int dir = openat(node, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir >= 0) {
    remove_inside(dir, 4);
    close(dir);
    unlinkat(node, name.c_str(), AT_REMOVEDIR);
  }
  close(node);
  return ESPANK_SUCCESS;
}

}  // namespace ar::spank
