// auto-resume: the command line tool for users and admins.

#include <fmt/chrono.h>
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>

#include "autoresume/client.hpp"
#include "autoresume/daemon_config.hpp"
#include "autoresume/keyvalue.hpp"
#include "autoresume/munge_cred.hpp"
#include "autoresume/version.hpp"

namespace {

using ar::proto::json;

std::string env_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

std::string format_time(std::int64_t unix_seconds) {
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}Z",
                     std::chrono::sys_seconds(std::chrono::seconds(unix_seconds)));
}

void print_steps(const json& result) {
  const auto& steps = result.at("steps");
  if (steps.empty()) {
    fmt::print("no protected steps\n");
    return;
  }
  fmt::print("{:<10} {:<6} {:<24} {:>7} {:<12} {:<7} {:<20} {}\n", "JOB", "STEP", "RUN", "ATTEMPT",
             "STATE", "UID", "REGISTERED", "NODES");
  // A decided step shows its verdict; a repair, how far it got.
  auto state = [](const json& s) {
    const auto plain = s.at("state").get<std::string>();
    if (plain == "decided") return s.value("verdict", plain);
    const auto phase = s.value("phase", std::string());
    return phase.empty() ? plain : plain + ":" + phase;
  };
  for (const auto& s : steps)
    fmt::print("{:<10} {:<6} {:<24} {:>7} {:<12} {:<7} {:<20} {}\n", s.at("job_id").get<long>(),
               s.at("step_id").get<long>(), s.at("run_id").get<std::string>(),
               s.at("attempt").get<long>(), state(s), s.at("uid").get<long>(),
               format_time(s.at("created_at").get<std::int64_t>()),
               s.at("nodelist").get<std::string>());
}

void print_events(const json& result) {
  for (const auto& e : result.at("events")) {
    // A step's events name its job and run; a node's, the node (or "-" for
    // the controller's own, such as a stall).
    const auto node = e.value("node", std::string());
    const auto run = e.at("run_id").get<std::string>();
    const auto who = !run.empty() ? fmt::format("job {} {}", e.at("job_id").get<long>(), run)
                                  : fmt::format("node {}", node.empty() ? "-" : node);
    fmt::print("{} {} {}: {}\n", format_time(e.at("at").get<std::int64_t>()), who,
               e.at("kind").get<std::string>(), e.at("detail").get<std::string>());
  }
}

void print_nodes(const json& result) {
  const auto& repairs = result.at("replacements");
  if (repairs.empty()) fmt::print("no node is being replaced\n");
  for (const auto& r : repairs)
    fmt::print(
        "{} {} ({}, {} provider tries, since {}): {}{}\n", r.at("node").get<std::string>(),
        r.at("state").get<std::string>(), r.at("mode").get<std::string>(),
        r.at("attempts").get<long>(), format_time(r.at("started_at").get<std::int64_t>()),
        r.at("reason").get<std::string>(),
        r.at("detail").get<std::string>().empty() ? "" : " - " + r.at("detail").get<std::string>());
  const auto& heard = result.at("heartbeats");
  if (heard.empty()) fmt::print("no node agent heard from\n");
  for (const auto& [node, age] : heard.items())
    fmt::print("{}: last heartbeat {:.1f} s ago\n", node, age.get<double>());
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
  app.add_option("--timeout", timeout_seconds, "Seconds to wait for the controller")
      ->check(CLI::Range(0.1, 300.0))
      ->capture_default_str();
  app.add_flag("--json", as_json, "Print the controller's answer as JSON");

  auto* check = app.add_subcommand("check-config", "Validate a controller configuration file");
  std::string config_file;
  check->add_option("FILE", config_file, "Configuration file")->required();

  auto* hello = app.add_subcommand("hello", "Check that the controller answers, and as whom");
  auto* status = app.add_subcommand("status", "List protected steps (yours; all for root)");
  std::uint32_t job_filter = 0;
  status->add_option("--job", job_filter, "Only this job");
  auto* events = app.add_subcommand("events", "List what the controller did");
  std::string since;
  events->add_option("--since", since,
                     "Only events from then on: Unix seconds, a UTC time "
                     "(2026-11-29T14:05:00Z) or an age (90s, 10m, 2h, 1d)");
  auto* replace = app.add_subcommand(
      "replace",
      "Replace a node (root): FAIL it, let its jobs finish, have the provider replace it");
  std::string replace_node;
  bool replace_now = false;
  bool replace_force = false;
  replace->add_option("NODE", replace_node, "The node, as slurm.conf names it")->required();
  auto* now_flag = replace->add_flag("--now", replace_now,
                                     "Resume the auto-resume steps on it elsewhere at once");
  replace
      ->add_flag("--force", replace_force,
                 "Also kill the other jobs on it (after its auto-resume steps moved)")
      ->excludes(now_flag);
  auto* nodes =
      app.add_subcommand("nodes", "Node replacements under way and node agents' heartbeats (root)");

  CLI11_PARSE(app, argc, argv);

  try {
    if (check->parsed()) {
      fmt::print("{}", ar::render(ar::load_daemon_config(config_file)));
      return 0;
    }
    const auto endpoint = ar::parse_endpoint("--controller", controller);
    const auto timeout = std::chrono::milliseconds(static_cast<long>(timeout_seconds * 1000));
    json fields = json::object();
    std::string op;
    if (hello->parsed()) op = "hello";
    if (status->parsed()) {
      op = "status";
      if (job_filter != 0) fields["job_id"] = job_filter;
    }
    if (events->parsed()) {
      op = "events";
      if (!since.empty())
        fields["since"] = ar::parse_since("--since", since,
                                          std::chrono::duration_cast<std::chrono::seconds>(
                                              std::chrono::system_clock::now().time_since_epoch())
                                              .count());
    }
    if (replace->parsed()) {
      op = "replace";
      fields = {{"node", replace_node},
                {"mode", replace_force ? "force"
                         : replace_now ? "now"
                                       : "wait"}};
    }
    if (nodes->parsed()) op = "nodes";
    const auto reply = ar::call_controller(
        endpoint, timeout, op,
        ar::munge_encode_credential(munge_socket, ar::credential_payload(op)), std::move(fields));
    if (!reply.ok) {
      fmt::print(stderr, "auto-resume: the controller refused {}: {}: {}\n", op, reply.code,
                 reply.message);
      return 1;
    }
    if (as_json) {
      fmt::print("{}\n", reply.result.dump(2));
    } else if (op == "hello") {
      fmt::print("auto-resumed {} at {} (protocol {}), you are uid {}\n",
                 reply.result.at("version").get<std::string>(), endpoint.str(),
                 reply.result.at("protocol").get<int>(), reply.result.at("uid").get<long>());
    } else if (op == "status") {
      print_steps(reply.result);
    } else if (op == "replace") {
      fmt::print("{}\n", reply.result.at("message").get<std::string>());
    } else if (op == "nodes") {
      print_nodes(reply.result);
    } else {
      print_events(reply.result);
    }
  } catch (const ar::ConfigError& e) {
    fmt::print(stderr, "auto-resume: {}\n", e.what());
    return 1;
  } catch (const ar::ClientError& e) {
    fmt::print(stderr, "auto-resume: the controller at {} cannot be reached: {}\n", controller,
               e.what());
    return 1;
  } catch (const ar::MungeError& e) {
    fmt::print(stderr, "auto-resume: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "auto-resume: unexpected answer from the controller: {}\n", e.what());
    return 1;
  }
  return 0;
}
