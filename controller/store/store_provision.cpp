// Continuous provisioning's state: its JSON, saved with its events and the
// instances' metering records, and those records read back.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "autoresume/text.hpp"
#include "store/store.hpp"
#include "store/store_detail.hpp"

namespace ar {

using namespace store_detail;  // NOLINT: the store's own helpers

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
