// Opening the state database: the schema and its migrations, running SQL
// text (exec), the bytes the data takes, and pruning. Steps, events, node
// replacements, the guard rails and provisioning each have a store_*.cpp.
#include "store/store.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "store/store_detail.hpp"

namespace ar {

using namespace store_detail;  // NOLINT: the store's own helpers

namespace {

// PRAGMA user_version of the current schema.
constexpr int kSchemaVersion = 10;

}  // namespace

Store::Store(const std::filesystem::path& state_dir, const Clock& clock, Caps caps)
    : clock_(clock), caps_(caps), lock_(state_dir) {
  const auto file = (state_dir / "auto-resume.db").string();
  if (sqlite3_open_v2(file.c_str(), &db_,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW,
                      nullptr) != SQLITE_OK) {
    const std::string why = db_ != nullptr ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw std::runtime_error("cannot open " + file + ": " + why);
  }
  sqlite3_busy_timeout(db_, 5000);
  exec("PRAGMA journal_mode=WAL");
  exec("PRAGMA synchronous=FULL");
  exec(
      "CREATE TABLE IF NOT EXISTS steps ("
      " run_id TEXT NOT NULL, attempt INTEGER NOT NULL, job_id INTEGER NOT NULL,"
      " step_id INTEGER NOT NULL, uid INTEGER NOT NULL, argv TEXT NOT NULL,"
      " cwd TEXT NOT NULL, nodelist TEXT NOT NULL, state TEXT NOT NULL,"
      " created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,"
      " ended_at INTEGER NOT NULL DEFAULT 0, verdict TEXT NOT NULL DEFAULT '',"
      " message TEXT NOT NULL DEFAULT '', phase TEXT NOT NULL DEFAULT '',"
      " repair TEXT NOT NULL DEFAULT '{}',"
      " created_boot_ms INTEGER NOT NULL DEFAULT 0, created_boot_id TEXT NOT NULL DEFAULT '',"
      " ended_boot_ms INTEGER NOT NULL DEFAULT 0, ended_boot_id TEXT NOT NULL DEFAULT '',"
      " min_nodes INTEGER NOT NULL DEFAULT 0, hang_timeout INTEGER NOT NULL DEFAULT 0,"
      " hang_signal INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (run_id, attempt));"
      "CREATE TABLE IF NOT EXISTS events ("
      " id INTEGER PRIMARY KEY AUTOINCREMENT, at INTEGER NOT NULL, job_id INTEGER NOT NULL,"
      " run_id TEXT NOT NULL, uid INTEGER NOT NULL, kind TEXT NOT NULL, detail TEXT NOT NULL,"
      " node TEXT NOT NULL DEFAULT '');"
      "CREATE TABLE IF NOT EXISTS node_repairs ("
      " node TEXT PRIMARY KEY, state TEXT NOT NULL, reason TEXT NOT NULL, mode TEXT NOT NULL,"
      " instance INTEGER NOT NULL, attempts INTEGER NOT NULL, next_try INTEGER NOT NULL,"
      " started_at INTEGER NOT NULL, detail TEXT NOT NULL, called_at INTEGER NOT NULL DEFAULT 0,"
      " requested_by INTEGER NOT NULL DEFAULT -1,"
      " started_boot_ms INTEGER NOT NULL DEFAULT 0, started_boot_id TEXT NOT NULL DEFAULT '',"
      " next_try_boot_ms INTEGER NOT NULL DEFAULT 0, next_try_boot_id TEXT NOT NULL DEFAULT '');");
  migrate();
}

void Store::migrate() {
  Statement version(idle_statements_, db_, "PRAGMA user_version");
  version.step();
  const auto current = version.integer(0);
  if (current > kSchemaVersion)
    throw std::runtime_error("the state database was written by a newer auto-resumed (schema " +
                             std::to_string(current) + ", this one knows " +
                             std::to_string(kSchemaVersion) + ")");
  if (current == kSchemaVersion) return;
  constexpr const char* kZero = "INTEGER NOT NULL DEFAULT 0";
  constexpr const char* kEmpty = "TEXT NOT NULL DEFAULT ''";
  // Schema 1 (and a new file) may lack the resume columns; schema 4 lacks
  // the boot times (an old row keeps empty boot ids: its wall time counts);
  // schema 6 the steps' min_nodes; schema 8 their hang options.
  std::vector<std::string> columns;
  Statement info(idle_statements_, db_, "PRAGMA table_info(steps)");
  while (info.step()) columns.push_back(info.text(1));
  const std::pair<const char*, const char*> added[] = {{"ended_at", "INTEGER NOT NULL DEFAULT 0"},
                                                       {"verdict", "TEXT NOT NULL DEFAULT ''"},
                                                       {"message", "TEXT NOT NULL DEFAULT ''"},
                                                       {"phase", "TEXT NOT NULL DEFAULT ''"},
                                                       {"repair", "TEXT NOT NULL DEFAULT '{}'"},
                                                       {"created_boot_ms", kZero},
                                                       {"created_boot_id", kEmpty},
                                                       {"ended_boot_ms", kZero},
                                                       {"ended_boot_id", kEmpty},
                                                       {"min_nodes", kZero},
                                                       {"hang_timeout", kZero},
                                                       {"hang_signal", kZero}};
  for (const auto& [name, type] : added)
    if (std::find(columns.begin(), columns.end(), name) == columns.end())
      exec(("ALTER TABLE steps ADD COLUMN " + std::string(name) + " " + type).c_str());
  // Schema 2 lacks the events' node; schema 7 their group, level and resource.
  std::vector<std::string> event_columns;
  Statement events(idle_statements_, db_, "PRAGMA table_info(events)");
  while (events.step()) event_columns.push_back(events.text(1));
  const std::pair<const char*, const char*> event_added[] = {
      {"node", kEmpty},
      {"group_name", kEmpty},
      {"level", "TEXT NOT NULL DEFAULT 'info'"},
      {"resource", kEmpty}};
  for (const auto& [name, type] : event_added)
    if (std::find(event_columns.begin(), event_columns.end(), name) == event_columns.end())
      exec(("ALTER TABLE events ADD COLUMN " + std::string(name) + " " + type).c_str());
  // Schema 3 may lack the provider's call time (added without a version of
  // its own), and lacks who requested a replacement; schema 4 the boot times.
  std::vector<std::string> repair_columns;
  Statement repairs(idle_statements_, db_, "PRAGMA table_info(node_repairs)");
  while (repairs.step()) repair_columns.push_back(repairs.text(1));
  const std::pair<const char*, const char*> repair_added[] = {
      {"called_at", kZero},        {"requested_by", "INTEGER NOT NULL DEFAULT -1"},
      {"started_boot_ms", kZero},  {"started_boot_id", kEmpty},
      {"next_try_boot_ms", kZero}, {"next_try_boot_id", kEmpty}};
  for (const auto& [name, type] : repair_added)
    if (std::find(repair_columns.begin(), repair_columns.end(), name) == repair_columns.end())
      exec(("ALTER TABLE node_repairs ADD COLUMN " + std::string(name) + " " + type).c_str());
  // Schema 5 and older lack the guard rails' flags and counted actions.
  exec(
      "CREATE TABLE IF NOT EXISTS guard_flags (name TEXT PRIMARY KEY, value TEXT NOT NULL);"
      "CREATE TABLE IF NOT EXISTS guard_actions ("
      " id INTEGER PRIMARY KEY AUTOINCREMENT, at INTEGER NOT NULL, kind TEXT NOT NULL,"
      " node TEXT NOT NULL);"
      "CREATE INDEX IF NOT EXISTS guard_actions_at ON guard_actions (kind, at);");
  // Schema 7 and older lack continuous provisioning's state and metering.
  exec(
      "CREATE TABLE IF NOT EXISTS provision_state ("
      " id INTEGER PRIMARY KEY CHECK (id = 1), state TEXT NOT NULL);"
      "CREATE TABLE IF NOT EXISTS instances ("
      " token TEXT PRIMARY KEY, group_name TEXT NOT NULL, node TEXT NOT NULL,"
      " instance_id TEXT NOT NULL, operation INTEGER NOT NULL, requested INTEGER NOT NULL,"
      " started INTEGER NOT NULL, in_service INTEGER NOT NULL, terminated INTEGER NOT NULL,"
      " end_reason TEXT NOT NULL);"
      "CREATE INDEX IF NOT EXISTS instances_group ON instances (group_name, requested);");
  // Schema 9 and older keep a decided step's argv and cwd, and lack the
  // indexes the caps on registrations count with. A decided step keeps its
  // program's name alone (at most 256 bytes; a step's argv is never empty
  // on the wire, for clients of every release).
  // The one forgetting, by the trigger for each step decided from now on
  // and once for the rows decided before.
  constexpr const char* kForget =
      "UPDATE steps SET argv = json_array(substr(json_extract(argv, '$[0]'), 1, 256)), cwd = ''";
  constexpr const char* kKept = "(json_array_length(argv) > 1 OR length(argv) > 300 OR cwd != '')";
  exec(fmt::format("CREATE TRIGGER IF NOT EXISTS decided_steps_forget_argv AFTER UPDATE OF state"
                   " ON steps WHEN NEW.state = 'decided' BEGIN {} WHERE run_id = NEW.run_id AND"
                   " attempt = NEW.attempt AND {}; END;"
                   "{} WHERE state = 'decided' AND {};",
                   kForget, kKept, kForget, kKept)
           .c_str());
  exec(
      "CREATE INDEX IF NOT EXISTS steps_job_created ON steps (job_id, created_at);"
      "CREATE INDEX IF NOT EXISTS steps_uid_created ON steps (uid, created_at);");
  exec(("PRAGMA user_version = " + std::to_string(kSchemaVersion)).c_str());
}

Store::~Store() {
  for (const auto& [sql, stmt] : idle_statements_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

void Store::exec(const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    const std::string why = error != nullptr ? error : "unknown error";
    sqlite3_free(error);
    throw std::runtime_error("sqlite: " + why);
  }
}

std::uint64_t Store::used_bytes() {
  std::lock_guard lock(mutex_);
  return used_bytes_locked();
}

std::uint64_t Store::used_bytes_locked() {
  auto pragma = [&](const char* sql) {
    Statement s(idle_statements_, db_, sql);
    s.step();
    return static_cast<std::uint64_t>(s.integer(0));
  };
  const auto pages = pragma("PRAGMA page_count");
  const auto free = pragma("PRAGMA freelist_count");
  return (pages > free ? pages - free : 0) * pragma("PRAGMA page_size");
}

std::size_t Store::prune(std::int64_t cutoff) {
  std::lock_guard lock(mutex_);
  return transaction([&] {
    Statement steps(idle_statements_, db_,
                    "DELETE FROM steps WHERE state = 'decided' AND updated_at < ?");
    steps.bind(1, cutoff);
    steps.step();
    auto gone = static_cast<std::size_t>(sqlite3_changes(db_));
    Statement events(idle_statements_, db_, "DELETE FROM events WHERE at < ?");
    events.bind(1, cutoff);
    events.step();
    gone += static_cast<std::size_t>(sqlite3_changes(db_));
    return gone;
  });
}

}  // namespace ar
