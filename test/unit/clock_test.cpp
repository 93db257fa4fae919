// Stored moments (Stamp): durations by boot time within a boot, by wall
// time across boots; the machine's clocks; the fake clock's wall steps.

#include "clock.hpp"

#include <catch2/catch.hpp>
#include <chrono>

#include "fakes.hpp"
#include "resume/detail.hpp"  // waited_since

using namespace std::chrono_literals;

TEST_CASE("elapsed counts boot time within one boot, wall time across boots", "[clock]") {
  const ar::Stamp from{1000, 50'000, "boot-a"};
  // The wall clock was set back an hour meanwhile: 90 s passed all the same.
  CHECK(ar::elapsed(from, {1000 - 3600 + 90, 140'000, "boot-a"}) == 90s);
  CHECK(ar::elapsed(from, {1000 + 3600 + 90, 140'000, "boot-a"}) == 90s);
  // Another boot: only the wall time says anything.
  CHECK(ar::elapsed(from, {1600, 2'000, "boot-b"}) == 600s);
  // A moment stored without its boot (an old record): wall time.
  CHECK(ar::elapsed({1000, 0, ""}, {1030, 140'000, "boot-a"}) == 30s);
  CHECK(ar::elapsed({1000, 0, ""}, {1000, 0, ""}) == 0s);
  // Backwards: negative (a deadline not due yet).
  CHECK(ar::elapsed({1000, 90'000, "boot-a"}, from) == -40s);
}

TEST_CASE("a stamp plus a duration is a deadline in both clocks, the wall time rounded up",
          "[clock]") {
  const ar::Stamp from{1000, 50'000, "boot-a"};
  CHECK(from.plus(1500ms) == ar::Stamp{1002, 51'500, "boot-a"});
  CHECK(from.plus(10s) == ar::Stamp{1010, 60'000, "boot-a"});
  CHECK(ar::elapsed(from, from.plus(10s)) == 10s);
}

TEST_CASE("the machine's clock has a boot id and a boot time that only grows", "[clock]") {
  const auto& clock = ar::system_clock();
  const auto id = clock.boot_id();
  CHECK(id.size() == 36);  // a UUID, as /proc/sys/kernel/random/boot_id has it
  CHECK(clock.boot_id() == id);
  const auto first = clock.stamp();
  CHECK(first.boot_ms > 0);
  CHECK(clock.since(first) >= 0ms);
  CHECK(clock.since(first) < 60s);
}

TEST_CASE("the fake clock steps its wall time alone, and reboots", "[clock]") {
  ar::test::ManualClock clock;
  const auto start = clock.stamp();
  clock.advance(10s);
  clock.step_wall(-1h);
  CHECK(clock.unix_now() == start.wall + 10 - 3600);
  CHECK(clock.since(start) == 10s);
  clock.reboot(5min);
  CHECK(clock.boot_id() != start.boot_id);
  CHECK(clock.since(start) == 10s - 1h + 5min);
}

TEST_CASE("waited_since stores its start once and survives wall clock steps", "[clock]") {
  ar::test::ManualClock clock;
  ar::RepairFacts facts;
  CHECK(ar::resume_detail::waited_since(facts.helper_since["node5"], true, clock) == 0ms);
  CHECK(ar::to_json(facts).contains("helper_since_node5_at"));
  clock.advance(20s);
  clock.step_wall(1h);
  CHECK(ar::resume_detail::waited_since(facts.helper_since["node5"], false, clock) == 20s);
  // As read back from the store: the same.
  auto stored = ar::repair_facts_from_json(ar::proto::json::parse(ar::to_json(facts).dump()));
  clock.advance(15s);
  CHECK(ar::resume_detail::waited_since(stored.helper_since.at("node5"), false, clock) == 35s);
}
