#pragma once
// Files the controller writes as root beside an admin's: the continuous
// provisioning's group files (their .next and .prev) and its slurm.conf
// include file. Written whole or not at all, and never through a name
// someone else could have planted: only in a folder of the controller's own
// uid that no one else may write to, the new text in a file created there
// (never opened if it exists, never through a symlink) and renamed over the
// old one.

#include <filesystem>
#include <string>
#include <string_view>

namespace ar::files {

// Throws (naming `what`, the folder, its owner or mode) unless `folder` is
// a directory owned by this process's effective uid and writable by no
// one else.
void check_own_folder(const std::filesystem::path& folder, std::string_view what);

// Replaces `path` with `text`: checks its folder (check_own_folder), writes
// PATH.auto-resume.tmp (created anew: O_EXCL, O_NOFOLLOW; a leftover of a
// write that died is removed first), gives it the mode and owner of the
// file it replaces (0644 and the controller's for a new one), syncs it and
// renames it over `path`. A symlink at `path` is replaced, not followed. On
// any failure `path` is as it was and the temporary file is gone; throws
// std::runtime_error naming the file. Returns a warning to log when the old
// owner could not be given back (empty otherwise).
std::string replace_file(const std::filesystem::path& path, const std::string& text);

}  // namespace ar::files
