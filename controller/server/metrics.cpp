#include "server/metrics.hpp"

#include <algorithm>
#include <array>
#include <system_error>

#include "autoresume/protocol.hpp"
#include "autoresume/states.hpp"
#include "autoresume/version.hpp"
#include "nodes/node_keeper.hpp"
#include "provision/provision.hpp"
#include "provision/provisioner.hpp"
#include "store/store.hpp"

namespace ar {

namespace {

constexpr std::array<std::string_view, 5> kVerdicts = {"relaunch", "requeued", "give_up",
                                                       "cancelled", "no_fault"};
constexpr std::array<std::string_view, 5> kProviderOps = {"replace", "create", "terminate", "list",
                                                          "slurmctld_restart"};

// The counters an event of `kind` moves besides auto_resume_events_total.
// A node's replacement ends with the kind "replaced", as does a step's
// failed node replaced within its repair: node_event tells them apart.
std::string_view counter_of(std::string_view kind, bool node_event) {
  if (kind == "marked") return "auto_resume_nodes_marked_total";
  if (kind == "replace_requested") return "auto_resume_node_replacements_requested_total";
  if (kind == "replaced" && node_event) return "auto_resume_nodes_replaced_total";
  if (kind == "replace_failed") return "auto_resume_node_replacements_failed_total";
  if (kind == "heartbeat_late") return "auto_resume_heartbeats_late_total";
  if (kind == "stalled") return "auto_resume_controller_stalls_total";
  if (kind == "hung") return "auto_resume_hangs_total";
  if (kind == "slurm_slow") return "auto_resume_slurmctld_slow_total";
  return {};
}

std::uintmax_t file_size_or_0(const std::filesystem::path& path) {
  std::error_code ignored;
  const auto size = std::filesystem::file_size(path, ignored);
  return ignored ? 0 : size;
}

}  // namespace

ControllerMetrics::ControllerMetrics() {
  auto& r = registry_;
  r.gauge("auto_resume_build_info", "The controller's version (the value is 1).", {"version"});
  r.set("auto_resume_build_info", {kVersion}, 1);
  r.counter("auto_resume_events_total", "Events recorded, by kind (auto-resume events).", {"kind"});
  r.counter("auto_resume_verdicts_total",
            "Protected steps decided, by verdict (relaunch: resumed in place).", {"verdict"});
  for (const auto verdict : kVerdicts)
    r.touch("auto_resume_verdicts_total", {std::string(verdict)});
  r.histogram("auto_resume_recovery_seconds",
              "Time from a protected step's fault to its next attempt running.",
              {5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600, 1200, 1800, 3600});
  r.histogram("auto_resume_look_seconds",
              "Time the resume engine's looks take (each decides on what it has and waits on no "
              "call but, 250 ms at most, its read of slurmctld: a fault found meanwhile waits at "
              "most this, beside the look's period).",
              {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10});
  r.counter("auto_resume_hangs_total",
            "Protected steps found hung: their tasks stopped beating (AUTO_RESUME_PROGRESS).");
  r.counter("auto_resume_failure_checks_total",
            "Protected steps that failed with no node at fault and whose nodes ran the quick "
            "checks, by outcome (failed: a node failed one and the step was repaired; passed).",
            {"outcome"});
  for (const auto* outcome : {"passed", "failed"})
    r.touch("auto_resume_failure_checks_total", {outcome});
  r.counter("auto_resume_nodes_marked_total",
            "Nodes the controller marked FAIL (silent node agents).");
  r.counter("auto_resume_node_replacements_requested_total",
            "Node replacements started (a node marked FAIL or DOWN, by anyone).");
  r.counter("auto_resume_nodes_replaced_total", "Nodes replaced by the provider.");
  r.counter("auto_resume_node_replacements_failed_total",
            "Node replacements given up (the provider failed every try).");
  r.counter("auto_resume_heartbeats_late_total", "Node agents' heartbeats found late.");
  r.counter("auto_resume_controller_stalls_total",
            "Times the controller's own loop stalled while node agents were heard (every heartbeat "
            "deadline restarted).");
  r.counter("auto_resume_slurmctld_slow_total",
            "Times slurmctld did not give the node list within 3 s or refused it (slurm_slow "
            "events; the controller went on with the last list meanwhile).");
  r.counter("auto_resume_requests_total", "Requests answered, by op and outcome.",
            {"op", "outcome"});
  r.counter("auto_resume_sessions_total",
            "Sessions asked for (a munge round trip each), by outcome (opened; refused: a "
            "connection limit; failed: not authenticated).",
            {"outcome"});
  for (const auto* outcome : {"opened", "refused", "failed"})
    r.touch("auto_resume_sessions_total", {outcome});
  r.counter("auto_resume_provider_calls_total",
            "Provider calls, by op and outcome (ok, failed: an exit status but 0, error: no "
            "exit status, as a timeout).",
            {"op", "outcome"});
  r.histogram("auto_resume_provider_call_seconds", "Provider calls' duration, by op.",
              {0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800}, {"op"});
  for (const auto op : kProviderOps) {
    r.touch("auto_resume_provider_calls_total", {std::string(op), "ok"});
    r.touch("auto_resume_provider_calls_total", {std::string(op), "failed"});
  }
  r.gauge("auto_resume_steps", "Protected steps kept in the store, by state.", {"state"});
  r.gauge("auto_resume_store_bytes", "Size of the state database (with its write-ahead log).");
  r.gauge("auto_resume_heartbeat_nodes", "Nodes whose agent was heard from.");
  r.gauge("auto_resume_nodes_silent",
          "Nodes whose agent was heard from but is silent past heartbeat_timeout.");
  r.gauge("auto_resume_node_replacements", "Node replacements in progress or failed.");
  r.gauge("auto_resume_breaker_tripped",
          "1 while the circuit breaker is tripped (the controller acts on nothing).");
  r.gauge("auto_resume_breaker_resets_in_seconds",
          "Seconds until a tripped breaker resets itself if nothing is held back meanwhile "
          "(breaker_reset_after); -1: only auto-resume resume-actions resets it; 0: not tripped.");
  r.gauge("auto_resume_group_target", "A node group's target count.", {"group"});
  r.gauge("auto_resume_group_live", "A node group's instances (starting, in service, leaving).",
          {"group"});
  r.gauge("auto_resume_group_in_service", "A node group's instances in service.", {"group"});
}

void ControllerMetrics::event(std::string_view kind, bool node_event) {
  registry_.add("auto_resume_events_total", {std::string(kind)});
  for (const auto verdict : kVerdicts)
    if (kind == verdict) registry_.add("auto_resume_verdicts_total", {std::string(kind)});
  if (const auto counter = counter_of(kind, node_event); !counter.empty()) registry_.add(counter);
  if (kind == "checked" || kind == "check_failed")
    registry_.add("auto_resume_failure_checks_total", {kind == "checked" ? "passed" : "failed"});
}

void ControllerMetrics::request(std::string_view op, std::string_view outcome) {
  const bool known = std::find(proto::kOps.begin(), proto::kOps.end(), op) != proto::kOps.end();
  registry_.add("auto_resume_requests_total",
                {known ? std::string(op) : "other", std::string(outcome)});
}

void ControllerMetrics::session(std::string_view outcome) {
  registry_.add("auto_resume_sessions_total", {std::string(outcome)});
}

void ControllerMetrics::provider_call(std::string_view op, std::string_view outcome,
                                      double seconds) {
  registry_.add("auto_resume_provider_calls_total", {std::string(op), std::string(outcome)});
  registry_.observe("auto_resume_provider_call_seconds", {std::string(op)}, seconds);
}

void ControllerMetrics::look(double seconds) {
  registry_.observe("auto_resume_look_seconds", {}, seconds);
}

void ControllerMetrics::recovered(double seconds) {
  registry_.observe("auto_resume_recovery_seconds", {}, seconds);
}

std::string ControllerMetrics::scrape(const Sources& sources) {
  std::lock_guard lock(scrape_mutex_);
  auto& r = registry_;
  if (sources.store != nullptr) {
    r.clear("auto_resume_steps");
    for (const auto state : name_tables::Table<StepState>::value)
      r.set("auto_resume_steps", {std::string(state)}, 0);
    for (const auto& [state, count] : sources.store->step_counts())
      r.set("auto_resume_steps", {state}, static_cast<double>(count));
    r.set("auto_resume_node_replacements", {},
          static_cast<double>(sources.store->node_repairs().size()));
  }
  if (!sources.state_dir.empty()) {
    const auto db = sources.state_dir / "auto-resume.db";
    r.set("auto_resume_store_bytes", {},
          static_cast<double>(file_size_or_0(db) + file_size_or_0(db.string() + "-wal")));
  }
  if (sources.keeper != nullptr) {
    const auto ages = sources.keeper->heartbeat_ages();
    const double timeout = std::chrono::duration<double>(sources.heartbeat_timeout).count();
    std::size_t silent = 0;
    for (const auto& [node, age] : ages)
      if (timeout > 0 && age > timeout) ++silent;
    r.set("auto_resume_heartbeat_nodes", {}, static_cast<double>(ages.size()));
    r.set("auto_resume_nodes_silent", {}, static_cast<double>(silent));
    const auto breaker = sources.keeper->gate().breaker();
    r.set("auto_resume_breaker_tripped", {}, breaker.tripped ? 1 : 0);
    r.set("auto_resume_breaker_resets_in_seconds", {}, static_cast<double>(breaker.resets_in));
  }
  if (sources.provisioner != nullptr) {
    for (const auto* name :
         {"auto_resume_group_target", "auto_resume_group_live", "auto_resume_group_in_service"})
      r.clear(name);
    for (const auto& group : sources.provisioner->state().groups) {
      const auto slots = provision::count_slots(group);
      r.set("auto_resume_group_target", {group.spec.name}, group.operation.count);
      r.set("auto_resume_group_live", {group.spec.name}, slots.live());
      r.set("auto_resume_group_in_service", {group.spec.name}, slots.in_service);
    }
  }
  return r.render();
}

CommandResult MeteredRunner::timed(const std::vector<std::string>& argv,
                                   const std::function<CommandResult()>& call) {
  const auto start = std::chrono::steady_clock::now();
  auto result = call();
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  const auto outcome = result.status == 0 ? "ok" : result.error.empty() ? "failed" : "error";
  metrics_.provider_call(op_of_(argv), outcome, took.count());
  return result;
}

CommandResult MeteredRunner::run(const std::vector<std::string>& argv,
                                 std::chrono::milliseconds timeout) {
  return timed(argv, [&] { return inner_.run(argv, timeout); });
}

CommandResult MeteredRunner::run_with_env(const std::vector<std::string>& argv,
                                          std::chrono::milliseconds timeout,
                                          const std::vector<std::string>& environment) {
  return timed(argv, [&] { return inner_.run_with_env(argv, timeout, environment); });
}

}  // namespace ar
