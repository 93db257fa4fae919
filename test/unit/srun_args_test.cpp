#include "autoresume/srun_args.hpp"

#include <catch2/catch.hpp>
#include <utility>

using ar::parse_srun_argv;
using V = std::vector<std::string>;

namespace {

// The options as "name=value" ("name" without a value, "?" for one srun
// does not know), and the program's words.
std::pair<V, V> parsed(const V& argv) {
  const auto line = parse_srun_argv(argv);
  V options;
  for (const auto& option : line.options)
    options.push_back((option.name.empty() ? "?" : option.name) +
                      (option.value ? "=" + *option.value : ""));
  return {options, V(argv.begin() + static_cast<std::ptrdiff_t>(line.end), argv.end())};
}

V drop_nodelist(const V& argv) {
  return ar::without_srun_options(argv, parse_srun_argv(argv), [](const ar::SrunOption& option) {
    return option.name == "nodelist";
  });
}

}  // namespace

TEST_CASE("srun options stop at the program, whose arguments are never read", "[srun_args]") {
  const auto [options, rest] =
      parsed({"srun", "-N", "2", "-n8", "--label", "python", "train.py", "-w", "3", "-N", "2"});
  CHECK(options == V{"nodes=2", "ntasks=8", "label"});
  CHECK(rest == V{"python", "train.py", "-w", "3", "-N", "2"});
  CHECK(parsed({"srun"}).second.empty());
  CHECK(parsed({"srun", "-l"}).second.empty());
  CHECK(parsed({"srun", "-", "x"}).second == V{"-", "x"});  // "-" is a word, not an option
}

TEST_CASE("a value that looks like an option is the option's value", "[srun_args]") {
  CHECK(parsed({"srun", "-J", "-w", "prog"}) == std::pair{V{"job-name=-w"}, V{"prog"}});
  CHECK(parsed({"srun", "--job-name", "--nodes=3", "prog"}) ==
        std::pair{V{"job-name=--nodes=3"}, V{"prog"}});
  CHECK(parsed({"srun", "-o", "-", "prog"}) == std::pair{V{"output=-"}, V{"prog"}});
  CHECK(parsed({"srun", "-J", "", "prog"}) == std::pair{V{"job-name="}, V{"prog"}});
  // A required value missing at the end: srun would have refused it.
  CHECK(parsed({"srun", "-w"}) == std::pair{V{"nodelist"}, V{}});
}

TEST_CASE("a word -- ends srun's options", "[srun_args]") {
  CHECK(parsed({"srun", "-N2", "--", "-w", "n1", "prog"}) ==
        std::pair{V{"nodes=2"}, V{"--", "-w", "n1", "prog"}});
}

TEST_CASE("optional values are only ever attached", "[srun_args]") {
  CHECK(parsed({"srun", "-K", "prog"}) == std::pair{V{"kill-on-bad-exit"}, V{"prog"}});
  CHECK(parsed({"srun", "-K1", "prog"}) == std::pair{V{"kill-on-bad-exit=1"}, V{"prog"}});
  CHECK(parsed({"srun", "--overlap", "prog"}) == std::pair{V{"overlap"}, V{"prog"}});
  CHECK(parsed({"srun", "--exclusive=user", "prog"}) == std::pair{V{"exclusive=user"}, V{"prog"}});
  CHECK(parsed({"srun", "-Kw", "n1", "prog"}) ==
        std::pair{V{"kill-on-bad-exit=w"}, V{"n1", "prog"}});
}

TEST_CASE("short options share a word up to the first that takes a value", "[srun_args]") {
  CHECK(parsed({"srun", "-lw", "n[1-2]", "prog"}) ==
        std::pair{V{"label", "nodelist=n[1-2]"}, V{"prog"}});
  CHECK(parsed({"srun", "-luN4", "prog"}) ==
        std::pair{V{"label", "unbuffered", "nodes=4"}, V{"prog"}});
  CHECK(parsed({"srun", "-vvv", "prog"}) ==
        std::pair{V{"verbose", "verbose", "verbose"}, V{"prog"}});
}

TEST_CASE("long names match as getopt_long matches them", "[srun_args]") {
  CHECK(parsed({"srun", "--nodel", "n1", "prog"}) == std::pair{V{"nodelist=n1"}, V{"prog"}});
  CHECK(parsed({"srun", "--nodes", "3", "prog"}) == std::pair{V{"nodes=3"}, V{"prog"}});
  CHECK(parsed({"srun", "--tasks-per", "2", "prog"}) ==
        std::pair{V{"tasks-per-node=2"}, V{"prog"}});
  CHECK(parsed({"srun", "--cpu_bind", "none", "prog"}) == std::pair{V{"cpu_bind=none"}, V{"prog"}});
  CHECK(parsed({"srun", "--auto-resume", "1", "prog"}) == std::pair{V{"auto-resume=1"}, V{"prog"}});
  // Ambiguous ("--node": nodefile, nodelist, nodes) or another SPANK
  // plugin's: unknown, read without a value unless it holds one.
  CHECK(parsed({"srun", "--node", "3", "prog"}) == std::pair{V{"?"}, V{"3", "prog"}});
  CHECK(parsed({"srun", "--container-image=img", "-w", "n1", "prog"}) ==
        std::pair{V{"?=img", "nodelist=n1"}, V{"prog"}});
  CHECK(parsed({"srun", "--container-image", "img", "-w", "n1"}) ==
        std::pair{V{"?"}, V{"img", "-w", "n1"}});
}

TEST_CASE("dropping an option keeps every other word as it was", "[srun_args]") {
  for (const auto& form : {V{"-w", "n[1-2]"}, V{"-wn[1-2]"}, V{"--nodelist", "n[1-2]"},
                           V{"--nodelist=n[1-2]"}, V{"--nodel=n[1-2]"}}) {
    V argv{"srun", "-N", "2"};
    argv.insert(argv.end(), form.begin(), form.end());
    argv.insert(argv.end(), {"--label", "prog", "-w", "n3"});
    CAPTURE(argv);
    CHECK(drop_nodelist(argv) == V{"srun", "-N", "2", "--label", "prog", "-w", "n3"});
  }
  // The other options of a shared word stay, each in its own word.
  CHECK(drop_nodelist({"srun", "-luw", "n1", "prog"}) == V{"srun", "-l", "-u", "prog"});
  CHECK(drop_nodelist({"srun", "-lun2", "prog"}) == V{"srun", "-lun2", "prog"});
  CHECK(drop_nodelist({"srun", "-J", "-w", "--", "-w", "x"}) ==
        V{"srun", "-J", "-w", "--", "-w", "x"});
  CHECK(drop_nodelist({}).empty());
}

TEST_CASE("an option left alone by a dropped one keeps its value", "[srun_args]") {
  const auto drop_label = [](const V& argv) {
    return ar::without_srun_options(argv, parse_srun_argv(argv), [](const ar::SrunOption& option) {
      return option.name == "label";
    });
  };
  CHECK(drop_label({"srun", "-lN2", "prog"}) == V{"srun", "-N2", "prog"});
  CHECK(drop_label({"srun", "-lN", "2", "prog"}) == V{"srun", "-N2", "prog"});
  CHECK(drop_label({"srun", "-lJ", "", "prog"}) == V{"srun", "-J", "", "prog"});
  CHECK(drop_label({"srun", "-lK", "prog"}) == V{"srun", "-K", "prog"});
}
