// Events: recording a step's, a node's or the controller's event (kept for
// the event hook until its transaction commits), and reading them back.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "autoresume/text.hpp"
#include "store/store.hpp"
#include "store/store_detail.hpp"

namespace ar {

using namespace store_detail;  // NOLINT: the store's own helpers

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

void Store::add_event(const StoredStep& step, const EventSpec& event) {
  std::lock_guard lock(mutex_);
  transaction([&] { insert_event(clock_.unix_now(), step, event); });
}

void Store::add_node_event(const std::string& node, const EventSpec& event, std::uint32_t job_id) {
  std::lock_guard lock(mutex_);
  transaction([&] { insert_node_event(clock_.unix_now(), node, job_id, event); });
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

}  // namespace ar
