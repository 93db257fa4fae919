#pragma once
// A controller's store that cannot write, as on a full state disk: while a
// FullStore lives, triggers in the database refuse every insert, update and
// delete of the store's own connection (reads go on). Test-only: the store
// itself has no switch for it.

#include <fmt/core.h>
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

namespace ar::test {

class FullStore {
 public:
  explicit FullStore(const std::filesystem::path& state_dir) {
    const auto file = (state_dir / "auto-resume.db").string();
    REQUIRE(sqlite3_open(file.c_str(), &db_) == SQLITE_OK);
    sqlite3_busy_timeout(db_, 5000);
    std::string sql;
    for (const auto* table : kTables)
      for (const auto* what : {"INSERT", "UPDATE", "DELETE"})
        sql += fmt::format(
            "CREATE TRIGGER full_{0}_{1} BEFORE {1} ON {0} "
            "BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END;",
            table, what);
    exec(sql);
  }
  ~FullStore() {
    std::string sql;
    for (const auto* table : kTables)
      for (const auto* what : {"INSERT", "UPDATE", "DELETE"})
        sql += fmt::format("DROP TRIGGER IF EXISTS full_{}_{};", table, what);
    exec(sql);
    sqlite3_close(db_);
  }
  FullStore(const FullStore&) = delete;
  FullStore& operator=(const FullStore&) = delete;

 private:
  static constexpr const char* kTables[] = {"steps", "events", "node_repairs"};
  void exec(const std::string& sql) {
    char* error = nullptr;
    const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
    const std::string why = error != nullptr ? error : "";
    sqlite3_free(error);
    INFO(why);
    CHECK(rc == SQLITE_OK);
  }
  sqlite3* db_ = nullptr;
};

}  // namespace ar::test
