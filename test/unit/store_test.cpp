#include "store/store.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "fakes.hpp"  // ManualClock

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
  CHECK(found->state == ar::StepState::registered);
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

TEST_CASE("a step's resume state is saved with its event and survives reopening", "[store]") {
  TempDir dir;
  {
    ar::Store store(dir.path);
    store.register_step(step(5, "5.0-a", 0), 1000);
    store.register_step(step(6, "6.0-b", 0), 1000);
    auto s = store.find("5.0-a", 0).value();
    s.state = ar::StepState::repairing;
    s.phase = ar::RepairPhase::node_out;
    s.ended_at = 42;
    s.repair.failed = {{"node3", "", 17}};
    store.save(s, ar::EventSpec{ar::EventKind::node_out, "node3 set FAIL"});
    auto other = store.find("6.0-b", 0).value();
    other.state = ar::StepState::decided;
    other.verdict = ar::Verdict::no_fault;
    other.message = "no node at fault";
    CHECK(store.save(other, std::nullopt));
    other.verdict = ar::Verdict::relaunch;
    CHECK_FALSE(
        store.save(other, ar::EventSpec{ar::EventKind::error, "too late"}));  // decided is final
    auto ghost = other;
    ghost.step.run_id = "none";
    CHECK_THROWS_WITH(store.save(ghost, std::nullopt), "no step none attempt 0 to update");
  }
  ar::Store store(dir.path);
  const auto active = store.active_steps();
  REQUIRE(active.size() == 1);
  CHECK(active[0].step.run_id == "5.0-a");
  CHECK(active[0].phase == ar::RepairPhase::node_out);
  CHECK(active[0].ended_at == 42);
  CHECK(active[0].repair.failed.at(0).node == "node3");
  CHECK(store.find("6.0-b", 0)->verdict == ar::Verdict::no_fault);
  CHECK(store.job_steps(6).size() == 1);
  const auto events = store.events(std::nullopt, 0);
  REQUIRE(events.size() == 3);
  CHECK(events[2].kind == "node_out");
  CHECK(events[2].detail == "node3 set FAIL");
}

TEST_CASE("a database of the first schema gains the resume columns", "[store]") {
  TempDir dir;
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((dir.path / "auto-resume.db").c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db,
                         "CREATE TABLE steps (run_id TEXT NOT NULL, attempt INTEGER NOT NULL,"
                         " job_id INTEGER NOT NULL, step_id INTEGER NOT NULL, uid INTEGER NOT NULL,"
                         " argv TEXT NOT NULL, cwd TEXT NOT NULL, nodelist TEXT NOT NULL,"
                         " state TEXT NOT NULL, created_at INTEGER NOT NULL,"
                         " updated_at INTEGER NOT NULL, PRIMARY KEY (run_id, attempt));"
                         "INSERT INTO steps VALUES ('1.0-a', 0, 1, 0, 0, '[\"srun\"]', '/', 'n1',"
                         " 'registered', 1, 1);",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  ar::Store store(dir.path);
  const auto old = store.find("1.0-a", 0);
  REQUIRE(old);
  CHECK(old->verdict == ar::Verdict::none);
  CHECK(old->repair == ar::RepairFacts{});
  CHECK(old->step.min_nodes == 0);  // schema 7's column, for an old row
}

TEST_CASE("a step's min_nodes is kept", "[store]") {
  TempDir dir;
  auto with_min = step(8, "8.0-a", 0);
  with_min.min_nodes = 3;
  {
    ar::Store store(dir.path);
    REQUIRE(store.register_step(with_min, 1000) == ar::Store::Insert::created);
  }
  ar::Store store(dir.path);
  CHECK(store.find("8.0-a", 0).value().step.min_nodes == 3);
  CHECK(store.active_steps().at(0).step.min_nodes == 3);
}

TEST_CASE("narrow writes never overwrite a repair or a verdict", "[store]") {
  TempDir dir;
  ar::Store store(dir.path);
  store.register_step(step(8, "8.0-a", 0), 1000);
  auto s = store.find("8.0-a", 0).value();
  CHECK(store.mark_ended(s, ar::Stamp{50, 0, {}}, {ar::EventKind::ended, "srun says so"}));
  CHECK(store.find("8.0-a", 0)->state == ar::StepState::ended);
  CHECK(store.find("8.0-a", 0)->ended_at == 50);
  CHECK_FALSE(store.mark_ended(s, ar::Stamp{60, 0, {}},
                               {ar::EventKind::ended, "again"}));  // past `registered`

  s = store.find("8.0-a", 0).value();
  s.state = ar::StepState::repairing;
  s.phase = ar::RepairPhase::replaced;
  s.repair.helpers = {{"node4", 99}};
  CHECK(store.save(s, std::nullopt));
  CHECK(store.cancel(s, "srun got SIGINT"));
  const auto cancelled = store.find("8.0-a", 0).value();
  CHECK(cancelled.verdict == ar::Verdict::cancelled);
  CHECK(cancelled.message == "srun got SIGINT");
  CHECK(cancelled.repair.helpers.at("node4") == 99);  // kept, to cancel the helper
  CHECK_FALSE(store.cancel(s, "twice"));
  CHECK(store.events(std::nullopt, 0).back().detail == "srun got SIGINT");
}

TEST_CASE("a job has one protected run at a time", "[store]") {
  TempDir dir;
  ar::Store store(dir.path);
  CHECK(store.register_step(step(9, "9.0-a", 0), 1000) == ar::Store::Insert::created);
  ar::StoredStep blocking;
  CHECK(store.register_step(step(9, "9.1-b", 0), 1000, &blocking) == ar::Store::Insert::busy);
  CHECK(blocking.step.run_id == "9.0-a");
  CHECK(store.register_step(step(9, "9.0-a", 1), 1000) ==
        ar::Store::Insert::created);  // its relaunch
  CHECK(store.register_step(step(10, "10.0-c", 0), 1000) == ar::Store::Insert::created);
  for (const auto& s : store.job_steps(9)) {
    auto decided = s;
    decided.state = ar::StepState::decided;
    store.save(decided, std::nullopt);
  }
  CHECK(store.register_step(step(9, "9.1-b", 0), 1000) == ar::Store::Insert::created);
}

TEST_CASE("node replacements and node events are kept across reopening", "[store]") {
  TempDir dir;
  {
    ar::Store store(dir.path);
    ar::NodeRepair r{
        "node3", ar::NodeRepairState::waiting, "Action:Replace", ar::RepairMode::wait, 17, 0, 0, 5,
        ""};
    store.save_node_repair(r, {ar::EventKind::replace_requested, "node3 marked"});
    r.state = ar::NodeRepairState::replacing;
    r.attempts = 1;
    store.save_node_repair(r, {ar::EventKind::provider, "try 1"});
    store.save_node_repair(
        {"node4", ar::NodeRepairState::failed, "x", ar::RepairMode::now, 1, 3, 0, 9, "boom"},
        {ar::EventKind::replace_failed, "boom"});
    store.add_node_event("", {ar::EventKind::stalled, "the controller stood still"});
  }
  ar::Store store(dir.path);
  const auto all = store.node_repairs();
  REQUIRE(all.size() == 2);
  CHECK(all[0].node == "node3");
  CHECK(all[0].state == ar::NodeRepairState::replacing);
  CHECK(all[0].attempts == 1);
  CHECK(all[0].instance == 17);
  CHECK(all[1].detail == "boom");
  store.remove_node_repair("node3", {ar::EventKind::node_replaced, "node3 is back"});
  CHECK_FALSE(store.node_repair("node3"));
  CHECK(store.node_repair("node4")->mode == ar::RepairMode::now);
  const auto events = store.events(std::nullopt, 0);
  REQUIRE(events.size() == 5);
  CHECK(events[0].node == "node3");
  CHECK(events[0].kind == "replace_requested");
  CHECK(events[3].node.empty());
  CHECK(events[3].kind == "stalled");
  CHECK(events[4].detail == "node3 is back");
  CHECK(store.events(1000, 0).empty());  // a user sees no node's events
}

TEST_CASE("a database of the second schema gains the events' node", "[store]") {
  TempDir dir;
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((dir.path / "auto-resume.db").c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db,
                         "CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT,"
                         " at INTEGER NOT NULL, job_id INTEGER NOT NULL, run_id TEXT NOT NULL,"
                         " uid INTEGER NOT NULL, kind TEXT NOT NULL, detail TEXT NOT NULL);"
                         "INSERT INTO events (at, job_id, run_id, uid, kind, detail)"
                         " VALUES (1, 4, '4.0-a', 0, 'registered', 'old');"
                         "PRAGMA user_version = 2;",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  ar::Store store(dir.path);
  const auto events = store.events(std::nullopt, 0);
  REQUIRE(events.size() == 1);
  CHECK(events[0].detail == "old");
  CHECK(events[0].node.empty());
  store.add_node_event("node1", {ar::EventKind::marked, "new"});
  CHECK(store.events(std::nullopt, 0).back().node == "node1");
  // and, with schema 8, the group, level and resource of each event
  CHECK(events[0].level == "info");
  CHECK(events[0].resource == "job");
  CHECK(store.events(std::nullopt, 0).back().resource == "node");
}

TEST_CASE("the provisioning state, its events and metering records are saved together", "[store]") {
  TempDir dir;
  ar::test::ManualClock clock;
  {
    ar::Store store(dir.path, clock);
    CHECK_FALSE(store.provision_state());
    ar::InstanceRecord record;
    record.token = "gpu:gpu-1:1";
    record.group = "gpu";
    record.node = "gpu-1";
    record.requested = 100;
    store.save_provision({{"groups", 1}},
                         {{"capacity_unavailable", "warning", "group", "gpu", "", "no capacity"}},
                         {record});
    record.instance_id = "i-1";
    record.started = 110;
    ar::InstanceRecord other;
    other.token = "cpu:cpu-1:1";
    other.group = "cpu";
    other.requested = 105;
    store.save_provision({{"groups", 2}}, {}, {record, other});
  }
  ar::Store store(dir.path, clock);  // as after a restart
  CHECK(store.provision_state() == ar::proto::json{{"groups", 2}});
  const auto all = store.instance_records();
  REQUIRE(all.size() == 2);
  CHECK(all[0].token == "gpu:gpu-1:1");  // upserted: one record per token
  CHECK(all[0].instance_id == "i-1");
  CHECK(all[0].started == 110);
  CHECK(store.instance_records("cpu").size() == 1);
  const auto events = store.events(std::nullopt, 0);
  REQUIRE(events.size() == 1);
  CHECK(events[0].kind == "capacity_unavailable");
  CHECK(events[0].group == "gpu");
  CHECK(events[0].level == "warning");
  CHECK(events[0].resource == "group");
}

TEST_CASE("events are filtered by group and by level, in the query", "[store]") {
  TempDir dir;
  ar::test::ManualClock clock;
  ar::Store store(dir.path, clock);
  store.save_provision({{"groups", 1}},
                       {{"operation_started", "info", "group", "gpu", "", "count 0 -> 2"},
                        {"create_failed", "warning", "instance", "gpu", "gpu-1", "exit 75"},
                        {"group_failed", "error", "group", "gpu", "", "exit 78"},
                        {"capacity_unavailable", "warning", "group", "cpu", "", "none"}},
                       {});
  const auto kinds = [&](const ar::Store::EventFilter& filter, std::uint32_t limit = 100) {
    std::vector<std::string> out;
    for (const auto& e : store.events(std::nullopt, 0, 0, limit, filter)) out.push_back(e.kind);
    return out;
  };
  using V = std::vector<std::string>;
  CHECK(kinds({}) ==
        V{"operation_started", "create_failed", "group_failed", "capacity_unavailable"});
  CHECK(kinds({"gpu", ""}) == V{"operation_started", "create_failed", "group_failed"});
  CHECK(kinds({"", "warning"}) == V{"create_failed", "group_failed", "capacity_unavailable"});
  CHECK(kinds({"gpu", "warning"}) == V{"create_failed", "group_failed"});
  CHECK(kinds({"", "error"}) == V{"group_failed"});
  CHECK(kinds({"", "info"}).size() == 4);
  CHECK(kinds({"none", ""}).empty());
  // The limit counts matching rows only: a page is never short of matches.
  CHECK(kinds({"", "warning"}, 2) == V{"create_failed", "group_failed"});
}

TEST_CASE("metering records that ended before `since` are left out", "[store]") {
  TempDir dir;
  ar::test::ManualClock clock;
  ar::Store store(dir.path, clock);
  ar::InstanceRecord ended{"a:a-1:1", "a", "a-1", "i-1", 1, 100, 110, 120, 200, "scale_in"};
  ar::InstanceRecord open{"a:a-2:1", "a", "a-2", "i-2", 1, 100, 110, 120, 0, ""};
  store.save_provision({{"groups", 1}}, {}, {ended, open});
  CHECK(store.instance_records("", 0).size() == 2);
  CHECK(store.instance_records("", 200).size() == 2);
  const auto later = store.instance_records("", 201);
  REQUIRE(later.size() == 1);
  CHECK(later[0].token == "a:a-2:1");
  CHECK(store.instance_records("b", 0).empty());
}

TEST_CASE("a shared state folder is refused and left as it is", "[store]") {
  TempDir dir;
  const auto shared = dir.path / "shared";
  std::filesystem::create_directory(shared);
  REQUIRE(chmod(shared.c_str(), 01777) == 0);
  CHECK_THROWS_WITH(ar::Store(shared), Catch::Contains("state_dir " + shared.string() +
                                                       " may be written by others (mode 1777)"));
  CHECK((std::filesystem::status(shared).permissions() & std::filesystem::perms::mask) ==
        (std::filesystem::perms::all | std::filesystem::perms::sticky_bit));
  CHECK_FALSE(std::filesystem::exists(shared / "auto-resume.db"));
}

TEST_CASE("a state folder of another uid or a file is refused", "[store]") {
  TempDir dir;
  const auto file = dir.path / "file";
  { std::ofstream(file) << "x"; }
  CHECK_THROWS_WITH(ar::Store(file), Catch::Contains("is not a directory"));
  const auto theirs = dir.path / "theirs";
  std::filesystem::create_directory(theirs);
  REQUIRE(chmod(theirs.c_str(), 0700) == 0);
  if (geteuid() != 0) return;  // only root can give a folder away (the suite runs as root)
  REQUIRE(chown(theirs.c_str(), 65534, static_cast<gid_t>(-1)) == 0);
  CHECK_THROWS_WITH(ar::Store(theirs), Catch::Contains("belongs to uid 65534"));
}

TEST_CASE("a state folder that is a symlink is refused and its target left as it is",
          "[store][security]") {
  TempDir dir;
  const auto target = dir.path / "target";
  std::filesystem::create_directory(target);
  REQUIRE(chmod(target.c_str(), 0755) == 0);
  const auto link = dir.path / "state";
  std::filesystem::create_directory_symlink(target, link);
  CHECK_THROWS_WITH(ar::Store(link),
                    Catch::Contains("state_dir " + link.string() + " is a symbolic link"));
  CHECK((std::filesystem::status(target).permissions() & std::filesystem::perms::mask) ==
        static_cast<std::filesystem::perms>(0755));
  CHECK(std::filesystem::is_empty(target));
}

TEST_CASE("a state folder serves one controller at a time", "[store][security]") {
  TempDir dir;
  {
    ar::Store first(dir.path);
    CHECK_THROWS_WITH(
        ar::Store(dir.path),
        Catch::Contains("state_dir " + dir.path.string() +
                        " is in use by another controller (pid " + std::to_string(getpid()) + ")"));
  }
  ar::Store again(dir.path);  // the first one's end let it go
  CHECK(again.active_steps().empty());
}

TEST_CASE("an existing state folder of the controller's own is made 700", "[store]") {
  TempDir dir;
  const auto own = dir.path / "own";
  std::filesystem::create_directory(own);
  REQUIRE(chmod(own.c_str(), 0755) == 0);
  ar::Store store(own);
  CHECK(std::filesystem::status(own).permissions() == std::filesystem::perms::owner_all);
  CHECK(std::filesystem::exists(own / "auto-resume.db"));
}

TEST_CASE("a database of the third schema gains the provider's call time and the requester",
          "[store]") {
  TempDir dir;
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((dir.path / "auto-resume.db").c_str(), &db) == SQLITE_OK);
    // Schema 3 as written before the provider's call time had a column.
    REQUIRE(sqlite3_exec(db,
                         "CREATE TABLE node_repairs (node TEXT PRIMARY KEY, state TEXT NOT NULL,"
                         " reason TEXT NOT NULL, mode TEXT NOT NULL, instance INTEGER NOT NULL,"
                         " attempts INTEGER NOT NULL, next_try INTEGER NOT NULL,"
                         " started_at INTEGER NOT NULL, detail TEXT NOT NULL);"
                         "INSERT INTO node_repairs VALUES ('node2', 'waiting', 'Action:Replace',"
                         " 'wait', 7, 0, 0, 5, '');"
                         "PRAGMA user_version = 3;",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  ar::Store store(dir.path);
  const auto repair = store.node_repair("node2");
  REQUIRE(repair);
  CHECK(repair->called_at == 0);
  CHECK(repair->requested_by == -1);
  auto asked = *repair;
  asked.requested_by = 0;
  store.save_node_repair(asked, {ar::EventKind::waiting, "w"});
  CHECK(store.node_repair("node2")->requested_by == 0);
}

TEST_CASE(
    "a database of the fourth schema gains the guard rails' flags and counted actions (schema 6)",
    "[store][guard]") {
  TempDir dir;
  {
    ar::Store store(dir.path);  // today's schema, then back to the fourth
  }
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((dir.path / "auto-resume.db").c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db,
                         "DROP TABLE guard_flags; DROP TABLE guard_actions;"
                         "PRAGMA user_version = 4;",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  {
    ar::Store store(dir.path);
    CHECK(store.guard_flags().empty());
    store.set_guard_flags({{"paused", ar::proto::json{{"uid", 0}}}, {"tripped", std::nullopt}},
                          {ar::EventKind::paused, "paused by uid 0"});
    store.count_actions("mark", {"node1", "node2"});
  }
  ar::Store store(dir.path);
  const auto flags = store.guard_flags();
  REQUIRE(flags.size() == 1);
  CHECK(flags.at("paused")["uid"] == 0);
  CHECK(store.actions_since("mark", 0) == 2);
  CHECK(store.actions_since("replacement", 0) == 0);
  const auto events = store.events(std::nullopt, 0);
  REQUIRE(events.size() == 1);
  CHECK(events[0].kind == "paused");
  CHECK(events[0].node.empty());
  store.forget_actions();
  CHECK(store.actions_since("mark", 0) == 0);
}

TEST_CASE("a database of the fourth schema gains the boot times, its old rows counting by wall",
          "[store][clock]") {
  TempDir dir;
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open((dir.path / "auto-resume.db").c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(
                db,
                "CREATE TABLE steps (run_id TEXT NOT NULL, attempt INTEGER NOT NULL,"
                " job_id INTEGER NOT NULL, step_id INTEGER NOT NULL, uid INTEGER NOT NULL,"
                " argv TEXT NOT NULL, cwd TEXT NOT NULL, nodelist TEXT NOT NULL,"
                " state TEXT NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,"
                " ended_at INTEGER NOT NULL DEFAULT 0, verdict TEXT NOT NULL DEFAULT '',"
                " message TEXT NOT NULL DEFAULT '', phase TEXT NOT NULL DEFAULT '',"
                " repair TEXT NOT NULL DEFAULT '{}', PRIMARY KEY (run_id, attempt));"
                "INSERT INTO steps (run_id, attempt, job_id, step_id, uid, argv, cwd, nodelist,"
                " state, created_at, updated_at, ended_at) VALUES ('1.0-a', 0, 1, 0, 0,"
                " '[\"srun\"]', '/', 'n1', 'ended', 100, 100, 160);"
                "CREATE TABLE node_repairs (node TEXT PRIMARY KEY, state TEXT NOT NULL,"
                " reason TEXT NOT NULL, mode TEXT NOT NULL, instance INTEGER NOT NULL,"
                " attempts INTEGER NOT NULL, next_try INTEGER NOT NULL,"
                " started_at INTEGER NOT NULL, detail TEXT NOT NULL,"
                " called_at INTEGER NOT NULL DEFAULT 0, requested_by INTEGER NOT NULL DEFAULT -1);"
                "INSERT INTO node_repairs VALUES ('node2', 'replacing', 'r', 'wait', 7, 1, 90, 5,"
                " '', 0, -1);"
                "PRAGMA user_version = 4;",
                nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  ar::test::ManualClock clock;
  {
    ar::Store store(dir.path, clock);
    const auto old = store.find("1.0-a", 0).value();
    CHECK(old.created() == ar::Stamp{100, 0, ""});
    CHECK(old.ended() == ar::Stamp{160, 0, ""});
    CHECK(ar::elapsed(old.created(), old.ended()) == std::chrono::seconds{60});
    const auto repair = store.node_repair("node2").value();
    CHECK(repair.next() == ar::Stamp{90, 0, ""});
    CHECK(repair.started() == ar::Stamp{5, 0, ""});
    // New rows carry the boot time, through a reopening.
    CHECK(store.register_step(step(2, "2.0-b", 0), 1000) == ar::Store::Insert::created);
    auto fresh = store.find("2.0-b", 0).value();
    CHECK(fresh.created() == clock.stamp());
    clock.advance(std::chrono::seconds{5});
    REQUIRE(store.mark_ended(fresh, clock.stamp(), {ar::EventKind::ended, "ended"}));
    auto moved = repair;
    moved.set_next(clock.stamp().plus(std::chrono::seconds{10}));
    store.save_node_repair(moved, {ar::EventKind::provider_failed, "again"});
  }
  ar::Store store(dir.path, clock);
  const auto fresh = store.find("2.0-b", 0).value();
  CHECK(fresh.ended() == clock.stamp());
  CHECK(fresh.ended_boot_id == clock.boot_id());
  CHECK(ar::elapsed(fresh.created(), fresh.ended()) == std::chrono::seconds{5});
  CHECK(store.node_repair("node2")->next() == clock.stamp().plus(std::chrono::seconds{10}));
}

TEST_CASE("the event hook hears each committed event once, a node's told apart", "[store]") {
  TempDir dir;
  ar::Store store(dir.path);
  std::vector<std::pair<std::string, bool>> heard;
  store.on_event([&heard](const ar::Event& event, bool node_event) {
    heard.emplace_back(event.kind + " " + std::to_string(event.job_id) + " " + event.node,
                       node_event);
  });
  CHECK(store.register_step(step(7, "r", 0), 1000) == ar::Store::Insert::created);
  CHECK(store.register_step(step(7, "r", 0), 1000) == ar::Store::Insert::duplicate);
  store.add_node_event("node3", {ar::EventKind::marked, "silent"});
  CHECK(heard == std::vector<std::pair<std::string, bool>>{{"registered 7 ", false},
                                                           {"marked 0 node3", true}});
  CHECK(store.step_counts() == std::map<std::string, std::int64_t>{{"registered", 1}});
}

namespace {

// The details of the store's events of `kind`, oldest first.
std::vector<std::string> details_of(ar::Store& store, const std::string& kind) {
  std::vector<std::string> out;
  for (const auto& event : store.events(std::nullopt, 0))
    if (event.kind == kind) out.push_back(event.detail);
  return out;
}

}  // namespace

TEST_CASE("a job past max_job_steps_per_hour is refused a new step, once said, and again later",
          "[store][caps]") {
  TempDir dir;
  ar::test::ManualClock clock;
  ar::Store store(dir.path, clock, {2, 0, 0});
  for (const auto* run : {"a", "b"}) {
    REQUIRE(store.register_step(step(7, run, 0), 1000) == ar::Store::Insert::created);
    REQUIRE(store.cancel(*store.find(run, 0), "ended"));
  }
  std::string why;
  CHECK(store.register_step(step(7, "c", 0), 1000, nullptr, &why) == ar::Store::Insert::capped);
  CHECK(why ==
        "job 7 registered 2 protected steps within the last hour (max_job_steps_per_hour=2)");
  CHECK_FALSE(store.find("c", 0));
  CHECK(store.register_step(step(7, "d", 0), 1000) == ar::Store::Insert::capped);
  // One event for the cause within the hour: refusals do not grow the store.
  CHECK(details_of(store, "step_refused") ==
        std::vector<std::string>{"step 7.0 refused: " + why +
                                 "; more refusals for it within the hour are not recorded"});
  // Another job of the same user goes on; an attempt number alone (no
  // relaunch before it: a's attempt 0 was cancelled) is no relaunch.
  CHECK(store.register_step(step(8, "e", 0), 1000) == ar::Store::Insert::created);
  CHECK(store.register_step(step(7, "a", 1), 1000) == ar::Store::Insert::capped);
  clock.advance(std::chrono::seconds{3601});
  CHECK(store.register_step(step(7, "c", 0), 1000) == ar::Store::Insert::created);
}

TEST_CASE("a relaunch past the caps is registered, an attempt number without one before it is not",
          "[store][caps]") {
  TempDir dir;
  ar::test::ManualClock clock;
  ar::Store store(dir.path, clock, {1, 1, 0});
  REQUIRE(store.register_step(step(7, "r", 0), 1000) == ar::Store::Insert::created);
  auto decided = *store.find("r", 0);
  decided.state = ar::StepState::decided;
  decided.verdict = ar::Verdict::relaunch;
  REQUIRE(store.save(decided, std::nullopt));
  CHECK(store.register_step(step(7, "r", 1), 1000) == ar::Store::Insert::created);
  CHECK(store.register_step(step(7, "r", 3), 1000) == ar::Store::Insert::capped);
  CHECK(store.register_step(step(8, "x", 1), 1000) == ar::Store::Insert::capped);
}

TEST_CASE("a user past max_user_steps_per_hour is refused a new step in any job", "[store][caps]") {
  TempDir dir;
  ar::test::ManualClock clock;
  ar::Store store(dir.path, clock, {0, 2, 0});
  CHECK(store.register_step(step(7, "a", 0), 1000) == ar::Store::Insert::created);
  CHECK(store.register_step(step(8, "b", 0), 1000) == ar::Store::Insert::created);
  std::string why;
  CHECK(store.register_step(step(9, "c", 0), 1000, nullptr, &why) == ar::Store::Insert::capped);
  CHECK(why ==
        "uid 1000 registered 2 protected steps within the last hour (max_user_steps_per_hour=2)");
  CHECK(store.register_step(step(9, "c", 0), 1001) == ar::Store::Insert::created);  // another user
  CHECK(details_of(store, "step_refused").size() == 1);
}

TEST_CASE("a store at max_store_mb refuses new steps and says so once an hour", "[store][caps]") {
  TempDir dir;
  ar::test::ManualClock clock;
  ar::Store store(dir.path, clock, {0, 0, 1});  // a byte: any store holds more
  CHECK(store.used_bytes() > 0);
  std::string why;
  CHECK(store.register_step(step(7, "a", 0), 1000, nullptr, &why) == ar::Store::Insert::capped);
  CHECK(why.starts_with("the controller's store holds 0 MiB, at max_store_mb=0 (decided steps"));
  CHECK(store.register_step(step(8, "b", 0), 1001) == ar::Store::Insert::capped);
  CHECK(details_of(store, "step_refused").size() == 1);
  clock.advance(std::chrono::seconds{3600});
  CHECK(store.register_step(step(8, "b", 0), 1001) == ar::Store::Insert::capped);
  CHECK(details_of(store, "step_refused").size() == 2);
  // An attempt number with no relaunch before it is no relaunch.
  CHECK(store.register_step(step(9, "z", 1), 1000) == ar::Store::Insert::capped);
}

TEST_CASE(
    "a decided step's argv (its program's name aside) and cwd are forgotten, a running one's "
    "kept",
    "[store][caps]") {
  TempDir dir;
  ar::Store store(dir.path);
  REQUIRE(store.register_step(step(7, "a", 0), 1000) == ar::Store::Insert::created);
  REQUIRE(store.register_step(step(8, "b", 0), 1000) == ar::Store::Insert::created);
  REQUIRE(store.cancel(*store.find("a", 0), "ended"));
  CHECK(store.find("a", 0)->step.argv == std::vector<std::string>{"srun"});
  CHECK(store.find("a", 0)->step.cwd.empty());
  CHECK(store.find("b", 0)->step.argv ==
        std::vector<std::string>{"srun", "--auto-resume=1", "a b"});
  CHECK(store.find("b", 0)->step.cwd == "/w");
}
