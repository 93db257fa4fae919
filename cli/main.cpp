// auto-resume: the command line tool for users and admins.

#include <fmt/chrono.h>
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "autoresume/client.hpp"
#include "autoresume/daemon_config.hpp"
#include "autoresume/keyvalue.hpp"
#include "autoresume/protocol.hpp"
#include "autoresume/text.hpp"
#include "autoresume/version.hpp"

namespace {

namespace proto = ar::proto;

std::string env_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

std::string format_time(std::int64_t unix_seconds) {
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}Z",
                     std::chrono::sys_seconds(std::chrono::seconds(unix_seconds)));
}

void print_hello(const proto::HelloReply& reply, const ar::Endpoint& endpoint) {
  fmt::print("auto-resumed {} at {} (protocol {}), you are uid {}\n", reply.version, endpoint.str(),
             reply.protocol, reply.uid);
}

// One line of the controller's words, its control characters escaped: run
// ids, command lines and reasons are chosen by users.
void line(std::FILE* to, const std::string& text) { fmt::print(to, "{}\n", ar::printable(text)); }

void print_steps(const proto::StatusReply& reply) {
  if (reply.steps.empty()) {
    fmt::print("no protected steps\n");
    return;
  }
  fmt::print("{:<10} {:<6} {:<24} {:>7} {:<12} {:<7} {:<20} {}\n", "JOB", "STEP", "RUN", "ATTEMPT",
             "STATE", "UID", "REGISTERED", "NODES");
  // A decided step shows its verdict; a repair, how far it got.
  auto state = [](const proto::StatusReply::Step& s) {
    const auto plain = std::string(ar::name_of(s.state));
    if (s.state == ar::StepState::decided)
      return s.verdict == ar::Verdict::none ? plain : std::string(ar::to_string(s.verdict));
    return s.phase == ar::RepairPhase::none ? plain
                                            : plain + ":" + std::string(ar::name_of(s.phase));
  };
  for (const auto& s : reply.steps)
    line(stdout, fmt::format("{:<10} {:<6} {:<24} {:>7} {:<12} {:<7} {:<20} {}", s.step.job_id,
                             s.step.step_id, s.step.run_id, s.step.attempt, state(s), s.uid,
                             format_time(s.created_at), s.step.nodelist));
}

// Whether the controller acts: its mode, a pause, the circuit breaker.
void print_guard(const proto::GuardState& g) {
  line(stdout, fmt::format("controller: mode {}, {}, circuit breaker {}; within the last hour {} "
                           "of {} node marks and {} of {} replacements",
                           g.mode, g.paused ? "paused " + g.paused_detail : "not paused",
                           g.tripped ? "tripped" : "closed", g.marks, g.max_marks, g.replacements,
                           g.max_replacements));
  if (g.tripped) line(stdout, fmt::format("controller: {}", g.tripped_detail));
}

void print_status(const proto::StatusReply& reply) {
  if (reply.controller) print_guard(*reply.controller);
  print_steps(reply);
}

void print_events(const proto::EventsReply& reply) {
  for (const auto& e : reply.events) {
    // A step's events name its job and run; a node's, the node (or "-" for
    // the controller's own, such as a stall).
    // A group's (continuous provisioning), the group and its node if any.
    const auto who = !e.run_id.empty()  ? fmt::format("job {} {}", e.job_id, e.run_id)
                     : !e.group.empty() ? fmt::format("group {}{}{}", e.group,
                                                      e.node.empty() ? "" : " node ", e.node)
                                        : fmt::format("node {}", e.node.empty() ? "-" : e.node);
    const auto level = e.level == "info" ? std::string() : " (" + e.level + ")";
    // On whose behalf: the step's owner, a replacement's requester (0: the
    // controller's own).
    line(stdout, fmt::format("{} uid {} {} {}{}: {}", format_time(e.at), e.uid, who, e.kind, level,
                             e.detail));
  }
}

void print_nodes(const proto::NodesReply& reply) {
  if (reply.replacements.empty()) fmt::print("no node is being replaced\n");
  for (const auto& r : reply.replacements)
    line(stdout,
         fmt::format("{} {} ({}, {} provider tries, since {}): {}{}", r.node, ar::name_of(r.state),
                     ar::name_of(r.mode), r.attempts, format_time(r.started_at), r.reason,
                     r.detail.empty() ? "" : " - " + r.detail));
  if (reply.heartbeats.empty()) fmt::print("no node agent heard from\n");
  for (const auto& [node, age] : reply.heartbeats)
    line(stdout, fmt::format("{}: last heartbeat {:.1f} s ago", node, age));
  if (reply.heartbeats_left_out > 0)
    line(stdout, fmt::format("... and {} more nodes heard more recently (name them: auto-resume "
                             "nodes NODE...)",
                             reply.heartbeats_left_out));
}

// Node groups (continuous provisioning), one line each.
void print_plan(const proto::GroupPlanReply& reply) {
  if (!reply.error.empty()) return;  // said on stderr
  if (reply.diff.empty()) {
    line(stdout, reply.path + ": no change");
    return;
  }
  line(stdout, "--- " + reply.path + " (now)");
  line(stdout, "+++ " + reply.path + " (from the group files)");
  for (const auto& text : reply.diff) line(stdout, text);
  if (reply.diff_left_out > 0)
    line(stdout, fmt::format("... and {} more lines", reply.diff_left_out));
  line(stdout, reply.change == "restart"
                   ? "applied by a slurmctld restart (new or changed NodeName lines)"
                   : "applied by scontrol reconfigure: no slurmctld restart");
}

void print_groups(const proto::GroupsReply& reply) {
  if (reply.groups.empty()) {
    fmt::print("no node groups\n");
    return;
  }
  fmt::print("{:<20} {:<8} {:<11} {:>5} {:>5} {:>5} {:>10} {:>8} {:>7} {:>9}  {}\n", "GROUP",
             "TYPE", "STATUS", "COUNT", "MIN", "MAX", "IN_SERVICE", "STARTING", "LEAVING",
             "OPERATION", "DETAIL");
  for (const auto& g : reply.groups)
    line(stdout, fmt::format("{:<20} {:<8} {:<11} {:>5} {:>5} {:>5} {:>10} {:>8} {:>7} {:>9}  {}",
                             g.name, g.type, g.status, g.count, g.min_count, g.max_count,
                             g.in_service, g.starting, g.leaving, g.operation, g.detail));
}

// Per-group instance-hours, then each instance (newest first).
void print_usage(const proto::UsageReply& reply) {
  if (reply.groups.empty()) fmt::print("no billable instance time\n");
  for (const auto& g : reply.groups)
    line(stdout, fmt::format("group {}: {} instance(s), {:.3f} instance-hours", g.group,
                             g.instances, g.instance_hours));
  if (reply.instances.empty()) return;
  const auto when = [](std::int64_t t) { return t == 0 ? std::string("-") : format_time(t); };
  fmt::print("{:<16} {:<16} {:<20} {:<20} {:<20} {:<20} {:>9}  {}\n", "GROUP", "NODE", "INSTANCE",
             "STARTED", "IN_SERVICE", "TERMINATED", "HOURS", "END");
  for (const auto& i : reply.instances)
    line(stdout, fmt::format("{:<16} {:<16} {:<20} {:<20} {:<20} {:<20} {:>9.3f}  {}", i.group,
                             i.node, i.instance_id.empty() ? "-" : i.instance_id, when(i.started),
                             when(i.in_service), when(i.terminated), i.hours, i.end_reason));
  if (reply.left_out > 0)
    fmt::print(stderr, "auto-resume: {} older instance(s) not listed (--limit)\n", reply.left_out);
}

// `events --json`: each event with the cluster events' field names as well
// (event_id, time, group, instance, resource_type, level, description).
proto::json events_json(const proto::EventsReply& reply) {
  auto out = reply.to_json();
  for (auto& e : out["events"]) {
    e["event_id"] = e["id"];
    e["time"] = format_time(e["at"].get<std::int64_t>());
    e["instance"] = e["node"];
    e["resource_type"] = e.value("resource", "");
    e["group"] = e.value("group", "");
    e["level"] = e.value("level", "info");
    e["description"] = e["detail"];
  }
  return out;
}

// The controller refused a request; says so as "the controller refused OP: CODE: MESSAGE".
class Refused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Controller {
  ar::ClientOptions options;
  bool as_json = false;  // print the reply as JSON rather than in words
};

// Sends `request`; the typed reply.
template <typename Request>
typename Request::Reply fetch(const Controller& controller, const Request& request) {
  try {
    return ar::Client(controller.options).send(request);
  } catch (const ar::Refused& e) {
    throw Refused(fmt::format("the controller refused {}: {}", Request::kOp, e.what()));
  }
}

// Prints a typed reply as JSON, or with `print`.
template <typename Reply, typename Print>
void show(const Controller& controller, const Reply& result, Print&& print) {
  if (controller.as_json)
    fmt::print("{}\n", result.to_json().dump(2));
  else
    print(result);
}

// Sends `request`; prints the typed reply as JSON, or with `print`.
template <typename Request, typename Print>
void ask(const Controller& controller, const Request& request, Print&& print) {
  show(controller, fetch(controller, request), std::forward<Print>(print));
}

// Up to `limit` rows of a paged list (status, events), page by page from
// the cursor on; the cursor to go on from, if there are more.
template <typename Request, typename Rows>
std::optional<std::int64_t> fetch_pages(const Controller& controller, Request request,
                                        std::uint32_t limit, Rows rows,
                                        std::optional<std::int64_t> Request::*cursor,
                                        typename Request::Reply& all) {
  for (;;) {
    const auto have = static_cast<std::uint32_t>((all.*rows).size());
    request.limit = std::min(limit - have, proto::kMaxPageRows);
    auto page = fetch(controller, request);
    for (auto& row : page.*rows) (all.*rows).push_back(std::move(row));
    // status: the controller's state, as the first page had it.
    if constexpr (requires(typename Request::Reply r) { r.controller; })
      if (!all.controller) all.controller = std::move(page.controller);
    if (!page.next || (all.*rows).size() >= limit) return page.next;
    request.*cursor = page.next;
  }
}

// Prints up to `limit` rows of a paged list from `request` on, and the
// cursor `option` to list more with when there are more.
template <typename Request, typename Rows, typename Print>
void list(const Controller& controller, const Request& request, std::uint32_t limit, Rows rows,
          std::optional<std::int64_t> Request::*cursor, const char* option, Print print) {
  typename Request::Reply all;
  const auto next = fetch_pages(controller, request, limit, rows, cursor, all);
  show(controller, all, print);
  if (next) fmt::print(stderr, "auto-resume: more to list: add {} {}\n", option, *next);
}

// The subcommands that ask the controller, and their options.
struct Commands {
  CLI::App* hello = nullptr;
  CLI::App* status = nullptr;
  std::uint32_t job_filter = 0;
  std::uint32_t status_limit = proto::kDefaultStatusRows;
  std::int64_t before = -1;
  CLI::App* events = nullptr;
  std::string since;
  std::uint32_t events_limit = proto::kDefaultEventRows;
  std::int64_t after = -1;
  bool follow = false;
  CLI::App* replace = nullptr;
  std::string replace_node;
  bool replace_now = false;
  bool replace_force = false;
  CLI::App* nodes = nullptr;
  std::vector<std::string> nodes_named;
  CLI::App* pause = nullptr;
  std::string pause_reason;
  CLI::App* unpause = nullptr;
  CLI::App* resume_actions = nullptr;
  std::string events_group;
  std::string events_level;
  // Continuous provisioning (root).
  CLI::App* group = nullptr;
  CLI::App* group_status = nullptr;
  CLI::App* group_set = nullptr;
  std::string group_name;
  std::vector<std::string> group_values;
  CLI::App* group_apply = nullptr;
  CLI::App* group_retry = nullptr;
  CLI::App* group_roll = nullptr;
  CLI::App* group_plan = nullptr;
  std::uint32_t roll_batch = 1;
  CLI::App* usage = nullptr;
  std::string usage_group;
  std::string usage_since;
  std::uint32_t usage_limit = proto::kMaxPageRows;
  CLI::App* lifecycle_log = nullptr;
  std::string log_node;
};

void add_commands(CLI::App& app, Commands& c) {
  c.hello = app.add_subcommand("hello", "Check that the controller answers, and as whom");
  c.status = app.add_subcommand("status", "List protected steps (yours; all for root)");
  c.status->add_option("--job", c.job_filter, "Only this job");
  c.status->add_option("--limit", c.status_limit, "Steps at most, newest first")
      ->check(CLI::Range(1U, 1000000U))
      ->capture_default_str();
  c.status->add_option("--before", c.before,
                       "Only steps older than this cursor (printed when there are more)");
  c.events = app.add_subcommand("events", "List what the controller did");
  c.events->add_option("--since", c.since,
                       "Only events from then on: Unix seconds, a UTC time "
                       "(2026-11-29T14:05:00Z) or an age (90s, 10m, 2h, 1d)");
  c.events->add_option("--limit", c.events_limit, "Events at most, oldest first")
      ->check(CLI::Range(1U, 1000000U))
      ->capture_default_str();
  c.events->add_option("--after", c.after,
                       "Only events after this cursor (printed when there are more)");
  c.events->add_option("--group", c.events_group, "Only this node group's events");
  c.events->add_option("--level", c.events_level, "Only events this grave or graver")
      ->check(CLI::IsMember({"info", "warning", "error"}));
  c.events->add_flag("--follow", c.follow,
                     "Then print new events as they come (a look a second) until interrupted; "
                     "without --since or --after, only events from now on");
  c.replace = app.add_subcommand(
      "replace",
      "Replace a node (root): FAIL it, let its jobs finish, have the provider replace it");
  c.replace->add_option("NODE", c.replace_node, "The node, as slurm.conf names it")->required();
  auto* now_flag = c.replace->add_flag("--now", c.replace_now,
                                       "Resume the auto-resume steps on it elsewhere at once");
  c.replace
      ->add_flag("--force", c.replace_force,
                 "Also kill the other jobs on it (after its auto-resume steps moved)")
      ->excludes(now_flag);
  c.nodes =
      app.add_subcommand("nodes", "Node replacements under way and node agents' heartbeats (root)");
  c.nodes
      ->add_option("node", c.nodes_named,
                   fmt::format("Only these nodes (at most {}; default: all, the {} heard longest "
                               "ago when more are heard)",
                               ar::proto::kMaxNodesListed, ar::proto::kMaxNodesListed))
      ->expected(0, static_cast<int>(ar::proto::kMaxNodesListed));
  c.pause = app.add_subcommand(
      "pause", "Stop every action of the controller, for a maintenance window (root)");
  c.pause->add_option("--reason", c.pause_reason, "Why, shown in status and events");
  c.unpause = app.add_subcommand("unpause", "Let the controller act again after a pause (root)");
  c.resume_actions = app.add_subcommand(
      "resume-actions", "Reset a tripped circuit breaker: the controller acts again (root)");

  auto* group = c.group =
      app.add_subcommand("group", "Node groups of continuous provisioning (root)");
  c.group_status = group->add_subcommand("status", "Each group: its status, counts and operation");
  c.group_set = group->add_subcommand(
      "set", "Set a group's count and/or min_count (written into its file; starts an operation)");
  c.group_set->add_option("NAME", c.group_name, "The group")->required();
  c.group_set->add_option("VALUES", c.group_values, "count=N and/or min_count=M")->required();
  c.group_apply = group->add_subcommand("apply", "Read the group files now");
  c.group_retry = group->add_subcommand(
      "retry", "Create again in a group stopped by lifecycle failures or waiting on a backoff");
  c.group_retry->add_option("NAME", c.group_name, "The group")->required();
  c.group_roll = group->add_subcommand(
      "roll", "Replace every in-service instance of a group, a batch at a time (rolling update)");
  c.group_roll->add_option("NAME", c.group_name, "The group")->required();
  c.group_roll->add_option("--batch", c.roll_batch, "Instances replaced at once")
      ->check(CLI::Range(1U, 10000U))
      ->capture_default_str();
  c.group_plan = group->add_subcommand(
      "plan",
      "What the include file (slurm_conf_include) would become, and whether slurmctld must "
      "restart for it; nothing is written");
  c.usage = app.add_subcommand("usage", "Instance metering: per-group instance-hours (root)");
  c.usage->add_option("--group", c.usage_group, "Only this group");
  c.usage->add_option("--since", c.usage_since,
                      "Billable time from then on: Unix seconds, a UTC time or an age");
  c.usage->add_option("--limit", c.usage_limit, "Instance rows at most, newest first")
      ->check(CLI::Range(1U, proto::kMaxPageRows))
      ->capture_default_str();
  c.lifecycle_log = app.add_subcommand(
      "lifecycle-log", "The end of a group node's last lifecycle script log (root)");
  c.lifecycle_log->add_option("NODE", c.log_node, "The node")->required();
}

std::int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// `group set`'s KEY=VALUE arguments: count and min_count only.
proto::GroupSetRequest group_set_request(const Commands& c) {
  proto::GroupSetRequest request{c.group_name, {}, {}};
  for (const auto& arg : c.group_values) {
    const auto [key, value] = ar::split_key_value(arg);
    const auto number = static_cast<std::uint32_t>(ar::parse_uint(key, value, 0, 10000));
    if (key == "count")
      request.count = number;
    else if (key == "min_count")
      request.min_count = number;
    else
      throw ar::ConfigError("group set: unknown key '" + key +
                            "' (known: count, min_count; edit the group's file for the others)");
  }
  return request;
}

void run_provisioning(const Controller& controller, const Commands& c) {
  // Named here, not by CLI11: an unknown word after `group` is then named.
  if (c.group->parsed() && c.group->get_subcommands().empty())
    throw ar::ConfigError(
        "group: say what: status, set, apply, retry, roll or plan (try group --help)");
  const auto said = [](const proto::GroupReply& reply) { line(stdout, reply.message); };
  if (c.group_status->parsed()) ask(controller, proto::GroupsRequest{}, print_groups);
  if (c.group_set->parsed()) ask(controller, group_set_request(c), said);
  if (c.group_apply->parsed()) ask(controller, proto::GroupApplyRequest{}, said);
  if (c.group_retry->parsed()) ask(controller, proto::GroupRetryRequest{c.group_name}, said);
  if (c.group_roll->parsed())
    ask(controller, proto::GroupRollRequest{c.group_name, c.roll_batch}, said);
  if (c.group_plan->parsed()) {
    const auto plan = fetch(controller, proto::GroupPlanRequest{});
    show(controller, plan, print_plan);
    if (!plan.error.empty()) throw ar::ConfigError("group plan: " + plan.error);
  }
  if (c.usage->parsed()) {
    proto::UsageRequest request;
    request.group = c.usage_group;
    if (!c.usage_since.empty())
      request.since = ar::parse_since("--since", c.usage_since, unix_now());
    request.limit = c.usage_limit;
    ask(controller, request, print_usage);
  }
  if (c.lifecycle_log->parsed())
    ask(controller, proto::LifecycleLogRequest{c.log_node},
        [](const proto::LifecycleLogReply& reply) {
          fmt::print(stderr, "auto-resume: {} ({} bytes{})\n", reply.path, reply.size,
                     reply.size > reply.text.size() ? ", its end" : "");
          fmt::print("{}{}", reply.text,
                     reply.text.empty() || reply.text.back() == '\n' ? "" : "\n");
        });
}

// `events --follow`: the events from `request` on, page by page, then a
// look a second for more, until interrupted (or the controller stops
// answering: the error ends it); each event printed once, as it comes
// (with --json, one JSON object a line).
[[noreturn]] void follow_events(const Controller& controller, proto::EventsRequest request) {
  for (;;) {
    request.limit = proto::kMaxPageRows;
    const auto page = fetch(controller, request);
    if (controller.as_json) {
      for (const auto& e : events_json(page)["events"]) fmt::print("{}\n", e.dump());
    } else {
      print_events(page);
    }
    std::fflush(stdout);
    if (!page.events.empty()) request.after = page.events.back().id;
    if (!page.next) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

// Asks what the parsed subcommand asks, and prints the answer.
void run(const Controller& controller, const Commands& c) {
  if (c.hello->parsed())
    ask(controller, proto::HelloRequest{},
        [&](const proto::HelloReply& reply) { print_hello(reply, controller.options.endpoint); });
  if (c.status->parsed()) {
    proto::StatusRequest request;
    if (c.job_filter != 0) request.job_id = c.job_filter;
    if (c.before >= 0) request.before = c.before;
    list(controller, request, c.status_limit, &proto::StatusReply::steps,
         &proto::StatusRequest::before, "--before", print_status);
  }
  if (c.events->parsed()) {
    proto::EventsRequest request;
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    if (!c.since.empty()) request.since = ar::parse_since("--since", c.since, now);
    if (c.after >= 0) request.after = c.after;
    request.group = c.events_group;
    request.level = c.events_level;
    if (c.follow) {
      if (!request.since && !request.after) request.since = now;
      follow_events(controller, request);
    }
    proto::EventsReply all;
    const auto next = fetch_pages(controller, request, c.events_limit, &proto::EventsReply::events,
                                  &proto::EventsRequest::after, all);
    if (controller.as_json)
      fmt::print("{}\n", events_json(all).dump(2));
    else
      print_events(all);
    if (next) fmt::print(stderr, "auto-resume: more to list: add --after {}\n", *next);
  }
  if (c.replace->parsed()) {
    const auto mode = c.replace_force ? proto::ReplaceMode::force
                      : c.replace_now ? proto::ReplaceMode::now
                                      : proto::ReplaceMode::wait;
    ask(controller, proto::ReplaceRequest{c.replace_node, mode},
        [](const proto::ReplaceReply& reply) { line(stdout, reply.message); });
  }
  if (c.nodes->parsed()) ask(controller, proto::NodesRequest{c.nodes_named}, print_nodes);
  const auto print_guard_reply = [](const proto::GuardReply& reply) {
    line(stdout, reply.message);
    print_guard(reply.controller);
  };
  if (c.pause->parsed()) ask(controller, proto::PauseRequest{c.pause_reason}, print_guard_reply);
  if (c.unpause->parsed()) ask(controller, proto::UnpauseRequest{}, print_guard_reply);
  if (c.resume_actions->parsed()) ask(controller, proto::ResumeActionsRequest{}, print_guard_reply);
  run_provisioning(controller, c);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"auto-resume: inspect and steer slurm-auto-resume", "auto-resume"};
  app.set_version_flag("-V,--version", std::string("auto-resume ") + ar::kVersion);
  app.require_subcommand(1);
  app.fallthrough();  // global options may follow the subcommand

  std::string controller = env_or("AUTO_RESUME_CONTROLLER", "127.0.0.1:7860");
  std::string munge_socket = env_or("AUTO_RESUME_MUNGE_SOCKET", "");
  double timeout_seconds = 5;
  bool as_json = false;
  app.add_option("--controller", controller,
                 "auto-resumed's HOST:PORT (env AUTO_RESUME_CONTROLLER)")
      ->capture_default_str();
  app.add_option("--munge-socket", munge_socket,
                 "munged's socket (env AUTO_RESUME_MUNGE_SOCKET; default: munge's own)");
  uid_t controller_uid = 0;
  app.add_option("--controller-uid", controller_uid,
                 "The uid auto-resumed runs as, if not root (env AUTO_RESUME_CONTROLLER_UID): "
                 "its replies must come from root or this uid")
      ->envname("AUTO_RESUME_CONTROLLER_UID")
      ->capture_default_str();
  app.add_option("--timeout", timeout_seconds, "Seconds to wait for the controller")
      ->check(CLI::Range(0.1, 300.0))
      ->capture_default_str();
  app.add_flag("--json", as_json, "Print the controller's answer as JSON");

  auto* check = app.add_subcommand(
      "check-config",
      "Validate a controller configuration file: print its effective settings, and on stderr "
      "the settings that contradict each other");
  std::string config_file;
  check->add_option("FILE", config_file, "Configuration file")->required();
  Commands commands;
  add_commands(app, commands);

  CLI11_PARSE(app, argc, argv);

  try {
    if (check->parsed()) {
      const auto config = ar::load_daemon_config(config_file);
      fmt::print("{}", ar::render(config));
      for (const auto& warning : ar::config_warnings(config))
        line(stderr, fmt::format("auto-resume: {}: warning: {}", config_file, warning));
      return 0;
    }
    run({{ar::parse_endpoint("--controller", controller),
          std::chrono::milliseconds(static_cast<long>(timeout_seconds * 1000)),
          munge_socket,
          controller_uid,
          {}},
         as_json},
        commands);
  } catch (const ar::ConfigError& e) {
    line(stderr, fmt::format("auto-resume: {}", e.what()));
    return 1;
  } catch (const Refused& e) {
    line(stderr, fmt::format("auto-resume: {}", e.what()));
    return 1;
  } catch (const ar::ClientError& e) {
    line(stderr,
         fmt::format("auto-resume: no answer from the controller at {}: {}", controller, e.what()));
    return 1;
  } catch (const ar::MungeError& e) {
    line(stderr, fmt::format("auto-resume: {}", e.what()));
    return 1;
  } catch (const std::exception& e) {
    line(stderr, fmt::format("auto-resume: unexpected answer from the controller: {}", e.what()));
    return 1;
  }
  return 0;
}
