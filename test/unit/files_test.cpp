// The files the controller writes as root beside an admin's (files.hpp):
// whole or not at all, with the old file's mode and owner, never through a
// planted symlink, and only in a folder of its own.

#include "files.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "fakes.hpp"

namespace {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

std::string text_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void put(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

struct stat stat_of(const fs::path& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st;
}

// A folder of the test's own, mode 755, with no leftovers.
struct Folder {
  ar::test::TempDir tmp;
  fs::path dir = tmp.path / "conf";
  Folder() {
    fs::create_directory(dir);
    fs::permissions(dir, static_cast<fs::perms>(0755), fs::perm_options::replace);
  }
  std::size_t entries() const {
    return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir), {}));
  }
};

}  // namespace

TEST_CASE("a replaced file keeps its mode and owner, and a new one is 0644", "[files]") {
  Folder f;
  const auto path = f.dir / "g.conf";
  CHECK(ar::files::replace_file(path, "count=1\n").empty());
  CHECK(text_of(path) == "count=1\n");
  CHECK((stat_of(path).st_mode & 07777) == 0644);
  fs::permissions(path, static_cast<fs::perms>(0600), fs::perm_options::replace);
  if (geteuid() == 0) REQUIRE(::chown(path.c_str(), 65534, 65534) == 0);
  CHECK(ar::files::replace_file(path, "count=2\n").empty());
  CHECK(text_of(path) == "count=2\n");
  const auto st = stat_of(path);
  CHECK((st.st_mode & 07777) == 0600);
  if (geteuid() == 0) CHECK(st.st_uid == 65534);
  CHECK(f.entries() == 1);  // no temporary file left
}

TEST_CASE("a symlink planted at the temporary name is not followed", "[files][security]") {
  Folder f;
  const auto victim = f.tmp.path / "victim";
  put(victim, "root's secret\n");
  fs::permissions(victim, static_cast<fs::perms>(0600), fs::perm_options::replace);
  const auto path = f.dir / "g.conf";
  put(path, "count=1\n");
  fs::create_symlink(victim, f.dir / "g.conf.auto-resume.tmp");
  CHECK(ar::files::replace_file(path, "count=2\n").empty());
  CHECK(text_of(path) == "count=2\n");
  CHECK(text_of(victim) == "root's secret\n");
  const auto st = stat_of(victim);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(st.st_uid == geteuid());
  CHECK(S_ISREG(stat_of(path).st_mode));
  CHECK(f.entries() == 1);
}

TEST_CASE("a symlink at the file's own name is replaced, its target untouched",
          "[files][security]") {
  Folder f;
  const auto victim = f.tmp.path / "victim";
  put(victim, "root's secret\n");
  const auto path = f.dir / "g.conf";
  fs::create_symlink(victim, path);
  CHECK(ar::files::replace_file(path, "count=2\n").empty());
  CHECK(text_of(victim) == "root's secret\n");
  CHECK(S_ISREG(stat_of(path).st_mode));
  CHECK(text_of(path) == "count=2\n");
}

TEST_CASE("a file is written only in a folder of the controller's own", "[files][security]") {
  Folder f;
  const auto path = f.dir / "g.conf";
  put(path, "count=1\n");
  SECTION("writable by others") {
    fs::permissions(f.dir, static_cast<fs::perms>(01777), fs::perm_options::replace);
    CHECK_THROWS_WITH(ar::files::replace_file(path, "count=2\n"),
                      Contains(f.dir.string() + " may be written by others (mode 1777)"));
    CHECK_THROWS_WITH(ar::files::check_own_folder(f.dir, "groups_dir"),
                      Contains("groups_dir: the folder") && Contains("mode 1777"));
  }
  SECTION("writable by its group") {
    fs::permissions(f.dir, static_cast<fs::perms>(0775), fs::perm_options::replace);
    CHECK_THROWS_WITH(ar::files::replace_file(path, "count=2\n"), Contains("mode 775"));
  }
  SECTION("another user's") {
    if (geteuid() != 0) return;  // only root can give a folder away
    REQUIRE(::chown(f.dir.c_str(), 65534, 65534) == 0);
    CHECK_THROWS_WITH(ar::files::replace_file(path, "count=2\n"),
                      Contains("belongs to uid 65534, not to the controller's uid 0"));
  }
  CHECK(text_of(path) == "count=1\n");
  CHECK(f.entries() == 1);
}

TEST_CASE("a file in a missing folder is refused, naming it", "[files]") {
  Folder f;
  CHECK_THROWS_WITH(
      ar::files::replace_file(f.dir / "nowhere" / "g.conf", "x"),
      Contains((f.dir / "nowhere").string()) && Contains("No such file or directory"));
  CHECK_THROWS_WITH(ar::files::check_own_folder(f.dir / "nowhere", "groups_dir"),
                    Contains("groups_dir: " + (f.dir / "nowhere").string()));
}
