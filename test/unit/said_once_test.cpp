// SaidOnce: the controller's say-once bookkeeping.

#include "said_once.hpp"

#include <catch2/catch.hpp>
#include <string>

TEST_CASE("said once: a key's text is said the first time and when it changes", "[said]") {
  ar::SaidOnce said;
  CHECK(said.say("heartbeats", "slurmctld away"));
  CHECK_FALSE(said.say("heartbeats", "slurmctld away"));
  CHECK(said.say("heartbeats", "timed out"));
  CHECK(said.say("provider"));  // a key alone: said once
  CHECK_FALSE(said.say("provider"));
  CHECK(said.said("provider"));
  CHECK(said.size() == 2);
}

TEST_CASE("said once: a forgotten key is said again", "[said]") {
  ar::SaidOnce said;
  CHECK_FALSE(said.forget("node1"));  // nothing said
  REQUIRE(said.say("node1", "late"));
  CHECK(said.forget("node1"));
  CHECK_FALSE(said.said("node1"));
  CHECK(said.say("node1", "late"));
  REQUIRE(said.say("step a#0"));
  REQUIRE(said.say("step b#0"));
  said.forget_if([](const std::string& key) { return key.starts_with("step a"); });
  CHECK(said.say("step a#0"));
  CHECK_FALSE(said.say("step b#0"));
}

TEST_CASE("said once: past its bound every key is forgotten", "[said]") {
  ar::SaidOnce said(3);
  for (const auto* key : {"a", "b", "c"}) REQUIRE(said.say(key));
  CHECK_FALSE(said.say("a"));
  CHECK(said.say("d"));  // the fourth key: the three before are forgotten
  CHECK(said.size() == 1);
  CHECK(said.say("a"));
}
