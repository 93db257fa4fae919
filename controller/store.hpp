#pragma once
// The controller's durable state in SQLite (WAL): every accepted step and
// every event is committed before the request that caused it is answered,
// so a controller killed at any moment restarts with all of it.

#include <sqlite3.h>
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "autoresume/protocol.hpp"

namespace ar {

struct StoredStep {
  proto::StepRegistration step;
  uid_t uid = 0;
  std::string state;
  std::int64_t created_at = 0;  // unix seconds
};

struct Event {
  std::int64_t id = 0;
  std::int64_t at = 0;  // unix seconds
  std::uint32_t job_id = 0;
  std::string run_id;
  std::string kind;
  std::string detail;
};

class Store {
 public:
  // Opens (creating if needed) DIR/auto-resume.db. Throws std::runtime_error.
  explicit Store(const std::filesystem::path& state_dir);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  enum class Insert { created, duplicate };
  // Records a step with state "registered" and a "registered" event, in one
  // transaction. The same (run_id, attempt) again is a duplicate and changes
  // nothing.
  Insert register_step(const proto::StepRegistration& step, uid_t uid);

  std::optional<StoredStep> find(const std::string& run_id, std::uint32_t attempt);
  // The uid that registered run_id first, if any.
  std::optional<uid_t> run_owner(const std::string& run_id);
  // Steps, newest first; only those of `uid` unless it is nullopt.
  std::vector<StoredStep> steps(std::optional<uid_t> uid);
  std::vector<Event> events(std::optional<uid_t> uid, std::int64_t since);

 private:
  sqlite3* db_ = nullptr;
  void exec(const char* sql);
};

}  // namespace ar
