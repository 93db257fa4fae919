#include "gate.hpp"

#include <fmt/chrono.h>
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <string_view>

#include "autoresume/text.hpp"
#include "log.hpp"

namespace ar {

namespace {

constexpr const char* kPaused = "paused";
constexpr const char* kTripped = "tripped";
constexpr std::int64_t kHour = 3600;

const char* name_of(Gate::Counted kind) {
  return kind == Gate::Counted::mark ? "mark" : "replacement";
}

const char* setting_of(Gate::Counted kind) {
  return kind == Gate::Counted::mark ? "max_marks_per_hour" : "max_replacements_per_hour";
}

std::string utc(std::int64_t unix_seconds) {
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}Z",
                     std::chrono::sys_seconds(std::chrono::seconds(unix_seconds)));
}

// At most a few names: a breaker's detail is shown in every status reply.
std::string listed(const std::vector<std::string>& nodes) {
  constexpr std::size_t kShown = 8;
  if (nodes.size() <= kShown) return join(nodes, ", ");
  return join(std::vector<std::string>(nodes.begin(), nodes.begin() + kShown), ", ") +
         fmt::format(" and {} more", nodes.size() - kShown);
}

std::string step_key(const StoredStep& step) { return "step " + step.key(); }

}  // namespace

const char* Gate::still_holds(const char* lifted, const char* acts) const {
  if (config_.mode == ActionMode::observe) return " (mode=observe still holds)";
  if (std::string_view(lifted) != kTripped && flags_.contains(kTripped))
    return " (the circuit breaker still holds)";
  if (std::string_view(lifted) != kPaused && flags_.contains(kPaused))
    return " (the pause still holds)";
  return acts;
}

std::string held_advice(const std::string& why) {
  if (why == "paused") return "the controller is paused until auto-resume unpause";
  if (why == "breaker") return "the circuit breaker is tripped until auto-resume resume-actions";
  return "mode=observe in the controller's configuration";
}

Gate::Gate(Store& store, const DaemonConfig& config, const Clock& clock)
    : store_(store), config_(config), clock_(clock), flags_(store.guard_flags()) {
  if (config_.mode == ActionMode::observe)
    log::info(
        "mode=observe: the controller marks, shrinks, requeues, relaunches and replaces nothing, "
        "and says what it would do");
  if (const auto it = flags_.find(kPaused); it != flags_.end())
    log::warn("paused since {} by uid {}: the controller acts on nothing until auto-resume unpause",
              utc(it->second.value("at", 0)), it->second.value("uid", 0));
  if (const auto it = flags_.find(kTripped); it != flags_.end())
    log::warn("the circuit breaker is tripped: {}", it->second.value("detail", std::string()));
}

std::optional<std::string> Gate::held_locked() const {
  if (config_.mode == ActionMode::observe) return "observe";
  if (flags_.contains(kPaused)) return "paused";
  if (flags_.contains(kTripped)) return "breaker";
  return std::nullopt;
}

std::optional<std::string> Gate::held() {
  std::lock_guard lock(mutex_);
  expire_locked();
  return held_locked();
}

std::optional<std::int64_t> Gate::resets_at_locked() const {
  const auto it = flags_.find(kTripped);
  if (it == flags_.end() || config_.breaker_reset_after.count() == 0) return std::nullopt;
  const auto quiet_since = std::max(last_held_, it->second.value("at", std::int64_t{0}));
  return quiet_since + config_.breaker_reset_after.count() / 1000;
}

void Gate::expire_locked() {
  const auto at = resets_at_locked();
  if (!at || clock_.unix_now() < *at) return;
  const auto after = config_.breaker_reset_after.count() / 1000;
  const auto detail = fmt::format(
      "the circuit breaker reset itself: nothing was held back for breaker_reset_after={} s; the "
      "counts start again from 0{}",
      after, still_holds(kTripped, "; the controller acts again"));
  log::warn("breaker: {}", detail);
  store_.forget_actions();
  change({{kTripped, std::nullopt}}, EventKind::actions_resumed, 0, detail);
}

std::uint32_t Gate::counted(Counted kind) {
  return store_.actions_since(name_of(kind), clock_.unix_now() - kHour);
}

unsigned Gate::limit(Counted kind) const {
  const auto& setting =
      kind == Counted::mark ? config_.max_marks_per_hour : config_.max_replacements_per_hour;
  return setting.of(nodes_);
}

bool Gate::allow(Counted kind, const std::vector<std::string>& nodes) {
  std::lock_guard lock(mutex_);
  expire_locked();
  if (const auto why = held_locked()) {
    if (*why == "breaker") last_held_ = clock_.unix_now();
    return false;
  }
  if (nodes.empty()) return true;
  const auto done = counted(kind);
  if (done + nodes.size() > limit(kind)) {
    trip(kind, done, nodes);
    return false;
  }
  store_.count_actions(name_of(kind), nodes);
  return true;
}

void Gate::settled(Counted kind, const std::vector<std::string>& nodes) {
  if (nodes.empty()) return;
  std::lock_guard lock(mutex_);
  store_.settle_actions(name_of(kind), nodes);
}

void Gate::trip(Counted kind, std::uint32_t done, const std::vector<std::string>& nodes) {
  const auto& setting =
      kind == Counted::mark ? config_.max_marks_per_hour : config_.max_replacements_per_hour;
  const auto reset = config_.breaker_reset_after.count() / 1000;
  const auto detail = fmt::format(
      "the circuit breaker tripped on node {}s: {} within the last hour whose repair has not "
      "succeeded and {} more now ({}) would pass {}={}{}; the controller acts on nothing until "
      "auto-resume resume-actions{}",
      name_of(kind), done, nodes.size(), listed(nodes), setting_of(kind), setting.str(),
      setting.percent ? fmt::format(" ({} of {} nodes)", limit(kind), nodes_) : "",
      reset > 0 ? fmt::format(
                      ", or by itself after breaker_reset_after={} s with nothing held back", reset)
                : "");
  last_held_ = clock_.unix_now();
  log::warn("breaker: {}", detail);
  change(
      {{kTripped,
        proto::json{{"limit", setting_of(kind)}, {"at", clock_.unix_now()}, {"detail", detail}}}},
      EventKind::breaker_tripped, 0, detail);
}

void Gate::change(const Store::GuardChanges& changes, EventKind kind, uid_t by,
                  const std::string& detail) {
  store_.set_guard_flags(changes, {kind, detail});
  for (const auto& [flag, value] : changes) {
    if (value)
      flags_[flag] = *value;
    else
      flags_.erase(flag);
  }
  said_.clear();
  log::audit({by, std::string(ar::name_of(kind)), ""}, ar::name_of(kind), detail);
}

void Gate::would(const StoredStep& step, const std::string& episode, const std::string& what) {
  std::lock_guard lock(mutex_);
  if (!said_.say(step_key(step), episode)) return;
  const auto why = held_locked().value_or("observe");
  log::info("{}: would {} (job {}, run {})", why, what, step.step.job_id,
            printable(step.step.run_id));
  store_.add_event(step, {EventKind::would, fmt::format("{}: would {}", why, what)});
}

void Gate::would(const std::string& scope, const std::string& node, const std::string& what) {
  std::lock_guard lock(mutex_);
  if (!said_.say(scope + " " + node, what)) return;
  const auto why = held_locked().value_or("observe");
  log::info("{}: would {}", why, what);
  store_.add_node_event(node, {EventKind::would, fmt::format("{}: would {}", why, what)});
}

void Gate::settle(const std::string& scope, const std::set<std::string>& current) {
  std::lock_guard lock(mutex_);
  const auto prefix = scope + " ";
  said_.forget_if([&](const std::string& key) {
    return key.starts_with(prefix) && !current.contains(key.substr(prefix.size()));
  });
}

void Gate::settle(const StoredStep& step) {
  std::lock_guard lock(mutex_);
  said_.forget(step_key(step));
}

void Gate::set_cluster_size(std::size_t nodes) {
  std::lock_guard lock(mutex_);
  nodes_ = nodes;
}

std::string Gate::pause(uid_t by, const std::string& reason) {
  std::lock_guard lock(mutex_);
  if (const auto it = flags_.find(kPaused); it != flags_.end())
    return fmt::format("paused already, since {} by uid {}", utc(it->second.value("at", 0)),
                       it->second.value("uid", 0));
  const auto detail =
      fmt::format("paused by uid {}{}: the controller acts on nothing until auto-resume unpause",
                  by, reason.empty() ? "" : " (" + reason + ")");
  change({{kPaused, proto::json{{"uid", by}, {"at", clock_.unix_now()}, {"reason", reason}}}},
         EventKind::paused, by, detail);
  return detail;
}

std::string Gate::unpause(uid_t by) {
  std::lock_guard lock(mutex_);
  if (!flags_.contains(kPaused)) return "not paused";
  const auto detail =
      fmt::format("unpaused by uid {}{}", by, still_holds(kPaused, ": the controller acts again"));
  change({{kPaused, std::nullopt}}, EventKind::unpaused, by, detail);
  return detail;
}

std::string Gate::resume_actions(uid_t by) {
  std::lock_guard lock(mutex_);
  if (!flags_.contains(kTripped)) return "the circuit breaker is not tripped";
  const auto detail =
      fmt::format("the circuit breaker was reset by uid {}: the counts start again from 0{}", by,
                  still_holds(kTripped, "; the controller acts again"));
  store_.forget_actions();
  change({{kTripped, std::nullopt}}, EventKind::actions_resumed, by, detail);
  return detail;
}

Gate::Breaker Gate::breaker() {
  std::lock_guard lock(mutex_);
  expire_locked();
  if (!flags_.contains(kTripped)) return {};
  const auto at = resets_at_locked();
  if (!at) return {true, -1};
  return {true, std::max<std::int64_t>(*at - clock_.unix_now(), 0)};
}

proto::GuardState Gate::state() {
  std::lock_guard lock(mutex_);
  expire_locked();
  proto::GuardState out;
  out.mode = std::string(to_string(config_.mode));
  if (const auto it = flags_.find(kPaused); it != flags_.end()) {
    out.paused = true;
    const auto reason = it->second.value("reason", std::string());
    out.paused_detail =
        fmt::format("by uid {} since {}{}", it->second.value("uid", 0),
                    utc(it->second.value("at", 0)), reason.empty() ? "" : ": " + reason);
  }
  if (const auto it = flags_.find(kTripped); it != flags_.end()) {
    out.tripped = true;
    out.tripped_detail = it->second.value("detail", std::string());
  }
  out.marks = counted(Counted::mark);
  out.max_marks = limit(Counted::mark);
  out.replacements = counted(Counted::replacement);
  out.max_replacements = limit(Counted::replacement);
  return out;
}

}  // namespace ar
