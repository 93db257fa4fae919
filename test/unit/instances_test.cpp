#include "provision/instances.hpp"

#include <catch2/catch.hpp>

using Catch::Matchers::Contains;

TEST_CASE("a create's output gives instance_id, node_addr and node_hostname among free text",
          "[instances]") {
  const auto out = ar::parse_create_output(
      "launching i-0abc in us-east-1a\n"
      "instance_id=i-0abc123\n"
      "  node_addr=10.1.2.3  \n"
      "node_hostname=ip-10-1-2-3.ec2.internal\n"
      "note: key=value text that is not ours stays free text\n");
  CHECK(out.instance_id == "i-0abc123");
  CHECK(out.node_addr == "10.1.2.3");
  CHECK(out.node_hostname == "ip-10-1-2-3.ec2.internal");
  CHECK(ar::parse_create_output("fd00::7 is it\nnode_addr=fd00::7\n").node_addr == "fd00::7");
  CHECK(ar::parse_create_output("").instance_id.empty());
}

TEST_CASE("a create's bad output values are named", "[instances]") {
  CHECK_THROWS_WITH(ar::parse_create_output("node_addr=10.0.0.1; rm -rf /\n"),
                    Contains("bad node_addr '10.0.0.1; rm -rf /'"));
  CHECK_THROWS_WITH(ar::parse_create_output("instance_id=\n"), Contains("bad instance_id ''"));
  CHECK_THROWS_WITH(ar::parse_create_output("instance_id=" + std::string(129, 'a') + "\n"),
                    Contains("bad instance_id"));
  CHECK_THROWS_WITH(ar::parse_create_output("instance_id=a\ninstance_id=b\n"),
                    Contains("instance_id twice"));
  CHECK_THROWS_WITH(ar::parse_create_output("node_hostname=a\x1b[2Jb\n"), Contains("a\\x1b[2Jb"));
}

TEST_CASE("a list's output: one instance per line, all or nothing", "[instances]") {
  const auto listed = ar::parse_list_output(
      "token=gpu:gpu-1:1 instance_id=i-1 node=gpu-1\n"
      "\n"
      "instance_id=i-2   token=gpu:gpu-2:3\n");
  CHECK(listed == std::vector<ar::ListedInstance>{{"gpu:gpu-1:1", "i-1"}, {"gpu:gpu-2:3", "i-2"}});
  CHECK(ar::parse_list_output("").empty());
  CHECK_THROWS_WITH(ar::parse_list_output("token=g:n:1 instance_id=i-1\nWARNING: throttled\n"),
                    Contains("'WARNING: throttled'"));
  CHECK_THROWS_WITH(ar::parse_list_output("token=g:n:1\n"), Contains("token=T instance_id=I"));
}

TEST_CASE("tokens split into group, node and attempt", "[instances]") {
  const auto parts = ar::split_token("gpu-a:gpu-a-12:3");
  REQUIRE(parts);
  CHECK(parts->group == "gpu-a");
  CHECK(parts->node == "gpu-a-12");
  CHECK(parts->attempt == 3);
  for (const auto* bad : {"", "a", "a:b", "a:b:", "a:b:x", ":b:1", "a::1", "a:b:1x"}) {
    INFO(bad);
    CHECK_FALSE(ar::split_token(bad));
  }
}

TEST_CASE("billable time runs from started to terminated, within the window", "[instances]") {
  struct Row {
    std::int64_t started, terminated, since, now, seconds;
  };
  const std::vector<Row> table = {
      {100, 400, 0, 1000, 300},    // whole life in the window
      {100, 0, 0, 1000, 900},      // still running: up to now
      {100, 400, 200, 1000, 200},  // the window starts mid-life
      {100, 400, 500, 1000, 0},    // ended before the window
      {0, 400, 0, 1000, 0},        // never started (a failed create): nothing
      {100, 0, 0, 50, 0},          // now before it started
  };
  for (const auto& row : table) {
    ar::InstanceRecord record;
    record.started = row.started;
    record.terminated = row.terminated;
    INFO(row.started << " " << row.terminated << " " << row.since << " " << row.now);
    CHECK(ar::billable_seconds(record, row.since, row.now) == row.seconds);
  }
}

TEST_CASE("usage sums instance-hours per group", "[instances]") {
  std::vector<ar::InstanceRecord> records(4);
  records[0].group = "b";
  records[0].started = 0;  // never started
  records[1].group = "a";
  records[1].started = 3600;
  records[1].terminated = 3 * 3600;
  records[2].group = "a";
  records[2].started = 3600;
  records[3].group = "b";
  records[3].started = 7200;
  records[3].terminated = 9000;
  const auto rows = ar::usage(records, 0, 4 * 3600);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].group == "a");
  CHECK(rows[0].instances == 2);
  CHECK(rows[0].instance_hours == Approx(5.0));
  CHECK(rows[1].group == "b");
  CHECK(rows[1].instances == 1);
  CHECK(rows[1].instance_hours == Approx(0.5));
}
