#include "autoresume/task_env.hpp"

#include <catch2/catch.hpp>

TEST_CASE("the default master port depends on job and attempt and stays in range", "[task_env]") {
  CHECK(ar::default_master_port(0, 0) == 29500);
  CHECK(ar::default_master_port(12, 0) == 29596);
  CHECK(ar::default_master_port(12, 1) == 29597);
  CHECK(ar::default_master_port(12, 8) == ar::default_master_port(12, 0));
  CHECK(ar::default_master_port(1012, 3) == ar::default_master_port(12, 3));
  CHECK(ar::default_master_port(999, 7) == 37499);
  CHECK(ar::default_master_port(4294967295U, 4294967295U) <= 37499);
}

TEST_CASE("comma_list joins hosts for NODE_LIST", "[task_env]") {
  CHECK(ar::comma_list({}).empty());
  CHECK(ar::comma_list({"node1"}) == "node1");
  CHECK(ar::comma_list({"node1", "node2", "node10"}) == "node1,node2,node10");
}

TEST_CASE("a task of a step that asked for auto-resume starts only as plugstack.conf allows",
          "[task_env]") {
  using ar::task_refusal;
  // Not asked: whatever else holds.
  CHECK_FALSE(task_refusal(false, true, "bad line", nullptr));
  // Asked, registered (srun set the marker to the run id), or required=0:
  // it starts.
  CHECK_FALSE(task_refusal(true, true, "", "12.0-0a1b2c3d"));
  CHECK_FALSE(task_refusal(true, false, "", nullptr));
  CHECK_FALSE(task_refusal(true, false, "", "1"));
  // Asked, required=1, not registered: refused, saying why.
  const auto unregistered = task_refusal(true, true, "", nullptr);
  REQUIRE(unregistered);
  CHECK_THAT(*unregistered, Catch::Matchers::Contains("required=1") &&
                                Catch::Matchers::Contains("did not register"));
  CHECK(task_refusal(true, true, "", ""));
  // Asked under a bad plugstack line: refused, naming the error.
  const auto bad = task_refusal(true, false, "unknown plugstack.conf argument 'socket'", "1");
  REQUIRE(bad);
  CHECK_THAT(*bad, Catch::Matchers::Contains("'socket'"));
}
