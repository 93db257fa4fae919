#include "autoresume/process.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "fakes.hpp"

using ar::CommandOptions;
using ar::run_command;
using ar::RunAs;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;

namespace {

constexpr uid_t kNobody = 65534;

// A script in a folder any user can read, for commands run as nobody.
std::filesystem::path script(const ar::test::TempDir& dir, const std::string& body) {
  chmod(dir.path.c_str(), 0755);
  const auto path = dir.path / "command.sh";
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  chmod(path.c_str(), 0755);
  return path;
}

}  // namespace

TEST_CASE("a command reads its input on stdin and gets only the environment it is given",
          "[process]") {
  CommandOptions options;
  options.input = "line one\nline two\n";
  options.environment = std::vector<std::string>{"ONLY=this", "PATH=/usr/bin:/bin"};
  const auto read = run_command({"/bin/sh", "-c", "cat; env | sort"}, 10s, options);
  CHECK(read.error.empty());
  CHECK(read.status == 0);
  CHECK(read.output == "line one\nline two\nONLY=this\nPATH=/usr/bin:/bin\nPWD=" +
                           std::filesystem::current_path().string() + "\n");
  // Without input, stdin is empty.
  CHECK(run_command({"/bin/sh", "-c", "wc -c"}, 10s).output == "0\n");
}

TEST_CASE("a command runs as the user it is given, with that user's groups only", "[process]") {
  if (geteuid() != 0) {
    WARN("not root: cannot run a command as another user");
    return;
  }
  ar::test::TempDir dir;
  const auto id = script(dir, "cat; id -u; id -g; id -G");
  CommandOptions options;
  options.user = RunAs{kNobody, kNobody};
  options.input = "{}";
  const auto as_nobody = run_command({id.string()}, 10s, options);
  CHECK(as_nobody.error.empty());
  CHECK(as_nobody.output == "{}65534\n65534\n65534\n");

  // A uid without a passwd entry: its gid alone.
  options.user = RunAs{47999, 47998};
  CHECK(run_command({id.string()}, 10s, options).output == "{}47999\n47998\n47998\n");
}

TEST_CASE("a command that cannot run as a user says why, naming it", "[process]") {
  CommandOptions options;
  options.user = RunAs{kNobody, kNobody};
  // A relative path would be looked up in PATH: refused.
  auto relative = run_command({"id"}, 10s, options);
  CHECK(relative.status == -1);
  CHECK_THAT(relative.error, Contains("'id'") && Contains("not an absolute path"));
  if (geteuid() != 0) return;
  auto missing = run_command({"/nonexistent/auto-resume-submit"}, 10s, options);
  CHECK(missing.status == -1);
  CHECK_THAT(missing.error, Contains("cannot run /nonexistent/auto-resume-submit as uid 65534") &&
                                Contains("exec: No such file or directory"));
  // A folder nobody cannot enter: exec, as nobody, is refused.
  ar::test::TempDir dir;
  const auto id = script(dir, "id -u");
  chmod(dir.path.c_str(), 0700);
  auto hidden = run_command({id.string()}, 10s, options);
  CHECK_THAT(hidden.error, Contains("exec: Permission denied"));
}

TEST_CASE("a command run as a user is killed at its timeout", "[process]") {
  if (geteuid() != 0) return;
  ar::test::TempDir dir;
  const auto sleeper = script(dir, "echo started; exec sleep 30");
  CommandOptions options;
  options.user = RunAs{kNobody, kNobody};
  const auto start = std::chrono::steady_clock::now();
  const auto result = run_command({sleeper.string()}, 500ms, options);
  CHECK(std::chrono::steady_clock::now() - start < 10s);
  CHECK(result.status == -1);
  CHECK_THAT(result.error, Contains("did not finish within"));
  CHECK(result.output == "started\n");
}

TEST_CASE("a command run as a user runs in a session of its own, with no terminal of ours",
          "[process][security]") {
  if (geteuid() != 0) return;
  ar::test::TempDir dir;
  // Not in our session, so not in any group of it either.
  const auto probe = script(dir,
                            "exec /usr/bin/python3 -c 'import os; "
                            "print(os.getsid(0) == os.getpid(), os.getsid(0) != " +
                                std::to_string(getsid(0)) + ")'");
  CommandOptions options;
  options.user = RunAs{kNobody, kNobody};
  const auto result = run_command({probe.string()}, 10s, options);
  CHECK(result.status == 0);
  CHECK(result.output == "True True\n");
}

TEST_CASE("a command run as a user cannot leave its process group, and is killed at its timeout",
          "[process]") {
  if (geteuid() != 0) return;
  ar::test::TempDir dir;
  // The user's program tries to join a group of our session (where a kill
  // of its own group would miss it), then to start a group of its own: as
  // the leader of a session of its own it can do neither.
  const auto mover = script(dir,
                            "exec /usr/bin/python3 -c 'import os, time\n"
                            "for group in (" +
                                std::to_string(getpgrp()) +
                                ", 0):\n"
                                "  try:\n    os.setpgid(0, group); print(\"moved\", flush=True)\n"
                                "  except PermissionError:\n    print(\"stays\", flush=True)\n"
                                "time.sleep(30)'");
  CommandOptions options;
  options.user = RunAs{kNobody, kNobody};
  const auto start = std::chrono::steady_clock::now();
  const auto result = run_command({mover.string()}, 1s, options);
  CHECK(std::chrono::steady_clock::now() - start < 10s);
  CHECK(result.output == "stays\nstays\n");
  CHECK_THAT(result.error, Contains("did not finish within"));
}
