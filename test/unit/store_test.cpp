#include "store.hpp"

#include <catch2/catch.hpp>
#include <filesystem>

namespace {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char pattern[] = "/tmp/ar-store-test.XXXXXX";
    path = mkdtemp(pattern);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

ar::proto::StepRegistration step(std::uint32_t job, const std::string& run, std::uint32_t attempt) {
  ar::proto::StepRegistration s;
  s.job_id = job;
  s.step_id = attempt;
  s.run_id = run;
  s.attempt = attempt;
  s.argv = {"srun", "--auto-resume=1", "a b"};
  s.cwd = "/w";
  s.nodelist = "node[1-2]";
  return s;
}

}  // namespace

TEST_CASE("a registered step survives reopening the store", "[store]") {
  TempDir dir;
  {
    ar::Store store(dir.path);
    CHECK(store.register_step(step(7, "7.0-a", 0), 1000) == ar::Store::Insert::created);
  }
  CHECK(std::filesystem::status(dir.path).permissions() == std::filesystem::perms::owner_all);
  ar::Store reopened(dir.path);
  const auto found = reopened.find("7.0-a", 0);
  REQUIRE(found);
  CHECK(found->uid == 1000);
  CHECK(found->state == "registered");
  CHECK(found->step.argv == std::vector<std::string>{"srun", "--auto-resume=1", "a b"});
  CHECK(found->step.nodelist == "node[1-2]");
  const auto events = reopened.events(std::nullopt, 0);
  REQUIRE(events.size() == 1);
  CHECK(events[0].kind == "registered");
  CHECK(events[0].job_id == 7);
}

TEST_CASE("registering the same run and attempt twice changes nothing", "[store]") {
  TempDir dir;
  ar::Store store(dir.path);
  CHECK(store.register_step(step(7, "r", 0), 1000) == ar::Store::Insert::created);
  CHECK(store.register_step(step(7, "r", 0), 1000) == ar::Store::Insert::duplicate);
  CHECK(store.register_step(step(7, "r", 1), 1000) == ar::Store::Insert::created);
  CHECK(store.steps(std::nullopt).size() == 2);
  CHECK(store.events(std::nullopt, 0).size() == 2);
  CHECK(store.run_owner("r") == 1000u);
  CHECK_FALSE(store.run_owner("other"));
}

TEST_CASE("steps and events are filtered by owner", "[store]") {
  TempDir dir;
  ar::Store store(dir.path);
  store.register_step(step(1, "a", 0), 1000);
  store.register_step(step(2, "b", 0), 2000);
  CHECK(store.steps(1000u).size() == 1);
  CHECK(store.steps(1000u)[0].step.job_id == 1);
  CHECK(store.steps(3000u).empty());
  CHECK(store.steps(std::nullopt).size() == 2);
  CHECK(store.events(2000u, 0).size() == 1);
  CHECK(store.events(std::nullopt, 4'000'000'000LL).empty());
}
