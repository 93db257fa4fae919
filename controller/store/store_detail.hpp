#pragma once
// What the store's sources (store.cpp and store_*.cpp) share: the prepared
// statement, reading a stored name back as its enum, and Store::transaction.
// Private to store/.

#include <fmt/core.h>

#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "store/store.hpp"

namespace ar::store_detail {

// A name read back from the database, as its enum.
template <typename E>
E stored(const std::string& text, const char* what) {
  if (const auto value = parse_name<E>(text)) return *value;
  throw std::runtime_error("the state database holds an unknown " + std::string(what) + " '" +
                           text + "'");
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

}  // namespace ar::store_detail

namespace ar {

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

}  // namespace ar
