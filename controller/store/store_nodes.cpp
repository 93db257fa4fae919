// Node replacements: a node's row in node_repairs, read, inserted, updated
// and removed, each change with its event.
#include <fmt/core.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "store/store.hpp"
#include "store/store_detail.hpp"

namespace ar {

using namespace store_detail;  // NOLINT: the store's own helpers

namespace {

constexpr const char* kNodeRepairColumns =
    "node, state, reason, mode, instance, attempts, next_try, started_at, detail, called_at,"
    " requested_by, started_boot_ms, started_boot_id, next_try_boot_ms, next_try_boot_id";
// The statements' text, made once (idle_statements_ keeps each prepared).
const std::string kSelectNode =
    fmt::format("SELECT {} FROM node_repairs WHERE node = ?", kNodeRepairColumns);
const std::string kSelectAll =
    fmt::format("SELECT {} FROM node_repairs ORDER BY started_at, node", kNodeRepairColumns);
const std::string kUpsert = fmt::format(
    "INSERT OR REPLACE INTO node_repairs ({}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    kNodeRepairColumns);
const std::string kInsert = fmt::format(
    "INSERT OR IGNORE INTO node_repairs ({}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    kNodeRepairColumns);

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

std::optional<NodeRepair> Store::node_repair(const std::string& node) {
  std::lock_guard lock(mutex_);
  Statement s(idle_statements_, db_, kSelectNode.c_str());
  s.bind(1, node);
  if (!s.step()) return std::nullopt;
  return read_node_repair(s);
}

std::vector<NodeRepair> Store::node_repairs() {
  std::lock_guard lock(mutex_);
  Statement s(idle_statements_, db_, kSelectAll.c_str());
  std::vector<NodeRepair> out;
  while (s.step()) out.push_back(read_node_repair(s));
  return out;
}

void Store::save_node_repair(const NodeRepair& repair, const EventSpec& event) {
  std::lock_guard lock(mutex_);
  transaction([&] {
    Statement upsert(idle_statements_, db_, kUpsert.c_str());
    bind_node_repair(upsert, repair);
    upsert.step();
    insert_node_event(clock_.unix_now(), repair.node, 0, event, requester(repair));
  });
}

bool Store::add_node_repair(const NodeRepair& repair, const EventSpec& event) {
  std::lock_guard lock(mutex_);
  return transaction([&] {
    Statement insert(idle_statements_, db_, kInsert.c_str());
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

}  // namespace ar
