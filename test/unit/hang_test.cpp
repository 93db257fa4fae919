// Hung steps: the progress files' format and their reading on the node,
// the wire, the rule that calls a step hung, and the engine's repair of one.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "autoresume/keyvalue.hpp"
#include "autoresume/progress.hpp"
#include "autoresume/progress_files.hpp"
#include "autoresume/protocol.hpp"
#include "engine_rig.hpp"
#include "resume/progress.hpp"
#include "server/service.hpp"

using ar::Beat;
using ar::parse_beat;
using Steady = std::chrono::steady_clock;

TEST_CASE("a progress file's content: a step, a section, or anything (a beat alone)", "[hang]") {
  CHECK(parse_beat("") == Beat{});
  CHECK(parse_beat("  \n") == Beat{});
  CHECK(parse_beat("42\n") == Beat{42, "", 0});
  CHECK(parse_beat("42 checkpoint:600") == Beat{42, "checkpoint", 600});
  CHECK(parse_beat("save.v2:30") == Beat{std::nullopt, "save.v2", 30});
  CHECK(parse_beat("9223372036854775807") == Beat{9223372036854775807ULL, "", 0});
  // Not one of the forms: a beat with nothing said.
  for (const char* bad : {"-1", "1.5", "9223372036854775808", "007", "x", "42 ckpt", "42 ckpt:0",
                          "42 ckpt:604801", "42 a/b:5", "1 2", "42 ckpt:5 more", ":5"})
    CHECK_FALSE(parse_beat(bad));
  CHECK_FALSE(parse_beat(std::string(200, '1')));
  CHECK_FALSE(parse_beat("1 " + std::string(33, 'a') + ":5"));
}

TEST_CASE("progress folder names: JOB.STEP and a rank's id, nothing else", "[hang]") {
  CHECK(ar::progress_step_dir("/dev/shm/ar", "node1", 12, 3) == "/dev/shm/ar/node1/12.3");
  CHECK(ar::parse_progress_step_name("12.3") == std::pair<std::uint32_t, std::uint32_t>{12, 3});
  for (const char* bad : {"12", "12.", ".3", "12.3.4", "a.3", "12.-3", "99999999999.1", "12.3.tmp"})
    CHECK_FALSE(ar::parse_progress_step_name(bad));
  CHECK(ar::parse_rank_name("0") == 0U);
  CHECK(ar::parse_rank_name("17") == 17U);
  for (const char* bad : {"", "-1", "1.tmp", "17.4242.tmp", "x", "01"})
    CHECK_FALSE(ar::parse_rank_name(bad));
}

TEST_CASE(
    "the hang options (srun --auto-resume-hang-timeout, --auto-resume-hang-signal) name a bad "
    "value",
    "[hang]") {
  CHECK(ar::parse_hang_timeout("auto").automatic);
  CHECK(ar::parse_hang_timeout("600").seconds == 600);
  CHECK_FALSE(ar::parse_hang_timeout("0").on());
  auto fails = [](auto parse, const char* value, const std::string& text) {
    try {
      parse(value);
      FAIL("accepted " << (value ? value : "nothing"));
    } catch (const ar::ConfigError& e) {
      CHECK(std::string(e.what()).find(text) != std::string::npos);
    }
  };
  fails(ar::parse_hang_timeout, "10m",
        "invalid --auto-resume-hang-timeout value '10m': expected seconds from 0 (off) to 604800, "
        "or auto");
  fails(ar::parse_hang_timeout, "604801", "'604801'");
  fails(ar::parse_hang_timeout, nullptr, "requires a value");
  CHECK(ar::parse_hang_signal("USR1") == 10);
  CHECK(ar::parse_hang_signal("SIGUSR2") == 12);
  CHECK(ar::parse_hang_signal("3") == 3);
  CHECK(ar::signal_text(10) == "USR1");
  CHECK(ar::signal_text(40) == "40");
  fails(ar::parse_hang_signal, "KILLME",
        "invalid --auto-resume-hang-signal value 'KILLME': expected a signal name");
  fails(ar::parse_hang_signal, "65", "'65'");
  fails(ar::parse_hang_signal, "0", "'0'");
}

TEST_CASE("the hang options and a heartbeat's progress on the wire, and bad ones refused",
          "[hang]") {
  using ar::proto::json;
  ar::proto::StepRegistration step;
  step.job_id = 1;
  step.run_id = "r";
  step.argv = {"srun"};
  step.hang_timeout = {0, true};
  step.hang_signal = 10;
  auto wire = step.to_json();
  CHECK(wire["hang_timeout"] == "auto");
  CHECK(wire["hang_signal"] == 10);
  auto back = ar::proto::StepRegistration::from_json(wire);
  CHECK(back.hang_timeout.automatic);
  CHECK(back.hang_signal == 10);
  wire["hang_timeout"] = 90;
  CHECK(ar::proto::StepRegistration::from_json(wire).hang_timeout.seconds == 90);
  for (const json& bad : {json("never"), json(-1), json(604801)}) {
    wire["hang_timeout"] = bad;
    CHECK_THROWS_AS(ar::proto::StepRegistration::from_json(wire), ar::proto::ProtocolError);
  }
  wire["hang_timeout"] = 5;
  wire["hang_signal"] = 65;
  CHECK_THROWS_AS(ar::proto::StepRegistration::from_json(wire), ar::proto::ProtocolError);

  ar::proto::HeartbeatRequest beat{"node1", false, {}};
  beat.progress = {{7, 1, {{0, 1500, {12, "", 0}}, {1, 20, {std::nullopt, "ckpt", 60}}}}};
  CHECK(beat.to_json().dump() ==
        R"({"node":"node1","progress":[{"job_id":7,"ranks":[{"age_ms":1500,"rank":0,"step":12},)"
        R"({"age_ms":20,"rank":1,"section":"ckpt","section_s":60}],"step_id":1}]})");
  CHECK(ar::proto::HeartbeatRequest::from_json(beat.to_json()).progress == beat.progress);
  auto refused = [](const std::string& text, const std::string& why) {
    try {
      ar::proto::HeartbeatRequest::from_json(json::parse(text));
      FAIL("accepted " << text);
    } catch (const ar::proto::ProtocolError& e) {
      CHECK(std::string(e.what()).find(why) != std::string::npos);
    }
  };
  refused(R"({"node":"n","progress":{}})", "'progress' must be an array");
  refused(R"({"node":"n","progress":[{"job_id":1,"step_id":1}]})", "has no 'ranks' array");
  refused(R"({"node":"n","progress":[{"job_id":1,"step_id":1,"ranks":[{"rank":0,"age_ms":1,)"
          R"("section":"a b","section_s":5}]}]})",
          "section 'a b' of 5 s is not a section");
  refused(R"({"node":"n","progress":[{"job_id":1,"step_id":1,"ranks":[{"rank":0,"age_ms":1,)"
          R"("step":-4}]}]})",
          "'step' must be 0 to 2^63-1");
  json many = {{"node", "n"}, {"progress", json::array()}};
  for (int i = 0; i < 65; ++i)
    many["progress"].push_back({{"job_id", i}, {"step_id", 0}, {"ranks", json::array()}});
  refused(many.dump(), "'progress' has 65 steps, more than 64");
  json ranks = {{"node", "n"}, {"progress", json::array()}};
  json list = json::array();
  for (int i = 0; i < 1025; ++i) list.push_back({{"rank", i}, {"age_ms", 0}});
  ranks["progress"].push_back({{"job_id", 1}, {"step_id", 0}, {"ranks", list}});
  refused(ranks.dump(), "more than 1024 ranks");
}

TEST_CASE("the agent reads plain files of digit names only, never through a link", "[hang]") {
  ar::test::TempDir dir;
  const auto steps = dir.path / "node1";
  std::filesystem::create_directories(steps / "12.0");
  std::filesystem::create_directories(steps / "12.1");
  std::filesystem::create_directories(steps / "notastep");
  const auto now = std::chrono::system_clock::now();
  auto write = [](const std::filesystem::path& path, const std::string& text) {
    std::ofstream(path) << text;
  };
  write(steps / "12.0" / "0", "41\n");
  write(steps / "12.0" / "1", "40 checkpoint:300");
  write(steps / "12.0" / "2", "garbage");
  write(steps / "12.0" / "3.tmp", "99");
  write(steps / "12.0" / "4", std::string(4096, '7'));  // too long to be a step: a beat alone
  write(dir.path / "secret", "1234");
  std::filesystem::create_symlink(dir.path / "secret", steps / "12.0" / "5");
  REQUIRE(mkfifo((steps / "12.0" / "6").c_str(), 0600) == 0);  // never blocks the agent
  std::filesystem::create_symlink(steps / "12.0", steps / "12.2");
  const auto scan = ar::scan_progress(dir.path.string(), "node1", now + std::chrono::seconds{5});
  CHECK_FALSE(scan.truncated);
  REQUIRE(scan.steps.size() == 1);  // 12.1 holds no file; 12.2 is a link
  const auto& ranks = scan.steps[0].ranks;
  REQUIRE(ranks.size() == 4);
  CHECK(ranks[0].rank == 0);
  CHECK(ranks[0].beat == Beat{41, "", 0});
  CHECK(ranks[0].age_ms >= 4000);
  CHECK(ranks[0].age_ms <= 6000);
  CHECK(ranks[1].beat == Beat{40, "checkpoint", 300});
  CHECK(ranks[2].beat == Beat{});
  CHECK(ranks[3].rank == 4);
  CHECK(ranks[3].beat == Beat{});
  CHECK(ar::scan_progress((dir.path / "none").string(), "node1", now).steps.empty());
}

namespace {

using ar::HangRule;
using ar::ProgressReports;

// Ranks 0-3 on node1-4, each beating at `steps[i]` `ages[i]` ms before `now`.
void report_ranks(ProgressReports& reports, Steady::time_point now,
                  const std::vector<std::uint32_t>& ages,
                  const std::vector<std::optional<std::uint64_t>>& steps,
                  const std::string& section = "", std::uint32_t section_s = 0) {
  for (std::uint32_t i = 0; i < ages.size(); ++i) {
    ar::proto::StepProgress step{10, 0, {{i, ages[i], {steps[i], "", 0}}}};
    if (i == 0 && !section.empty()) step.ranks[0].beat = {steps[0], section, section_s};
    reports.report("node" + std::to_string(i + 1), {step}, now);
  }
}

const std::vector<std::string> kHosts{"node1", "node2", "node3", "node4"};

std::optional<ar::Hang> look(const ProgressReports& reports, Steady::time_point now,
                             std::uint32_t timeout_s = 10) {
  HangRule rule;
  rule.timeout = {timeout_s, false};
  return ar::hang_of(reports.seen(10, 0), kHosts, rule, {}, false, std::chrono::seconds{100}, now);
}

}  // namespace

TEST_CASE("a rank quiet past the timeout while the others beat is named as the one that stopped",
          "[hang]") {
  ProgressReports reports;
  const auto now = Steady::now();
  report_ranks(reports, now, {1000, 2000, 11000, 500}, {12, 12, 11, 12});
  const auto hang = look(reports, now);
  REQUIRE(hang);
  CHECK(hang->detail ==
        "rank 2 on node3 (last beat 11 s ago, at step 11) stopped beating first; 3 other ranks "
        "beat since, last 0 s ago, at step 12 (hang timeout 10 s)");
  CHECK(hang->nodes == std::vector<std::string>{"node3"});
  CHECK(hang->step == 12U);
}

TEST_CASE("all ranks quiet: the lowest step stopped first, else the earliest beat, else none",
          "[hang]") {
  const auto now = Steady::now();
  {
    ProgressReports reports;
    report_ranks(reports, now, {12000, 12000, 12300, 12000}, {12, 12, 11, 12});
    const auto hang = look(reports, now);
    REQUIRE(hang);
    CHECK(hang->nodes == std::vector<std::string>{"node3"});
    CHECK(
        hang->detail.starts_with("rank 2 on node3 (last beat 12 s ago, at step 11) stopped "
                                 "beating first; 3 other ranks stopped later"));
  }
  {
    ProgressReports reports;
    report_ranks(reports, now, {15000, 12000, 12000, 12000}, {std::nullopt, {}, {}, {}});
    const auto hang = look(reports, now);
    REQUIRE(hang);
    CHECK(hang->nodes == std::vector<std::string>{"node1"});
  }
  {
    ProgressReports reports;
    report_ranks(reports, now, {12000, 12050, 12000, 12100}, {12, 12, 12, 12});
    const auto hang = look(reports, now);
    REQUIRE(hang);
    CHECK(hang->nodes.empty());
    CHECK(hang->detail ==
          "4 ranks on node1,node2,node3,node4 stopped beating together 12 s ago, at step 12 "
          "(hang timeout 10 s); no rank stopped first");
  }
}

TEST_CASE("never a false positive: slow beats, an announced section, no beat, a silent agent",
          "[hang]") {
  const auto now = Steady::now();
  ProgressReports slow;
  report_ranks(slow, now, {9900, 9900, 9900, 9900}, {5, 5, 5, 5});
  CHECK_FALSE(look(slow, now));
  ProgressReports saving;
  report_ranks(saving, now, {100, 100, 100, 100}, {5, 5, 5, 5}, "checkpoint", 600);
  // Rank 0 announced 600 s; 300 s on, the others beat, it is not hung.
  report_ranks(saving, now + std::chrono::seconds{300}, {300000, 100, 100, 100}, {5, 6, 6, 6},
               "checkpoint", 600);
  CHECK_FALSE(look(saving, now + std::chrono::seconds{300}));
  report_ranks(saving, now + std::chrono::seconds{700}, {700000, 100, 100, 100}, {5, 6, 6, 6},
               "checkpoint", 600);
  CHECK(look(saving, now + std::chrono::seconds{700}));
  ProgressReports none;
  CHECK_FALSE(look(none, now));
  // A step that never beat is never hung, even long past first_beat.
  HangRule rule;
  rule.timeout = {10, false};
  CHECK_FALSE(ar::hang_of(std::nullopt, kHosts, rule, {}, false, std::chrono::hours{5}, now));
  // An attempt of a run that beat before has first_beat to beat again.
  CHECK_FALSE(ar::hang_of(std::nullopt, kHosts, rule, {}, true, std::chrono::minutes{29}, now));
  const auto late =
      ar::hang_of(std::nullopt, kHosts, rule, {}, true, std::chrono::minutes{31}, now);
  REQUIRE(late);
  CHECK(late->detail.starts_with("no task beat within 1800 s of the attempt's start"));
  // node3's agent went silent 20 s ago: its ranks are the node watch's to judge.
  ProgressReports stale;
  report_ranks(stale, now - std::chrono::seconds{20}, {100, 100, 100, 100}, {5, 5, 5, 5});
  for (const std::uint32_t i : {0U, 1U, 3U})
    stale.report("node" + std::to_string(i + 1), {{10, 0, {{i, 100, {6, "", 0}}}}}, now);
  CHECK_FALSE(look(stale, now));  // rank 2 quiet for 20 s, and so is node3's agent
  stale.report("node3", {{10, 0, {{2, 20100, {5, "", 0}}}}}, now);
  CHECK(look(stale, now));
  // Ranks on nodes slurmctld does not run the step on count for nothing.
  ProgressReports elsewhere;
  elsewhere.report("node9", {{10, 0, {{0, 60000, {1, "", 0}}}}}, now);
  CHECK_FALSE(look(elsewhere, now));
}

TEST_CASE(
    "a beat from before the attempt's start is an earlier step's file: left out, with its "
    "step number",
    "[hang]") {
  ProgressReports reports;
  const auto now = Steady::now();
  report_ranks(reports, now, {1000, 1000, 1000, 1000}, {3, 3, 3, 3});
  // node1 also holds rank 7's file of an earlier step 10.0 (a requeued job
  // numbers its steps from 0 again), beaten 10 minutes ago.
  reports.report("node1", {{10, 0, {{0, 1000, {3, "", 0}}, {7, 600000, {999, "", 0}}}}}, now);
  HangRule rule;
  rule.timeout = {10, false};
  const std::chrono::milliseconds started{20000};  // the attempt registered 20 s ago
  REQUIRE(ar::hang_of(reports.seen(10, 0), kHosts, rule, {}, false, started, now));  // as it was
  const auto mine = ar::of_attempt(reports.seen(10, 0), started, now);
  REQUIRE(mine);
  CHECK(mine->ranks.size() == 4);
  CHECK_FALSE(mine->ranks.contains(7));
  CHECK(mine->highest == 3U);
  CHECK_FALSE(ar::hang_of(mine, kHosts, rule, {}, false, started, now));
  CHECK_FALSE(ar::of_attempt(std::nullopt, started, now));
}

TEST_CASE("auto learns the timeout from the run: max(floor, 3 x p99), first_beat before",
          "[hang]") {
  HangRule rule;
  rule.timeout = {0, true};
  rule.floor = std::chrono::seconds{60};
  using std::chrono::milliseconds;
  CHECK(ar::hang_timeout_of(rule, {}) == rule.first_beat);
  std::vector<milliseconds> samples(99, milliseconds{2000});
  samples.push_back(milliseconds{50000});                            // one slow interval in 100
  CHECK(ar::hang_timeout_of(rule, samples) == milliseconds{60000});  // 3 x 2 s < floor
  samples.push_back(milliseconds{50000});  // two in 101: the p99 is the slow one
  CHECK(ar::hang_timeout_of(rule, samples) == milliseconds{150000});
}

TEST_CASE("the reports keep intervals between beats, once each, for the engine", "[hang]") {
  ProgressReports reports;
  const auto now = Steady::now();
  reports.report("node1", {{10, 0, {{0, 0, {1, "", 0}}}}}, now);
  reports.report("node1", {{10, 0, {{0, 1000, {1, "", 0}}}}}, now + std::chrono::seconds{1});
  reports.report("node1", {{10, 0, {{0, 0, {2, "", 0}}}}}, now + std::chrono::seconds{3});
  const auto taken = reports.take_intervals(10, 0);
  REQUIRE(taken.size() == 1);  // the same beat heard twice is one
  CHECK(taken[0] == std::chrono::seconds{3});
  CHECK(reports.take_intervals(10, 0).empty());
  CHECK(reports.seen(10, 0)->highest == 2U);
  // The interval after a section's announcement is not the run's pace.
  reports.report("node1", {{10, 0, {{0, 0, {2, "checkpoint", 600}}}}},
                 now + std::chrono::seconds{4});
  reports.report("node1", {{10, 0, {{0, 0, {3, "", 0}}}}}, now + std::chrono::seconds{300});
  CHECK(reports.take_intervals(10, 0) == std::vector<std::chrono::milliseconds>{1s});
  // Forgotten once no agent reported the step for kForgetAfter.
  reports.report("node1", {}, now + std::chrono::minutes{16});
  CHECK_FALSE(reports.seen(10, 0));
}

namespace {

// Rig with step 10.0 (node1-4) protected with a hang timeout of 10 s.
struct HangRig : Rig {
  explicit HangRig(std::uint32_t signal = 0) {
    slurm.add_job(10, 1000, {"node1", "node2", "node3", "node4"});
    register_hung(0, 0, signal);
  }
  // The attempt runs a minute before its ranks' beats are reported: a beat
  // from before its start would be an earlier step's (of_attempt).
  void register_hung(std::uint32_t attempt, std::uint32_t step_id, std::uint32_t signal = 0) {
    register_attempt(attempt, step_id, "node[1-4]", {10, false}, signal);
    clock.advance(1min);
  }
  // Every rank of step 10.STEP beat at `highest`, rank 2 `quiet_ms` ago.
  void beats(std::uint32_t step_id, std::uint64_t highest, std::uint32_t quiet_ms) {
    for (std::uint32_t i = 0; i < 4; ++i)
      reports.progress.report("node" + std::to_string(i + 1),
                              {{10, step_id, {{i, i == 2 ? quiet_ms : 100, {highest, "", 0}}}}},
                              clock.now());
  }
};

}  // namespace

TEST_CASE("a hung step: the event, the signal, its grace, then a relaunch in place", "[hang]") {
  HangRig rig(10);
  rig.config.hang_signal_grace = 5s;
  rig.engine->start_writes();
  rig.beats(0, 20, 2000);
  rig.engine->tick();
  CHECK(rig.step().state == StepState::registered);  // beating: nothing
  rig.beats(0, 20, 11000);
  REQUIRE(rig.tick_until([&] { return rig.slurm.updated("signal_step 10.0 10"); }, 100ms));
  CHECK(rig.detail("hung").starts_with("step 10.0 attempt 0 hung: rank 2 on node3"));
  CHECK_FALSE(rig.slurm.updated("kill_step 10.0"));  // not before the grace
  REQUIRE(rig.engine->writes_settled(5s));
  rig.engine->tick();
  CHECK(rig.detail("hang_signal") ==
        "SIGUSR1 sent to every task of step 10.0; it is cancelled in 5 s (hang_signal_grace)");
  rig.clock.advance(3s);
  rig.engine->tick();
  CHECK_FALSE(rig.slurm.updated("kill_step 10.0"));
  REQUIRE(rig.tick_until([&] { return rig.step().state == StepState::decided; }));
  CHECK(rig.slurm.updated("kill_step 10.0"));
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.step().message.find("on node[1-4]; the step hung: rank 2 on node3") !=
        std::string::npos);
  CHECK(rig.step().repair.failed.empty());
  CHECK(rig.step().repair.highest_step == 20U);
  CHECK(rig.detail("node_out") == "step 10.0 cancelled; job 10 keeps its nodes (node[1-4])");
  for (const auto& update : rig.slurm.updates) {
    CHECK(update.find("FAIL") == std::string::npos);
    CHECK(update.find("shrink") == std::string::npos);
  }
}

TEST_CASE("hangs with no new highest step: the one past max_hang_restarts gives up", "[hang]") {
  HangRig rig;
  rig.config.max_hang_restarts = 1;
  rig.engine->start_writes();
  rig.beats(0, 20, 11000);
  REQUIRE(rig.tick_until([&] { return rig.step().state == StepState::decided; }, 100ms));
  REQUIRE(rig.step().verdict == Verdict::relaunch);
  // Attempt 1 resumes from step 15's checkpoint and hangs at 20 again.
  rig.slurm.steps.erase({10, 0});
  rig.register_hung(1, 1);
  rig.clock.advance(60s);
  rig.beats(1, 20, 11000);
  REQUIRE(rig.tick_until([&] { return rig.step(1).state == StepState::decided; }, 100ms));
  CHECK(rig.step(1).verdict == Verdict::give_up);
  CHECK(rig.step(1).message ==
        "run r hung 2 times in a row with no new highest step between the hangs "
        "(max_hang_restarts=1); step 10.1 was cancelled");
  CHECK(rig.slurm.updated("kill_step 10.1"));
}

TEST_CASE("a hang after a new highest step is relaunched again, and so is a fault", "[hang]") {
  HangRig rig;
  rig.config.max_hang_restarts = 1;
  rig.config.max_attempts = 1;  // the budget: an attempt that progressed ran healthy
  rig.engine->start_writes();
  rig.beats(0, 20, 11000);
  REQUIRE(rig.tick_until([&] { return rig.step().state == StepState::decided; }, 100ms));
  rig.slurm.steps.erase({10, 0});
  rig.register_hung(1, 1);
  rig.clock.advance(60s);
  rig.beats(1, 25, 11000);  // past step 20: progress
  REQUIRE(rig.tick_until([&] { return rig.step(1).state == StepState::decided; }, 100ms));
  CHECK(rig.step(1).verdict == Verdict::relaunch);
  // Attempt 2 passes step 25 and its node dies: relaunched too, the budget
  // counting no attempt before it.
  rig.slurm.steps.erase({10, 1});
  rig.register_hung(2, 2);
  rig.clock.advance(60s);
  rig.beats(2, 30, 100);
  rig.slurm.nodes["node4"].down = true;
  REQUIRE(rig.tick_until([&] { return rig.step(2).state == StepState::decided; }, 100ms));
  CHECK(rig.step(2).verdict == Verdict::relaunch);
}

namespace {

// Step 10.0 protected (with a hang timeout of 10 s if `hang`), node1-4's
// agents heard through the server's heartbeat op (as root, from each node's
// address).
struct CheckRig : Rig {
  std::unique_ptr<ar::Service> service;
  explicit CheckRig(bool hang = false) {
    service = std::make_unique<ar::Service>(
        *store, slurm, clock, [] {}, reports, *verdicts, keeper.get(), &config);
    if (hang) {
      slurm.add_job(10, 1000, {"node1", "node2", "node3", "node4"});
      register_attempt(0, 0, "node[1-4]", {10, false});
      clock.advance(1min);  // beats from before the attempt's start are not its own
    } else {
      protect();
    }
    engine->tick();  // the keeper's first look: heartbeats are taken from now
  }
  ar::proto::json call(const std::string& op, ar::proto::json body, uid_t caller,
                       const std::string& peer = "127.0.0.1") {
    const auto request = ar::proto::parse_request(ar::proto::make_request(1, op, std::move(body)));
    return ar::proto::json::parse(service->handle(request, caller, peer));
  }
  // NODE's agent beats (with `checked`, if given); the reply's result.
  ar::proto::json beat(const std::string& node,
                       std::optional<ar::proto::CheckDone> checked = std::nullopt) {
    ar::proto::HeartbeatRequest request{node, false, {}};
    request.interval_ms = 1000;
    request.checked = std::move(checked);
    return call("heartbeat", request.to_json(), 0, slurm.nodes.at(node).address)["result"];
  }
  void beat_all() {
    for (const auto* node : {"node1", "node2", "node3", "node4"}) beat(node);
  }
  // Every rank of step 10.0 beat at step 20, rank 2 (node3) 11 s ago:
  // hung, with a hang timeout of 10 s.
  void hang_rank2() {
    for (std::uint32_t i = 0; i < 4; ++i)
      reports.progress.report("node" + std::to_string(i + 1),
                              {{10, 0, {{i, i == 2 ? 11000U : 100U, {20, "", 0}}}}}, clock.now());
  }
  // Every node's step daemon reports; node3's task failed. srun ends.
  void fail_on_node3() {
    const std::vector<std::string> hosts{"node1", "node2", "node3", "node4"};
    for (std::uint32_t i = 0; i < hosts.size(); ++i) {
      const auto& node = hosts[i];
      ar::proto::TasksExitedRequest report;
      report.job_id = 10;
      report.node = node;
      report.node_id = i;
      report.run_id = "r";
      report.attempt = 0;
      report.tasks = 1;
      report.failed = node == "node3" ? 1 : 0;
      call("tasks_exited", report.to_json(), 0);
    }
    call("verdict", {{"run_id", "r"}, {"attempt", 0}, {"ended", true}}, 1000);
  }
};

}  // namespace

TEST_CASE(
    "a failed step waits for its nodes' quick checks, and when all pass it is no_fault, saying so",
    "[hang][checks]") {
  CheckRig rig;
  rig.beat_all();
  rig.fail_on_node3();
  rig.engine->tick();
  // Each agent is asked once, in its next heartbeat's reply.
  std::map<std::string, std::uint64_t> asks;
  for (const auto* node : {"node1", "node2", "node3", "node4"}) {
    const auto reply = rig.beat(node);
    REQUIRE(reply.contains("check"));
    CHECK(reply["check"]["timeout_ms"] == 30000);
    asks[node] = reply["check"]["id"].get<std::uint64_t>();
  }
  // srun hears what it waits for.
  const auto waiting =
      rig.call("verdict", {{"run_id", "r"}, {"attempt", 0}, {"ended", true}}, 1000);
  CHECK(waiting["result"]["message"] == "checking node[1-4] after the step failed (failure_check)");
  rig.clock.advance(5s);  // past end_window: the checks still hold the verdict
  rig.engine->tick();
  CHECK(rig.step().state == StepState::ended);
  for (const auto& [node, id] : asks) rig.beat(node, ar::proto::CheckDone{id, true, ""});
  CHECK_FALSE(rig.beat("node1").contains("check"));  // answered: no longer asked
  rig.engine->tick();
  CHECK(rig.step().verdict == Verdict::no_fault);
  CHECK(rig.step().message ==
        "no node of the step failed; quick checks after the step failed: passed on node[1-4]; "
        "srun keeps the step's own exit status");
  CHECK(rig.detail("checked") == "quick checks after the step failed: passed on node[1-4]");
}

TEST_CASE("a node whose quick check failed is a fault: the step is relaunched without it",
          "[hang][checks]") {
  CheckRig rig;
  rig.beat_all();
  rig.fail_on_node3();
  rig.engine->tick();
  for (const auto* node : {"node1", "node2", "node3", "node4"}) {
    const auto id = rig.beat(node)["check"]["id"].get<std::uint64_t>();
    const bool bad = std::string(node) == "node3";
    rig.beat(node, ar::proto::CheckDone{id, !bad, bad ? "gpu: fail: GPU 0 is lost" : ""});
  }
  rig.engine->start_writes();
  REQUIRE(rig.tick_until([&] { return rig.step().state == StepState::decided; }, 100ms));
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.detail("detected") ==
        "step 10.0 attempt 0: node3: a health check failed: quick check after the step failed: "
        "gpu: fail: GPU 0 is lost");
  CHECK(rig.step().repair.failed_nodes() == std::vector<std::string>{"node3"});
  CHECK(rig.detail("check_failed") ==
        "quick checks after the step failed: failed on node3: gpu: fail: GPU 0 is lost; passed on "
        "node[1-2,4]");
}

TEST_CASE("a hung step's nodes get the quick checks: one that fails leaves the job, replaced",
          "[hang][checks]") {
  CheckRig rig(true);
  // Every outside call on threads of their own, as in the controller: the
  // looks make none (the checks, the signal and the cancel included).
  rig.start_calls();
  rig.hang_rank2();
  rig.beat_all();
  rig.engine->tick();
  REQUIRE(rig.step().state == StepState::repairing);
  CHECK(rig.detail("hung").starts_with("step 10.0 attempt 0 hung: rank 2 on node3"));
  // The step waits for the checks: nothing cancelled yet.
  rig.engine->tick();
  CHECK_FALSE(rig.slurm.updated("kill_step 10.0"));
  for (const auto* node : {"node1", "node2", "node3", "node4"}) {
    const auto reply = rig.beat(node);
    REQUIRE(reply.contains("check"));
    const auto id = reply["check"]["id"].get<std::uint64_t>();
    const bool bad = std::string(node) == "node3";
    rig.beat(node, ar::proto::CheckDone{id, !bad, bad ? "gpu: fail: GPU 0 is lost" : ""});
  }
  REQUIRE(rig.tick_until([&] { return rig.step().state == StepState::decided; }, 100ms));
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.step().repair.failed_nodes() == std::vector<std::string>{"node3"});
  CHECK(rig.detail("check_failed") ==
        "quick checks after the step hung: failed on node3: gpu: fail: GPU 0 is lost; passed on "
        "node[1-2,4]");
  CHECK(rig.step().message.find("the step hung: rank 2 on node3") != std::string::npos);
  CHECK(rig.slurm.updated("shrink 10 node[1-2,4]"));
  CHECK(rig.look_thread_calls() == 0);
  rig.settle_calls();
}

TEST_CASE("a hung step whose nodes all pass the quick checks runs again on the same nodes",
          "[hang][checks]") {
  CheckRig rig(true);
  rig.engine->start_writes();
  rig.hang_rank2();
  rig.beat_all();
  rig.engine->tick();
  REQUIRE(rig.step().state == StepState::repairing);
  for (const auto* node : {"node1", "node2", "node3", "node4"}) {
    const auto id = rig.beat(node)["check"]["id"].get<std::uint64_t>();
    rig.beat(node, ar::proto::CheckDone{id, true, ""});
  }
  REQUIRE(rig.tick_until([&] { return rig.step().state == StepState::decided; }, 100ms));
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.step().repair.failed.empty());
  CHECK(rig.detail("checked") == "quick checks after the step hung: passed on node[1-4]");
  CHECK(rig.detail("node_out") == "step 10.0 cancelled; job 10 keeps its nodes (node[1-4])");
}

TEST_CASE("a checker's mark seen before its answer ends the quick checks as failed",
          "[hang][checks]") {
  CheckRig rig;
  rig.beat_all();
  rig.fail_on_node3();
  rig.engine->tick();
  rig.beat_all();  // asked; no answer yet
  rig.slurm.nodes["node3"].fail = true;
  rig.slurm.nodes["node3"].reason = "Action:Replace gpu: GPU 0 is lost";
  rig.engine->start_writes();
  REQUIRE(rig.tick_until([&] { return rig.step().state == StepState::decided; }, 100ms));
  CHECK(rig.step().verdict == Verdict::relaunch);
  CHECK(rig.detail("check_failed") ==
        "quick checks after the step failed: failed on node3: Action:Replace gpu: GPU 0 is lost");
  CHECK_FALSE(rig.slurm.updated("fail node3"));  // the checker's mark stands
  CHECK_FALSE(rig.beat("node1").contains("check"));
}

TEST_CASE("quick checks that do not answer within failure_check_timeout, or none asked",
          "[hang][checks]") {
  {
    CheckRig rig;
    rig.beat_all();
    rig.fail_on_node3();
    rig.engine->tick();
    rig.beat_all();
    rig.clock.advance(29s);
    rig.engine->tick();
    CHECK(rig.step().state == StepState::ended);
    rig.clock.advance(1s);
    rig.engine->tick();
    CHECK(rig.step().verdict == Verdict::no_fault);
    CHECK(rig.step().message.find("no answer from node[1-4] within 30 s") != std::string::npos);
  }
  {
    CheckRig rig;  // no agent heard: no check, end_window as before
    rig.fail_on_node3();
    rig.clock.advance(3s);
    rig.engine->tick();
    CHECK(rig.step().message ==
          "no node of the step failed; srun keeps the step's own exit status");
  }
  {
    CheckRig rig;  // observe mode: nothing asked that could mark a node
    rig.config.mode = ar::ActionMode::observe;
    rig.beat_all();
    rig.fail_on_node3();
    rig.engine->tick();
    CHECK_FALSE(rig.beat("node1").contains("check"));
  }
  {
    CheckRig rig;
    rig.config.failure_check = false;
    rig.beat_all();
    rig.fail_on_node3();
    rig.engine->tick();
    CHECK_FALSE(rig.beat("node1").contains("check"));
  }
}

TEST_CASE("a quick check's ask and answer on the wire", "[hang][checks]") {
  using ar::proto::json;
  ar::proto::HeartbeatReply reply;
  reply.check = ar::proto::CheckAsk{3, 30000};
  CHECK(reply.to_json().dump() == R"({"check":{"id":3,"timeout_ms":30000}})");
  CHECK(ar::proto::HeartbeatReply::from_json(reply.to_json()).check == reply.check);
  CHECK_THROWS_AS(
      ar::proto::HeartbeatReply::from_json(json::parse(R"({"check":{"id":0,"timeout_ms":5}})")),
      ar::proto::ProtocolError);
  CHECK_THROWS_AS(
      ar::proto::HeartbeatReply::from_json(json::parse(R"({"check":{"id":1,"timeout_ms":0}})")),
      ar::proto::ProtocolError);
  ar::proto::HeartbeatRequest beat{"node1", false, {}};
  beat.checked = ar::proto::CheckDone{3, false, "gpu: fail: lost"};
  CHECK(beat.to_json().dump() ==
        R"({"checked":{"detail":"gpu: fail: lost","id":3,"passed":false},"node":"node1"})");
  CHECK(ar::proto::HeartbeatRequest::from_json(beat.to_json()).checked == beat.checked);
  CHECK_THROWS_AS(ar::proto::HeartbeatRequest::from_json(
                      json::parse(R"({"node":"n","checked":{"id":1,"passed":false,"detail":")" +
                                  std::string(1025, 'x') + R"("}})")),
                  ar::proto::ProtocolError);
}

TEST_CASE("a hung step under observe mode is said as a would event, and left alone", "[hang]") {
  HangRig rig(10);
  rig.config.mode = ar::ActionMode::observe;
  rig.engine->start_writes();
  rig.beats(0, 20, 11000);
  for (int i = 0; i < 5; ++i) {
    rig.engine->tick();
    rig.clock.advance(1s);
  }
  CHECK(rig.step().state == StepState::registered);
  CHECK(rig.detail("would").find("cancel step 10.0 and relaunch run r in place (step 10.0 attempt "
                                 "0 hung: rank 2 on node3") != std::string::npos);
  CHECK_FALSE(rig.has_event("hung"));
  for (const auto& update : rig.slurm.updates) {
    CHECK(update.find("signal_step") == std::string::npos);
    CHECK(update.find("kill_step") == std::string::npos);
  }
}
