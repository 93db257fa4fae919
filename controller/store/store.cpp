#include "store/store.hpp"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <stdexcept>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "autoresume/text.hpp"
#include "store/step_moves.hpp"

namespace ar {

namespace {

// Steps hold every user's command lines: the folder is the controller's
// alone. A missing one is created with mode 700 (mkdir: one that appears
// meanwhile is checked as any other). An existing one must be a directory,
// not a symlink, of this uid that no one else may write to (it is then
// made 700); a shared one (/tmp, mode 1777), another user's or a symlink
// (which someone could have planted in a shared parent) is refused and
// left as it is.
void prepare_state_dir(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT)
      throw std::runtime_error(fmt::format("state_dir {}: {}", dir.string(), std::strerror(errno)));
    if (dir.has_parent_path()) fs::create_directories(dir.parent_path());
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      throw std::runtime_error(fmt::format("state_dir {}: {}", dir.string(), std::strerror(errno)));
    if (lstat(dir.c_str(), &st) != 0)
      throw std::runtime_error(fmt::format("state_dir {}: {}", dir.string(), std::strerror(errno)));
  }
  if (S_ISLNK(st.st_mode))
    throw std::runtime_error(fmt::format(
        "state_dir {} is a symbolic link: give the controller a directory of its own (a missing "
        "one is created with mode 700)",
        dir.string()));
  if (!S_ISDIR(st.st_mode))
    throw std::runtime_error(fmt::format("state_dir {} is not a directory", dir.string()));
  if (st.st_uid != geteuid())
    throw std::runtime_error(fmt::format(
        "state_dir {} belongs to uid {}, not to this controller's uid {}: give the controller a "
        "directory of its own (a missing one is created with mode 700)",
        dir.string(), st.st_uid, geteuid()));
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    throw std::runtime_error(fmt::format(
        "state_dir {} may be written by others (mode {:o}): give the controller a directory of "
        "its own (a missing one is created with mode 700)",
        dir.string(), st.st_mode & 07777));
  if ((st.st_mode & 07777) != 0700 && chmod(dir.c_str(), 0700) != 0)
    throw std::runtime_error(fmt::format("state_dir {}: {}", dir.string(), std::strerror(errno)));
}

// A name read back from the database, as its enum.
template <typename E>
E stored(const std::string& text, const char* what) {
  if (const auto value = parse_name<E>(text)) return *value;
  throw std::runtime_error("the state database holds an unknown " + std::string(what) + " '" +
                           text + "'");
}

std::string verdict_text(Verdict verdict) {
  return verdict == Verdict::none ? std::string() : std::string(to_string(verdict));
}

// One prepared statement for the scope, taken from the connection's idle
// ones (each SQL text is prepared once: a look reads every active step, and
// preparing was most of its time) and given back, reset, on scope exit. A
// text whose statements are all in use gets one more.
class Statement {
 public:
  using Idle = std::unordered_multimap<std::string, sqlite3_stmt*>;
  Statement(Idle& idle, sqlite3* db, const char* sql) : idle_(idle), db_(db), sql_(sql) {
    if (const auto it = idle_.find(sql_); it != idle_.end()) {
      stmt_ = it->second;
      idle_.erase(it);
      return;
    }
    if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr) != SQLITE_OK)
      throw std::runtime_error(std::string("sqlite prepare: ") + sqlite3_errmsg(db));
  }
  ~Statement() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    try {
      idle_.emplace(std::move(sql_), stmt_);
    } catch (...) {
      sqlite3_finalize(stmt_);  // no memory to keep it: prepared again next time
    }
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int index, std::int64_t value) {
    check(sqlite3_bind_int64(stmt_, index, value));
    return *this;
  }
  Statement& bind(int index, const std::string& value) {
    check(sqlite3_bind_text(stmt_, index, value.c_str(), static_cast<int>(value.size()),
                            SQLITE_TRANSIENT));
    return *this;
  }
  // True while there is a row.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw std::runtime_error(std::string("sqlite step: ") + sqlite3_errmsg(db_));
  }
  std::int64_t integer(int column) const { return sqlite3_column_int64(stmt_, column); }
  std::string text(int column) const {
    const auto* p = sqlite3_column_text(stmt_, column);
    return p == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(p));
  }

 private:
  void check(int rc) const {
    if (rc != SQLITE_OK)
      throw std::runtime_error(std::string("sqlite bind: ") + sqlite3_errmsg(db_));
  }
  Idle& idle_;
  sqlite3* db_;
  std::string sql_;
  sqlite3_stmt* stmt_ = nullptr;
};

constexpr const char* kStepColumns =
    "run_id, attempt, job_id, step_id, uid, argv, cwd, nodelist, state, created_at, ended_at,"
    " verdict, message, phase, repair, rowid, created_boot_ms, created_boot_id, ended_boot_ms,"
    " ended_boot_id, min_nodes, hang_timeout, hang_signal";
// The window the caps on registrations count in, and their refusals are
// said once in (seconds).
constexpr std::int64_t kCapWindow = 3600;
// PRAGMA user_version of the current schema.
constexpr int kSchemaVersion = 10;

StoredStep read_step(const Statement& s, Store::ParsedRows* cache = nullptr) {
  StoredStep out;
  out.step.run_id = s.text(0);
  out.step.attempt = static_cast<std::uint32_t>(s.integer(1));
  out.step.job_id = static_cast<std::uint32_t>(s.integer(2));
  out.step.step_id = static_cast<std::uint32_t>(s.integer(3));
  out.uid = static_cast<uid_t>(s.integer(4));
  const auto row = s.integer(15);
  auto argv_text = s.text(5);
  auto repair_text = s.text(14);
  const Store::ParsedRow* known = nullptr;
  if (cache != nullptr)
    if (const auto it = cache->find(row); it != cache->end() && it->second.argv_text == argv_text &&
                                          it->second.repair_text == repair_text)
      known = &it->second;
  if (known != nullptr) {
    out.step.argv = known->argv;
    out.repair = known->repair;
  } else {
    out.step.argv = proto::json::parse(argv_text).get<std::vector<std::string>>();
    out.repair = repair_facts_from_json(proto::json::parse(repair_text));
    if (cache != nullptr)
      (*cache)[row] = {std::move(argv_text), out.step.argv, std::move(repair_text), out.repair};
  }
  out.step.cwd = s.text(6);
  out.step.nodelist = s.text(7);
  out.state = stored<StepState>(s.text(8), "step state");
  out.created_at = s.integer(9);
  out.ended_at = s.integer(10);
  if (const auto verdict = s.text(11); !verdict.empty()) {
    const auto parsed = parse_verdict(verdict);
    if (!parsed)
      throw std::runtime_error("the state database holds an unknown verdict '" + verdict + "'");
    out.verdict = *parsed;
  }
  out.message = s.text(12);
  out.phase = stored<RepairPhase>(s.text(13), "repair phase");
  out.row = row;
  out.created_boot_ms = s.integer(16);
  out.created_boot_id = s.text(17);
  out.ended_boot_ms = s.integer(18);
  out.ended_boot_id = s.text(19);
  out.step.min_nodes = static_cast<std::uint32_t>(s.integer(20));
  // -1: auto; 0: off; else seconds.
  const auto hang = s.integer(21);
  out.step.hang_timeout = {hang > 0 ? static_cast<std::uint32_t>(hang) : 0U, hang < 0};
  out.step.hang_signal = static_cast<std::uint32_t>(s.integer(22));
  return out;
}

}  // namespace

Store::StateLock::StateLock(const std::filesystem::path& state_dir) {
  prepare_state_dir(state_dir);
  const auto file = state_dir / "lock";
  fd_.reset(::open(file.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd_.valid())
    throw std::runtime_error(
        fmt::format("cannot open {}: {}", file.string(), std::strerror(errno)));
  if (flock(fd_.get(), LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    char pid[32] = "";
    const auto n = ::pread(fd_.get(), pid, sizeof pid - 1, 0);
    fd_.reset(-1);
    if (error == EWOULDBLOCK)
      throw std::runtime_error(fmt::format(
          "state_dir {} is in use by another controller{}: one state serves one controller "
          "(two would undo each other's repairs)",
          state_dir.string(),
          n > 0 ? fmt::format(" (pid {})", std::string(pid, static_cast<std::size_t>(n)))
                : std::string()));
    throw std::runtime_error(
        fmt::format("cannot lock {}: {}", file.string(), std::strerror(error)));
  }
  const auto pid = std::to_string(getpid());
  if (::ftruncate(fd_.get(), 0) != 0 ||
      ::pwrite(fd_.get(), pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    // Only what the refusal of a second controller shows: not fatal.
  }
}

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

template <typename Body>
auto Store::transaction(Body&& body) {
  uncommitted_.clear();
  exec("BEGIN IMMEDIATE");
  const auto committed = [this] {
    if (hook_)
      for (const auto& [event, node_event] : uncommitted_) {
        try {
          hook_(event, node_event);
        } catch (const std::exception& e) {
          // Committed: the caller must not hear of a failure.
          fmt::print(stderr, "auto-resumed: the store's event hook failed: {}\n", e.what());
        }
      }
    uncommitted_.clear();
  };
  try {
    if constexpr (std::is_void_v<decltype(body())>) {
      body();
      exec("COMMIT");
      committed();
    } else {
      auto result = body();
      exec("COMMIT");
      committed();
      return result;
    }
  } catch (...) {
    uncommitted_.clear();
    // SQLite may have rolled back already (e.g. disk full); keep the first error.
    if (sqlite3_get_autocommit(db_) == 0) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

void Store::note(Event event, bool node_event) {
  event.detail = shortened(event.detail, kMaxDetailBytes);  // as stored
  uncommitted_.emplace_back(std::move(event), node_event);
}

void Store::insert_event(std::int64_t at, const StoredStep& step, const EventSpec& event) {
  Statement insert(idle_statements_, db_,
                   "INSERT INTO events (at, job_id, run_id, uid, kind, detail)"
                   " VALUES (?, ?, ?, ?, ?, ?)");
  insert.bind(1, at)
      .bind(2, step.step.job_id)
      .bind(3, step.step.run_id)
      .bind(4, static_cast<std::int64_t>(step.uid))
      .bind(5, std::string(name_of(event.kind)))
      .bind(6, shortened(event.detail, kMaxDetailBytes));
  insert.step();
  note({.job_id = step.step.job_id,
        .run_id = step.step.run_id,
        .kind = std::string(name_of(event.kind)),
        .detail = event.detail,
        .uid = step.uid},
       false);
}

void Store::insert_node_event(std::int64_t at, const std::string& node, std::uint32_t job_id,
                              const EventSpec& event, std::int64_t uid) {
  Statement insert(idle_statements_, db_,
                   "INSERT INTO events (at, job_id, run_id, uid, kind, detail, node)"
                   " VALUES (?, ?, '', ?, ?, ?, ?)");
  insert.bind(1, at)
      .bind(2, job_id)
      .bind(3, uid)
      .bind(4, std::string(name_of(event.kind)))
      .bind(5, shortened(event.detail, kMaxDetailBytes))
      .bind(6, node);
  insert.step();
  note({.job_id = job_id,
        .kind = std::string(name_of(event.kind)),
        .detail = event.detail,
        .node = node,
        .uid = uid},
       true);
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

std::optional<std::pair<std::string, std::string>> Store::over_cap(
    const proto::StepRegistration& step, uid_t uid, std::int64_t now) {
  // A relaunch (the attempt after one decided `relaunch`) is never refused:
  // the relaunch budget bounds those. Any other attempt number is a
  // request's word only, and counts as a first attempt.
  if (step.attempt > 0) {
    const auto before = find_locked(step.run_id, step.attempt - 1);
    if (before && before->state == StepState::decided && before->verdict == Verdict::relaunch)
      return std::nullopt;
  }
  auto since_hour = [&](const char* sql, std::int64_t key) {
    Statement count(idle_statements_, db_, sql);
    count.bind(1, key).bind(2, now - kCapWindow);
    count.step();
    return count.integer(0);
  };
  if (const auto cap = caps_.job_steps_per_hour; cap > 0) {
    const auto n =
        since_hour("SELECT COUNT(*) FROM steps WHERE job_id = ? AND created_at >= ?", step.job_id);
    if (n >= static_cast<std::int64_t>(cap))
      return std::pair{fmt::format("job {}", step.job_id),
                       fmt::format("job {} registered {} protected steps within the last hour "
                                   "(max_job_steps_per_hour={})",
                                   step.job_id, n, cap)};
  }
  if (const auto cap = caps_.user_steps_per_hour; cap > 0) {
    const auto n = since_hour("SELECT COUNT(*) FROM steps WHERE uid = ? AND created_at >= ?",
                              static_cast<std::int64_t>(uid));
    if (n >= static_cast<std::int64_t>(cap))
      return std::pair{fmt::format("uid {}", uid),
                       fmt::format("uid {} registered {} protected steps within the last hour "
                                   "(max_user_steps_per_hour={})",
                                   uid, n, cap)};
  }
  if (caps_.max_bytes > 0) {
    constexpr std::uint64_t kMiB = 1024 * 1024;
    if (const auto used = used_bytes_locked(); used >= caps_.max_bytes)
      return std::pair{
          std::string("store"),
          fmt::format("the controller's store holds {} MiB, at max_store_mb={} (decided steps "
                      "and events older than retention are pruned hourly)",
                      used / kMiB, caps_.max_bytes / kMiB)};
  }
  return std::nullopt;
}

Store::Insert Store::register_step(const proto::StepRegistration& step, uid_t uid,
                                   StoredStep* blocking, std::string* why) {
  std::lock_guard lock(mutex_);
  return transaction([&] {
    if (find_locked(step.run_id, step.attempt)) return Insert::duplicate;
    const auto stamp = clock_.stamp();
    const auto now = stamp.wall;
    if (const auto over = over_cap(step, uid, now)) {
      if (why != nullptr) *why = over->second;
      // Once an hour a cause: a refusal's event must not grow the store.
      if (refusals_said_.size() > 10'000) refusals_said_.clear();
      if (auto& said = refusals_said_[over->first]; said == 0 || now - said >= kCapWindow) {
        said = now;
        StoredStep refused;
        refused.step = step;
        refused.uid = uid;
        insert_event(now, refused,
                     {EventKind::step_refused,
                      fmt::format("step {}.{} refused: {}; more refusals for it within the hour "
                                  "are not recorded",
                                  step.job_id, step.step_id, over->second)});
      }
      return Insert::capped;
    }
    Statement other(idle_statements_, db_,
                    (std::string("SELECT ") + kStepColumns +
                     " FROM steps WHERE job_id = ? AND run_id != ? AND state != 'decided'"
                     " ORDER BY created_at LIMIT 1")
                        .c_str());
    other.bind(1, step.job_id).bind(2, step.run_id);
    if (other.step()) {
      if (blocking != nullptr) *blocking = read_step(other);
      return Insert::busy;
    }
    Statement insert(idle_statements_, db_,
                     "INSERT INTO steps (run_id, attempt, job_id, step_id, uid, argv, cwd,"
                     " nodelist, state, created_at, updated_at, created_boot_ms, created_boot_id,"
                     " min_nodes, hang_timeout, hang_signal) VALUES (?, ?, ?, ?, ?, ?, ?, ?,"
                     " 'registered', ?, ?, ?, ?, ?, ?, ?)");
    insert.bind(1, step.run_id)
        .bind(2, step.attempt)
        .bind(3, step.job_id)
        .bind(4, step.step_id)
        .bind(5, static_cast<std::int64_t>(uid))
        .bind(6, proto::json(step.argv).dump())
        .bind(7, step.cwd)
        .bind(8, step.nodelist)
        .bind(9, now)
        .bind(10, now)
        .bind(11, stamp.boot_ms)
        .bind(12, stamp.boot_id)
        .bind(13, step.min_nodes)
        .bind(14, step.hang_timeout.automatic ? std::int64_t{-1}
                                              : std::int64_t{step.hang_timeout.seconds})
        .bind(15, step.hang_signal);
    insert.step();
    StoredStep stored;
    stored.step = step;
    stored.uid = uid;
    insert_event(now, stored,
                 {EventKind::registered,
                  "step " + std::to_string(step.job_id) + "." + std::to_string(step.step_id) +
                      " attempt " + std::to_string(step.attempt) + " on " + step.nodelist});
    return Insert::created;
  });
}

bool Store::save(const StoredStep& step, const std::optional<EventSpec>& event) {
  std::lock_guard lock(mutex_);
  return transaction([&] {
    const auto current = find_locked(step.step.run_id, step.step.attempt);
    if (!current)
      throw std::runtime_error("no step " + step.step.run_id + " attempt " +
                               std::to_string(step.step.attempt) + " to update");
    if (current->state == StepState::decided) return false;
    // The step's moves table (step_moves.hpp) holds for what is stored
    // too: a copy older than the stored row (srun said the step ended
    // meanwhile) cannot take it back.
    if (const auto from = place_of(*current), to = place_of(step); !may_reach(from, to))
      throw std::logic_error(fmt::format("step {}: no move from {} (stored) to {}", step.key(),
                                         to_string(from), to_string(to)));
    const auto now = clock_.unix_now();
    Statement update(idle_statements_, db_,
                     "UPDATE steps SET state = ?, verdict = ?, message = ?, phase = ?, repair = ?,"
                     " ended_at = ?, updated_at = ?, ended_boot_ms = ?, ended_boot_id = ?"
                     " WHERE run_id = ? AND attempt = ?");
    update.bind(1, std::string(name_of(step.state)))
        .bind(2, verdict_text(step.verdict))
        .bind(3, shortened(step.message, kMaxDetailBytes))
        .bind(4, std::string(name_of(step.phase)))
        .bind(5, to_json(step.repair).dump(-1, ' ', false, proto::json::error_handler_t::replace))
        .bind(6, step.ended_at)
        .bind(7, now)
        .bind(8, step.ended_boot_ms)
        .bind(9, step.ended_boot_id)
        .bind(10, step.step.run_id)
        .bind(11, step.step.attempt);
    update.step();
    if (event) insert_event(now, step, *event);
    return true;
  });
}

bool Store::may_move_stored(const StoredStep& step, bool (*from)(StepState), StepState to) {
  auto stored = find_locked(step.step.run_id, step.step.attempt);
  if (!stored || !from(stored->state)) return false;
  move_to(*stored, to);  // throws for a move the table does not hold
  return true;
}

bool Store::mark_ended(const StoredStep& step, const Stamp& at, const EventSpec& event) {
  std::lock_guard lock(mutex_);
  return transaction([&] {
    if (!may_move_stored(
            step, [](StepState s) { return s == StepState::registered; }, StepState::ended))
      return false;
    Statement update(idle_statements_, db_,
                     "UPDATE steps SET state = 'ended', ended_at = ?, updated_at = ?,"
                     " ended_boot_ms = ?, ended_boot_id = ?"
                     " WHERE run_id = ? AND attempt = ? AND state = 'registered'");
    update.bind(1, at.wall)
        .bind(2, clock_.unix_now())
        .bind(3, at.boot_ms)
        .bind(4, at.boot_id)
        .bind(5, step.step.run_id)
        .bind(6, step.step.attempt);
    update.step();
    if (sqlite3_changes(db_) != 1) return false;
    insert_event(clock_.unix_now(), step, event);
    return true;
  });
}

bool Store::cancel(const StoredStep& step, const std::string& message) {
  return decide_stored(step, false, Verdict::cancelled, {EventKind::cancelled, message});
}

bool Store::no_fault_if_ended(const StoredStep& step, const std::string& message) {
  return decide_stored(step, true, Verdict::no_fault, {EventKind::no_fault, message});
}

bool Store::decide_stored(const StoredStep& step, bool ended_only, Verdict verdict,
                          const EventSpec& event) {
  std::lock_guard lock(mutex_);
  return transaction([&] {
    const auto from = ended_only ? +[](StepState s) { return s == StepState::ended; }
                                 : +[](StepState s) { return s != StepState::decided; };
    if (!may_move_stored(step, from, StepState::decided)) return false;
    Statement update(idle_statements_, db_,
                     ended_only ? "UPDATE steps SET state = 'decided', verdict = ?, message = ?,"
                                  " updated_at = ? WHERE run_id = ? AND attempt = ?"
                                  " AND state = 'ended'"
                                : "UPDATE steps SET state = 'decided', verdict = ?, message = ?,"
                                  " updated_at = ? WHERE run_id = ? AND attempt = ?"
                                  " AND state != 'decided'");
    update.bind(1, std::string(to_string(verdict)))
        .bind(2, shortened(event.detail, kMaxDetailBytes))
        .bind(3, clock_.unix_now())
        .bind(4, step.step.run_id)
        .bind(5, step.step.attempt);
    update.step();
    if (sqlite3_changes(db_) != 1) return false;
    insert_event(clock_.unix_now(), step, event);
    return true;
  });
}

void Store::add_event(const StoredStep& step, const EventSpec& event) {
  std::lock_guard lock(mutex_);
  transaction([&] { insert_event(clock_.unix_now(), step, event); });
}

std::optional<StoredStep> Store::find(const std::string& run_id, std::uint32_t attempt) {
  std::lock_guard lock(mutex_);
  return find_locked(run_id, attempt);
}

std::optional<StoredStep> Store::find_locked(const std::string& run_id, std::uint32_t attempt) {
  Statement s(
      idle_statements_, db_,
      (std::string("SELECT ") + kStepColumns + " FROM steps WHERE run_id = ? AND attempt = ?")
          .c_str());
  s.bind(1, run_id).bind(2, attempt);
  if (!s.step()) return std::nullopt;
  return read_step(s);
}

std::vector<StoredStep> Store::active_steps() {
  std::lock_guard lock(mutex_);
  // Nothing written on the connection (the store's only one) since the
  // last read: the same steps.
  const auto changes = sqlite3_total_changes64(db_);
  if (active_read_ && changes == active_changes_) return *active_read_;
  Statement s(idle_statements_, db_,
              (std::string("SELECT ") + kStepColumns +
               " FROM steps WHERE state != 'decided' ORDER BY created_at, rowid")
                  .c_str());
  std::vector<StoredStep> out;
  while (s.step()) out.push_back(read_step(s, &parsed_rows_));
  // Only the rows read now are kept.
  std::set<std::int64_t> rows;
  for (const auto& step : out) rows.insert(step.row);
  std::erase_if(parsed_rows_, [&](const auto& entry) { return !rows.contains(entry.first); });
  active_read_ = out;
  active_changes_ = changes;
  return out;
}

std::map<std::string, std::int64_t> Store::step_counts() {
  std::lock_guard lock(mutex_);
  Statement s(idle_statements_, db_, "SELECT state, COUNT(*) FROM steps GROUP BY state");
  std::map<std::string, std::int64_t> out;
  while (s.step()) out[s.text(0)] = s.integer(1);
  return out;
}

std::vector<StoredStep> Store::job_steps(std::uint32_t job_id) {
  std::lock_guard lock(mutex_);
  Statement s(idle_statements_, db_,
              (std::string("SELECT ") + kStepColumns +
               " FROM steps WHERE job_id = ? ORDER BY created_at, rowid")
                  .c_str());
  s.bind(1, job_id);
  std::vector<StoredStep> out;
  while (s.step()) out.push_back(read_step(s));
  return out;
}

std::optional<uid_t> Store::run_owner(const std::string& run_id) {
  std::lock_guard lock(mutex_);
  Statement s(idle_statements_, db_,
              "SELECT uid FROM steps WHERE run_id = ? ORDER BY attempt LIMIT 1");
  s.bind(1, run_id);
  if (!s.step()) return std::nullopt;
  return static_cast<uid_t>(s.integer(0));
}

std::vector<StoredStep> Store::steps(std::optional<uid_t> uid, std::optional<std::uint32_t> job_id,
                                     std::optional<std::int64_t> before, std::uint32_t limit) {
  std::lock_guard lock(mutex_);
  // Newest first by row: a row id only grows, so a cursor never skips or
  // repeats a step.
  Statement s(idle_statements_, db_,
              (std::string("SELECT ") + kStepColumns +
               " FROM steps WHERE (?1 < 0 OR uid = ?1) AND (?2 < 0 OR job_id = ?2)"
               " AND (?3 < 0 OR rowid < ?3) ORDER BY rowid DESC LIMIT ?4")
                  .c_str());
  s.bind(1, uid ? static_cast<std::int64_t>(*uid) : -1)
      .bind(2, job_id ? static_cast<std::int64_t>(*job_id) : -1)
      .bind(3, before.value_or(-1))
      .bind(4, static_cast<std::int64_t>(limit));
  std::vector<StoredStep> out;
  while (s.step()) out.push_back(read_step(s));
  return out;
}

std::vector<Event> Store::events(std::optional<uid_t> uid, std::int64_t since, std::int64_t after,
                                 std::uint32_t limit, const EventFilter& filter) {
  std::int64_t min_rank = 0;
  if (filter.level == "warning") min_rank = 1;
  if (filter.level == "error") min_rank = 2;
  std::lock_guard lock(mutex_);
  Statement s(idle_statements_, db_,
              "SELECT id, at, job_id, run_id, kind, detail, node, uid, group_name, level,"
              " resource FROM events"
              " WHERE (?1 < 0 OR uid = ?1) AND at >= ?2 AND id > ?3"
              " AND (?5 = '' OR group_name = ?5)"
              " AND (CASE level WHEN 'error' THEN 2 WHEN 'warning' THEN 1 ELSE 0 END) >= ?6"
              " ORDER BY id LIMIT ?4");
  s.bind(1, uid ? static_cast<std::int64_t>(*uid) : -1)
      .bind(2, since)
      .bind(3, after)
      .bind(4, static_cast<std::int64_t>(limit))
      .bind(5, filter.group)
      .bind(6, min_rank);
  std::vector<Event> out;
  while (s.step()) {
    Event e{s.integer(0), s.integer(1), static_cast<std::uint32_t>(s.integer(2)),
            s.text(3),    s.text(4),    s.text(5),
            s.text(6),    s.integer(7), s.text(8),
            s.text(9),    s.text(10)};
    if (e.resource.empty())
      e.resource = e.job_id != 0 ? "job" : !e.node.empty() ? "node" : "cluster";
    out.push_back(std::move(e));
  }
  return out;
}

namespace {

constexpr const char* kNodeRepairColumns =
    "node, state, reason, mode, instance, attempts, next_try, started_at, detail, called_at,"
    " requested_by, started_boot_ms, started_boot_id, next_try_boot_ms, next_try_boot_id";

NodeRepair read_node_repair(const Statement& s) {
  NodeRepair out;
  out.node = s.text(0);
  out.state = stored<NodeRepairState>(s.text(1), "node repair state");
  out.reason = s.text(2);
  out.mode = stored<RepairMode>(s.text(3), "repair mode");
  out.instance = s.integer(4);
  out.attempts = s.integer(5);
  out.next_try = s.integer(6);
  out.started_at = s.integer(7);
  out.detail = s.text(8);
  out.called_at = s.integer(9);
  out.requested_by = s.integer(10);
  out.started_boot_ms = s.integer(11);
  out.started_boot_id = s.text(12);
  out.next_try_boot_ms = s.integer(13);
  out.next_try_boot_id = s.text(14);
  return out;
}

}  // namespace

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

std::optional<NodeRepair> Store::node_repair(const std::string& node) {
  std::lock_guard lock(mutex_);
  Statement s(
      idle_statements_, db_,
      (std::string("SELECT ") + kNodeRepairColumns + " FROM node_repairs WHERE node = ?").c_str());
  s.bind(1, node);
  if (!s.step()) return std::nullopt;
  return read_node_repair(s);
}

std::vector<NodeRepair> Store::node_repairs() {
  std::lock_guard lock(mutex_);
  Statement s(
      idle_statements_, db_,
      (std::string("SELECT ") + kNodeRepairColumns + " FROM node_repairs ORDER BY started_at, node")
          .c_str());
  std::vector<NodeRepair> out;
  while (s.step()) out.push_back(read_node_repair(s));
  return out;
}

namespace {

void bind_node_repair(Statement& s, const NodeRepair& repair) {
  s.bind(1, repair.node)
      .bind(2, std::string(name_of(repair.state)))
      .bind(3, repair.reason)
      .bind(4, std::string(name_of(repair.mode)))
      .bind(5, repair.instance)
      .bind(6, repair.attempts)
      .bind(7, repair.next_try)
      .bind(8, repair.started_at)
      .bind(9, repair.detail)
      .bind(10, repair.called_at)
      .bind(11, repair.requested_by)
      .bind(12, repair.started_boot_ms)
      .bind(13, repair.started_boot_id)
      .bind(14, repair.next_try_boot_ms)
      .bind(15, repair.next_try_boot_id);
}

}  // namespace

void Store::save_node_repair(const NodeRepair& repair, const EventSpec& event) {
  std::lock_guard lock(mutex_);
  transaction([&] {
    Statement upsert(idle_statements_, db_,
                     (std::string("INSERT OR REPLACE INTO node_repairs (") + kNodeRepairColumns +
                      ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
                         .c_str());
    bind_node_repair(upsert, repair);
    upsert.step();
    insert_node_event(clock_.unix_now(), repair.node, 0, event, requester(repair));
  });
}

bool Store::add_node_repair(const NodeRepair& repair, const EventSpec& event) {
  std::lock_guard lock(mutex_);
  return transaction([&] {
    Statement insert(idle_statements_, db_,
                     (std::string("INSERT OR IGNORE INTO node_repairs (") + kNodeRepairColumns +
                      ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
                         .c_str());
    bind_node_repair(insert, repair);
    insert.step();
    if (sqlite3_changes(db_) != 1) return false;
    insert_node_event(clock_.unix_now(), repair.node, 0, event, requester(repair));
    return true;
  });
}

void Store::remove_node_repair(const std::string& node, const EventSpec& event) {
  std::lock_guard lock(mutex_);
  transaction([&] {
    std::int64_t uid = 0;
    Statement who(idle_statements_, db_, "SELECT requested_by FROM node_repairs WHERE node = ?");
    who.bind(1, node);
    if (who.step()) uid = std::max<std::int64_t>(who.integer(0), 0);
    Statement remove(idle_statements_, db_, "DELETE FROM node_repairs WHERE node = ?");
    remove.bind(1, node);
    remove.step();
    insert_node_event(clock_.unix_now(), node, 0, event, uid);
  });
}

void Store::add_node_event(const std::string& node, const EventSpec& event, std::uint32_t job_id) {
  std::lock_guard lock(mutex_);
  transaction([&] { insert_node_event(clock_.unix_now(), node, job_id, event); });
}

std::map<std::string, proto::json> Store::guard_flags() {
  std::lock_guard lock(mutex_);
  Statement s(idle_statements_, db_, "SELECT name, value FROM guard_flags");
  std::map<std::string, proto::json> out;
  while (s.step()) out[s.text(0)] = proto::json::parse(s.text(1));
  return out;
}

void Store::set_guard_flags(const GuardChanges& changes, const EventSpec& event) {
  std::lock_guard lock(mutex_);
  transaction([&] {
    for (const auto& [name, value] : changes) {
      if (value) {
        Statement upsert(idle_statements_, db_,
                         "INSERT OR REPLACE INTO guard_flags (name, value) VALUES (?, ?)");
        upsert.bind(1, name).bind(
            2, value->dump(-1, ' ', false, proto::json::error_handler_t::replace));
        upsert.step();
      } else {
        Statement remove(idle_statements_, db_, "DELETE FROM guard_flags WHERE name = ?");
        remove.bind(1, name);
        remove.step();
      }
    }
    insert_node_event(clock_.unix_now(), "", 0, event);
  });
}

void Store::count_actions(const std::string& kind, const std::vector<std::string>& nodes) {
  constexpr std::int64_t kKeep = 24 * 3600;
  std::lock_guard lock(mutex_);
  transaction([&] {
    const auto now = clock_.unix_now();
    for (const auto& node : nodes) {
      Statement insert(idle_statements_, db_,
                       "INSERT INTO guard_actions (at, kind, node) VALUES (?, ?, ?)");
      insert.bind(1, now).bind(2, kind).bind(3, node);
      insert.step();
    }
    Statement old(idle_statements_, db_, "DELETE FROM guard_actions WHERE at < ?");
    old.bind(1, now - kKeep);
    old.step();
  });
}

std::uint32_t Store::actions_since(const std::string& kind, std::int64_t since) {
  std::lock_guard lock(mutex_);
  Statement s(idle_statements_, db_,
              "SELECT COUNT(*) FROM guard_actions WHERE kind = ? AND at >= ?");
  s.bind(1, kind).bind(2, since);
  s.step();
  return static_cast<std::uint32_t>(s.integer(0));
}

void Store::settle_actions(const std::string& kind, const std::vector<std::string>& nodes) {
  std::lock_guard lock(mutex_);
  transaction([&] {
    for (const auto& node : nodes) {
      Statement settle(idle_statements_, db_,
                       "DELETE FROM guard_actions WHERE rowid = (SELECT rowid FROM guard_actions "
                       "WHERE kind = ? AND node = ? ORDER BY at DESC, rowid DESC LIMIT 1)");
      settle.bind(1, kind).bind(2, node);
      settle.step();
    }
  });
}

void Store::forget_actions() {
  std::lock_guard lock(mutex_);
  exec("DELETE FROM guard_actions");
}

}  // namespace ar

namespace ar {

std::optional<proto::json> Store::provision_state() {
  std::lock_guard lock(mutex_);
  Statement s(idle_statements_, db_, "SELECT state FROM provision_state WHERE id = 1");
  if (!s.step()) return std::nullopt;
  return proto::json::parse(s.text(0));
}

void Store::save_provision(const proto::json& state, const std::vector<ClusterEvent>& events,
                           const std::vector<InstanceRecord>& records) {
  std::lock_guard lock(mutex_);
  transaction([&] {
    Statement save(idle_statements_, db_,
                   "INSERT OR REPLACE INTO provision_state (id, state) VALUES (1, ?)");
    save.bind(1, state.dump());
    save.step();
    const auto at = clock_.unix_now();
    for (const auto& e : events) {
      Statement insert(idle_statements_, db_,
                       "INSERT INTO events (at, job_id, run_id, uid, kind, detail, node,"
                       " group_name, level, resource) VALUES (?, 0, '', 0, ?, ?, ?, ?, ?, ?)");
      insert.bind(1, at)
          .bind(2, e.kind)
          .bind(3, shortened(e.detail, kMaxDetailBytes))
          .bind(4, e.node)
          .bind(5, e.group)
          .bind(6, e.level)
          .bind(7, e.resource);
      insert.step();
      note({.kind = e.kind,
            .detail = e.detail,
            .node = e.node,
            .group = e.group,
            .level = e.level,
            .resource = e.resource},
           !e.node.empty());
    }
    for (const auto& r : records) {
      Statement upsert(idle_statements_, db_,
                       "INSERT OR REPLACE INTO instances (token, group_name, node, instance_id,"
                       " operation, requested, started, in_service, terminated, end_reason)"
                       " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
      upsert.bind(1, r.token)
          .bind(2, r.group)
          .bind(3, r.node)
          .bind(4, r.instance_id)
          .bind(5, static_cast<std::int64_t>(r.operation))
          .bind(6, r.requested)
          .bind(7, r.started)
          .bind(8, r.in_service)
          .bind(9, r.terminated)
          .bind(10, r.end_reason);
      upsert.step();
    }
  });
}

std::vector<InstanceRecord> Store::instance_records(const std::string& group, std::int64_t since) {
  std::lock_guard lock(mutex_);
  Statement s(idle_statements_, db_,
              "SELECT token, group_name, node, instance_id, operation, requested, started,"
              " in_service, terminated, end_reason FROM instances"
              " WHERE (?1 = '' OR group_name = ?1) AND (terminated = 0 OR terminated >= ?2)"
              " ORDER BY requested, token");
  s.bind(1, group).bind(2, since);
  std::vector<InstanceRecord> out;
  while (s.step())
    out.push_back({s.text(0), s.text(1), s.text(2), s.text(3),
                   static_cast<std::uint64_t>(s.integer(4)), s.integer(5), s.integer(6),
                   s.integer(7), s.integer(8), s.text(9)});
  return out;
}

}  // namespace ar
