// Protected steps: registration (with the caps on it), the moves of a
// stored step (save, mark_ended, cancel, decide) and the reads of steps.
#include <fmt/core.h>

#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "autoresume/text.hpp"
#include "store/step_moves.hpp"
#include "store/store.hpp"
#include "store/store_detail.hpp"

namespace ar {

using namespace store_detail;  // NOLINT: the store's own helpers

namespace {

std::string verdict_text(Verdict verdict) {
  return verdict == Verdict::none ? std::string() : std::string(to_string(verdict));
}

constexpr const char* kStepColumns =
    "run_id, attempt, job_id, step_id, uid, argv, cwd, nodelist, state, created_at, ended_at,"
    " verdict, message, phase, repair, rowid, created_boot_ms, created_boot_id, ended_boot_ms,"
    " ended_boot_id, min_nodes, hang_timeout, hang_signal";
// The window the caps on registrations count in, and their refusals are
// said once in (seconds).
constexpr std::int64_t kCapWindow = 3600;

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

}  // namespace ar
