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
