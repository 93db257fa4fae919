#include "provision/groups.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "autoresume/keyvalue.hpp"
#include "fakes.hpp"

using Catch::Matchers::Contains;

namespace {

ar::GroupSpec parse(const std::string& text) { return ar::parse_group("gpu", text, "gpu.conf"); }

void write(const ar::test::TempDir& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir.path / name) << text;
}

}  // namespace

TEST_CASE("a group file parses every key", "[groups]") {
  const auto group = parse(
      "# the training pool\n"
      "type = compute\n"
      "COUNT=16\n"
      "min_count=12   # hold until 12 are ready\n"
      "max_count=40\n"
      "partitions=train, debug\n"
      "node_conf=cpus=96 RealMemory=1000000  gres=gpu:h100:8 Features=h100,nvlink\n"
      "lifecycle_script=/etc/auto-resume/on_create.sh\n"
      "node_prefix=p5-\n");
  CHECK(group.name == "gpu");
  CHECK(group.type == ar::GroupType::compute);
  CHECK(group.count == 16);
  CHECK(group.min_count == 12);
  CHECK(group.max_count == 40);
  CHECK(group.partitions == std::vector<std::string>{"train", "debug"});
  CHECK(group.node_conf == "CPUs=96 RealMemory=1000000 Gres=gpu:h100:8 Features=h100,nvlink");
  CHECK(group.lifecycle_script == "/etc/auto-resume/on_create.sh");
  CHECK(group.node(7) == "p5-7");
}

TEST_CASE("a group file's defaults: compute, max_count twice count (at least 4), NAME- nodes",
          "[groups]") {
  const auto group = parse("count=3\npartitions=p\n");
  CHECK(group.type == ar::GroupType::compute);
  CHECK(group.min_count == 0);
  CHECK(group.max_count == 6);
  CHECK(group.node(1) == "gpu-1");
  CHECK(parse("count=1\npartitions=p\n").max_count == 4);
  CHECK(parse("count=0\npartitions=p\n").max_count == 4);
  CHECK(parse("count=9000\npartitions=p\n").max_count == ar::GroupSpec::kMaxCount);
  const auto login = ar::parse_group("login", "type=service\ncount=1\n", "login.conf");
  CHECK(login.type == ar::GroupType::service);
  CHECK(login.partitions.empty());
}

TEST_CASE("group file errors name the file, the line and the value", "[groups]") {
  CHECK_THROWS_WITH(parse("count=2\npartitions=p\nsize=3\n"),
                    Contains("gpu.conf:3:") && Contains("unknown key 'size'"));
  CHECK_THROWS_WITH(parse("count=many\n"), Contains("gpu.conf:1:") && Contains("'many'"));
  CHECK_THROWS_WITH(parse("count=10001\n"), Contains("gpu.conf:1:") && Contains("'10001'"));
  CHECK_THROWS_WITH(parse("count=1\ntype=login\n"), Contains("gpu.conf:2:") && Contains("'login'"));
  CHECK_THROWS_WITH(parse("count=1\npartitions=p\nnode_conf=CPUs=2 NodeAddr=10.0.0.1\n"),
                    Contains("gpu.conf:3:") && Contains("'NodeAddr=10.0.0.1'") &&
                        Contains("writes NodeAddr itself"));
  CHECK_THROWS_WITH(parse("count=1\nnode_conf=Cpus=2 Colour=red\n"),
                    Contains("gpu.conf:2:") && Contains("'Colour=red'") && Contains("RealMemory"));
  CHECK_THROWS_WITH(parse("count=1\nnode_conf=Features=\"a b\"\n"),
                    Contains("gpu.conf:2:") && Contains("'Features=\"a'"));
  CHECK_THROWS_WITH(parse("count=1\nnode_conf=CPUs=2 cpus=4\n"),
                    Contains("'cpus=4'") && Contains("twice"));
  CHECK_THROWS_WITH(parse("count=1\npartitions=a,,b\n"), Contains("gpu.conf:2:") && Contains("''"));
  CHECK_THROWS_WITH(parse("count=1\npartitions=a,a\n"), Contains("'a'") && Contains("twice"));
  CHECK_THROWS_WITH(parse("count=1\npartitions=p\nlifecycle_script=on_create.sh\n"),
                    Contains("gpu.conf:3:") && Contains("'on_create.sh'"));
  CHECK_THROWS_WITH(parse("count=1\npartitions=p\nnode_prefix=1abc\n"),
                    Contains("gpu.conf:3:") && Contains("'1abc'"));
  CHECK_THROWS_WITH(parse("count=1\ncount=2\n"), Contains("gpu.conf:2:") && Contains("twice"));
}

TEST_CASE("group files are checked across keys", "[groups]") {
  CHECK_THROWS_WITH(parse("partitions=p\n"), Contains("gpu.conf:") && Contains("count is not set"));
  CHECK_THROWS_WITH(parse("count=2\nmin_count=3\npartitions=p\n"),
                    Contains("gpu.conf:") && Contains("min_count 3 is more than count 2"));
  CHECK_THROWS_WITH(parse("count=5\nmax_count=4\npartitions=p\n"),
                    Contains("count 5 is more than max_count 4") && Contains("restart"));
  CHECK_THROWS_WITH(parse("count=1\n"), Contains("partitions is not set"));
  CHECK_THROWS_WITH(ar::parse_group("login", "type=service\ncount=1\npartitions=p\n", "login.conf"),
                    Contains("login.conf:") && Contains("service group runs no slurmd"));
  CHECK_THROWS_WITH(ar::parse_group("a b", "count=1\n", "a b.conf"),
                    Contains("a b.conf:") && Contains("'a b'"));
}

TEST_CASE("load_each_group reads every NAME.conf in name order and holds clashing groups",
          "[groups]") {
  const ar::test::TempDir dir;
  write(dir, "zeta.conf", "count=1\npartitions=p\n");
  write(dir, "alpha.conf", "count=2\npartitions=p\n");
  write(dir, "README", "not a group\n");
  write(dir, "alpha.conf.orig", "count=x\n");
  const auto loaded = ar::load_each_group(dir.path);
  CHECK(loaded.errors.empty());
  REQUIRE(loaded.specs.size() == 2);
  CHECK(loaded.specs[0].name == "alpha");
  CHECK(loaded.specs[1].name == "zeta");
  // The groups that read well, by name.
  const auto names = [&](const ar::LoadedGroups& l) {
    std::vector<std::string> out;
    for (const auto& spec : l.specs) out.push_back(spec.name);
    return out;
  };

  SECTION("two groups that would name the same node") {
    write(dir, "n.conf", "count=5\nmax_count=11\nnode_prefix=n\npartitions=p\n");
    write(dir, "m.conf", "count=1\nnode_prefix=n1\npartitions=p\n");
    const auto clash = ar::load_each_group(dir.path);
    CHECK(names(clash) == std::vector<std::string>{"alpha", "zeta"});
    REQUIRE(clash.errors.size() == 2);
    for (const auto& [name, why] : clash.errors) {
      INFO(name);
      CHECK_THAT(why, Contains("node 'n11'") && Contains("'m'") && Contains("node_prefix"));
    }
  }
  SECTION("a partition named like a group") {
    write(dir, "beta.conf", "count=1\npartitions=alpha\n");
    const auto clash = ar::load_each_group(dir.path);
    CHECK(names(clash) == std::vector<std::string>{"zeta"});
    REQUIRE(clash.errors.size() == 2);
    CHECK_THAT(clash.errors.at("beta"), Contains("partition 'alpha'") && Contains("'beta'"));
    CHECK(clash.errors.at("alpha") == clash.errors.at("beta"));
  }
  SECTION("a bad file names itself") {
    write(dir, "bad.conf", "count=1\npartitions=p\nmax_count=0\n");
    const auto bad = ar::load_each_group(dir.path);
    CHECK(names(bad) == std::vector<std::string>{"alpha", "zeta"});
    REQUIRE(bad.errors.size() == 1);
    CHECK_THAT(bad.errors.at("bad"), Contains("bad.conf:3:") && Contains("'0'"));
  }
  CHECK_THROWS_WITH(ar::load_each_group(dir.path / "missing"),
                    Contains("groups_dir") && Contains("missing"));
}

TEST_CASE("set_group_keys rewrites values in place and appends missing keys", "[groups]") {
  const std::string text =
      "# pool\n"
      "Count = 4   # four for now\n"
      "partitions=p\n";
  const auto out = ar::set_group_keys(text, {{"count", "8"}, {"min_count", "6"}});
  CHECK(out ==
        "# pool\n"
        "Count=8  # four for now\n"
        "partitions=p\n"
        "min_count=6\n");
  const auto group = ar::parse_group("g", out, "g.conf");
  CHECK(group.count == 8);
  CHECK(group.min_count == 6);
}

TEST_CASE("docs/provisioning.md's table of a group file's keys has every key and no other",
          "[groups]") {
  // The keys the parser knows, from its unknown-key error.
  std::set<std::string> known;
  try {
    parse("count=1\npartitions=p\nno_such_key=1\n");
    FAIL("no_such_key was taken");
  } catch (const ar::ConfigError& e) {
    const std::string what = e.what();
    const auto list = what.substr(what.find("(known: ") + 8);
    std::istringstream names(list.substr(0, list.find(')')));
    for (std::string name; std::getline(names, name, ',');)
      known.insert(name.substr(name.find_first_not_of(' ')));
  }
  // The rows of the table that starts "| key | default | meaning |".
  std::ifstream in(std::string(AR_DOCS) + "/provisioning.md");
  REQUIRE(in);
  std::set<std::string> documented;
  bool in_table = false;
  for (std::string line; std::getline(in, line);) {
    if (line == "| key | default | meaning |") {
      in_table = true;
    } else if (in_table && line.starts_with("| `")) {
      documented.insert(line.substr(3, line.find('`', 3) - 3));
    } else if (in_table && !line.starts_with("| ---")) {
      break;
    }
  }
  CHECK(known.size() == 9);
  CHECK(documented == known);
}
