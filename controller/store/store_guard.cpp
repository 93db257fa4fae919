// The guard rails' state (controller/gate.hpp): the flags kept across
// restarts (a pause, a tripped breaker) and the actions the breaker counts.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "store/store.hpp"
#include "store/store_detail.hpp"

namespace ar {

using namespace store_detail;  // NOLINT: the store's own helpers

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
