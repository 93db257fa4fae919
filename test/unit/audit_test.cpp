// Every action root takes is written down with who asked for it: an audit
// line in the controller's log (uid, op, run) and the uid on the event.

#include "engine_rig.hpp"
#include "keeper_rig.hpp"
#include "stderr_capture.hpp"

using ar::test::StderrCapture;

namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("a repair's every root action is audited for the uid and run it serves", "[audit]") {
  StderrCapture log;
  Rig rig;
  rig.protect();
  rig.slurm.nodes["node3"].down = true;
  rig.engine->tick();
  REQUIRE(rig.step().verdict == Verdict::relaunch);
  const auto text = log.text();
  for (const auto* kind :
       {"detected", "node_out", "replaced", "expand_helper", "merged", "expanded", "relaunch"})
    CHECK(has(text,
              fmt::format("auto-resumed audit: uid=1000 op=register run=r {}: job 10: ", kind)));
  CHECK(has(text, "node_out: job 10: node3 set FAIL and out of job 10"));
  for (const auto& e : rig.store->events(std::nullopt, 0)) CHECK(e.uid == 1000);
}

TEST_CASE("a requested replacement is audited and its events carry the requester's uid",
          "[audit]") {
  StderrCapture log;
  KeeperRig k;
  k.keeper.request_replace("node1", RepairMode::wait, 64030);
  REQUIRE(k.tick_until([&] { return k.state("node1") == "returning"; }));
  const auto text = log.text();
  CHECK(has(text, "audit: uid=64030 op=replace run=- replace_requested: node1 marked FAIL"));
  CHECK(has(text, "audit: uid=64030 op=replace run=- provider: node1: asking the local provider"));
  for (const auto& e : k.store.events(std::nullopt, 0)) {
    CHECK(e.node == "node1");
    CHECK(e.uid == 64030);
  }
  // A node's own mark: the controller acts for no user.
  k.slurm.nodes["node2"].fail = true;
  k.slurm.nodes["node2"].reason = "Action:Replace gpu: GPU 0 is not readable";
  k.tick();
  CHECK(has(log.text(), "audit: uid=0 op=mark run=- replace_requested: node2 is FAIL"));
}

TEST_CASE("log fields are bare words, or quoted with their quotes escaped", "[log]") {
  CHECK(ar::log::field("relaunch") == "relaunch");
  CHECK(ar::log::field("") == "-");
  CHECK(ar::log::field("12.0-ca7a2a4a") == "12.0-ca7a2a4a");
  CHECK(ar::log::field("node3 failed") == "\"node3 failed\"");
  CHECK(ar::log::field("a=\"b\\c\"") == "\"a=\\\"b\\\\c\\\"\"");
  CHECK(ar::log::field("x\ny") == "\"x\\\\x0ay\"");  // printable, then quoted
}
