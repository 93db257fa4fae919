// auto-resumed: the controller daemon.

#include <fmt/core.h>
#include <pthread.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>

#include "autoresume/daemon_config.hpp"
#include "autoresume/keyvalue.hpp"
#include "autoresume/munge_cred.hpp"
#include "autoresume/version.hpp"
#include "libslurm.hpp"
#include "log.hpp"
#include "nodes/probe.hpp"
#include "notify.hpp"
#include "resume/engine.hpp"
#include "server/limits.hpp"
#include "server/metrics.hpp"
#include "server/metrics_http.hpp"
#include "server/net.hpp"
#include "server/server.hpp"
#include "server/service.hpp"
#include "store/store.hpp"

namespace {

// Why `listen` cannot be bound now (empty when it can): a changed listen
// or metrics_listen is tried before the restart, so that a port taken is
// a refused reload, not a controller that fails to start.
std::string cannot_bind(const ar::Endpoint& listen) {
  namespace asio = ar::net::asio;
  asio::io_context io;
  try {
    // As the server binds it (server.cpp).
    ar::net::tcp::acceptor acceptor(io, ar::net::resolve_listen(io, listen),
                                    /*reuse_address=*/true);
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

// Whether a SIGHUP's reload needs a restart: the file read again, a bad one
// refused (logged; the running configuration stays), an unchanged one
// nothing to do.
bool reload_wanted(const std::string& file, const ar::DaemonConfig& running) {
  ar::DaemonConfig fresh;
  try {
    fresh = ar::load_daemon_config(file);
  } catch (const ar::ConfigError& e) {
    ar::log::error("SIGHUP: reload refused, the running configuration stays: {}", e.what());
    return false;
  }
  if (ar::render(fresh) == ar::render(running)) {
    ar::log::info("SIGHUP: {} is unchanged: nothing to reload", file);
    return false;
  }
  const auto taken = [](const char* key, const ar::Endpoint& endpoint) {
    const auto why = cannot_bind(endpoint);
    if (!why.empty())
      ar::log::error("SIGHUP: reload refused, the running configuration stays: {}={}: {}", key,
                     endpoint.str(), why);
    return !why.empty();
  };
  if (fresh.listen != running.listen && taken("listen", fresh.listen)) return false;
  if (fresh.metrics_listen &&
      (!running.metrics_listen || *fresh.metrics_listen != *running.metrics_listen) &&
      taken("metrics_listen", *fresh.metrics_listen))
    return false;
  for (const auto& warning : ar::config_warnings(fresh)) ar::log::warn("{}: {}", file, warning);
  ar::log::info("SIGHUP: {} changed: restarting in place on the same state", file);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"auto-resumed: the slurm-auto-resume controller daemon", "auto-resumed"};
  std::string config_file = "/etc/slurm/auto-resumed.conf";
  bool check_only = false;
  app.add_option("-c,--config", config_file, "Configuration file (Key=Value lines)")
      ->capture_default_str();
  app.add_flag("--check-config", check_only,
               "Load the configuration, print the effective settings (and on stderr the "
               "settings that contradict each other) and exit");
  bool list_settings = false;
  app.add_flag("--settings", list_settings,
               "Print every key of the configuration file, with its default, the values it "
               "takes and what it does, and exit");
  app.set_version_flag("-V,--version", std::string("auto-resumed ") + ar::kVersion);
  CLI11_PARSE(app, argc, argv);
  if (list_settings) {
    fmt::print("{}", ar::describe_settings());
    return 0;
  }
  // SIGHUP waits (blocked, so pending) until its handler is set below, and
  // again from the restart's exec on: a reload asked for while the daemon
  // starts or restarts is taken then, not fatal (SIGHUP's default). Every
  // thread started meanwhile keeps it blocked; commands start unblocked.
  sigset_t hangup;
  sigemptyset(&hangup);
  sigaddset(&hangup, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &hangup, nullptr);

  ar::DaemonConfig config;
  try {
    config = ar::load_daemon_config(config_file);
  } catch (const ar::ConfigError& e) {
    fmt::print(stderr, "auto-resumed: {}\n", e.what());
    return 1;
  }
  // Settings that contradict each other: said, not refused (they can work).
  const auto warnings = ar::config_warnings(config);
  if (check_only) {
    fmt::print("{}", ar::render(config));
    for (const auto& warning : warnings)
      fmt::print(stderr, "auto-resumed: {}: warning: {}\n", config_file, warning);
    return 0;
  }
  for (const auto& warning : warnings) ar::log::warn("{}: {}", config_file, warning);

  bool restart = false;  // a SIGHUP with a changed, valid configuration
  try {
    // As root, expand helpers are submitted as the job's owner by this
    // program: a controller without it could not grow a job. SlurmUser
    // cannot take another uid, and submits them itself.
    std::filesystem::path submit_program;
    if (geteuid() == 0) {
      submit_program = ar::slurm::default_submit_program();
      ar::slurm::check_submit_program(submit_program);
    } else {
      ar::log::warn(
          "running as uid {}, not root: expand helpers are submitted by uid {} for their "
          "job's owner (job_submit plugins see uid {} as the submitter)",
          geteuid(), geteuid(), geteuid());
    }
    ar::slurm::init();
    ar::slurm::LibSlurm slurm(submit_program);
    const auto& clock = ar::system_clock();
    ar::TcpProber prober;
    ar::ProcessRunner runner;
    // Counted whether or not metrics_listen serves them (it costs little).
    // Both outlive the store, which hands them its events.
    ar::ControllerMetrics metrics;
    std::optional<ar::Notifier> notifier;
    if (!config.notify_command.empty()) notifier.emplace(config.notify_command);
    constexpr std::uint64_t kMiB = 1024 * 1024;
    ar::Store store(config.state_dir, clock,
                    {config.max_job_steps_per_hour, config.max_user_steps_per_hour,
                     config.max_store_mb * kMiB});
    store.on_event([&metrics, &notifier](const ar::Event& event, bool node_event) {
      ar::log::event(event.kind, event.level, event.job_id, event.run_id, event.node, event.group,
                     event.uid, event.detail);
      metrics.event(event.kind, node_event);
      if (notifier) notifier->post(event);
    });
    ar::MeteredRunner replace_runner(runner, metrics, [](const auto&) { return "replace"; });
    ar::MeteredRunner provision_runner(runner, metrics, [&config](const auto& words) {
      if (words == config.provision.slurmctld_restart_command)
        return std::string("slurmctld_restart");
      for (const auto* op : {"create", "terminate", "list"})
        if (words.size() > 1 && words[1] == op) return std::string(op);
      return std::string("other");
    });
    // The provisioner's group nodes are its own to replace. It is made after
    // the keeper, whose guard rails it shares (and so goes first at exit).
    const ar::Provisioner* group_owner = nullptr;
    ar::NodeKeeper keeper(store, config, slurm, clock, prober, replace_runner,
                          [&group_owner](const std::string& node) {
                            return group_owner != nullptr && group_owner->owns(node);
                          });
    std::optional<ar::Provisioner> provisioner;
    if (config.provision.mode == ar::Provisioning::continuous) {
      group_owner =
          &provisioner.emplace(store, config, slurm, clock, provision_runner, &keeper.gate());
      ar::log::info("continuous provisioning: groups in {}, provider {}",
                    config.provision.groups_dir.string(), config.provision.command.string());
    }
    // Parts are wired at construction: what the server hears of the steps
    // (reports) is read by the engine, the one that decides.
    ar::StepReports reports;
    ar::Provisioner* const provisioning = provisioner ? &*provisioner : nullptr;
    // The one place the steps are decided, by the engine and the server.
    ar::Verdicts verdicts(store, reports, clock, config);
    ar::Engine engine(store, config, keeper, slurm, clock, prober, reports, verdicts, provisioning,
                      [&metrics](double seconds) { metrics.look(seconds); });
    ar::Service service(
        store, slurm, clock, [&engine] { engine.wake(); }, reports, verdicts, &keeper, &config,
        provisioning, &metrics);
    ar::net::asio::io_context io;
    ar::net::asio::thread_pool workers(4);
    ar::MungeDaemon munge(config.munge_socket);
    const auto limits = ar::connection_limits(config, ar::free_descriptors());
    ar::Server server(
        io, workers, config.listen, limits, munge,
        [&service](const ar::proto::Request& request, uid_t caller, const std::string& peer) {
          return service.handle(request, caller, peer);
        },
        [&service](uid_t caller) { return service.privileged(caller); },
        [&metrics](std::string_view outcome) { metrics.session(outcome); },
        [&service](const ar::proto::Request& request, uid_t caller, const std::string& peer) {
          return service.quick(request, caller, peer);
        });
    server.start();
    std::optional<ar::MetricsServer> metrics_server;  // after io: its socket goes first
    if (config.metrics_listen) {
      const ar::ControllerMetrics::Sources sources{&store, &keeper, provisioning, config.state_dir,
                                                   config.heartbeat_timeout};
      metrics_server.emplace(io, workers, *config.metrics_listen,
                             [&metrics, sources] { return metrics.scrape(sources); });
      metrics_server->start();
      const auto at = metrics_server->local_endpoint();
      ar::log::info("metrics at http://{}:{}/metrics", at.address().to_string(), at.port());
    }
    engine.start();
    ar::net::asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](const boost::system::error_code& ec, int signal) {
      if (ec) return;
      ar::log::info("signal {}: stopping", signal);
      io.stop();
    });
    // SIGHUP: the file read again; a bad one is refused and the running
    // configuration stays, a changed one restarts the daemon in place
    // (below: the same pid, on the same state, as any restart).
    ar::net::asio::signal_set hangups(io, SIGHUP);
    pthread_sigmask(SIG_UNBLOCK, &hangup, nullptr);
    std::function<void()> await_hangup = [&] {
      hangups.async_wait([&](const boost::system::error_code& ec, int) {
        if (ec) return;
        if (reload_wanted(config_file, config)) {
          pthread_sigmask(SIG_BLOCK, &hangup, nullptr);  // pending until the new one runs
          restart = true;
          io.stop();
          return;
        }
        await_hangup();
      });
    };
    await_hangup();
    const auto bound = server.local_endpoint();
    ar::log::info("{} listening on {}:{}, state in {}, at most {} connections", ar::kVersion,
                  bound.address().to_string(), bound.port(), config.state_dir.string(),
                  limits.max_connections);
    io.run();
    workers.join();
    engine.stop();
  } catch (const std::exception& e) {
    ar::log::error("{}", e.what());
    return 1;
  }
  if (restart) {
    // Everything above is closed (the store, the sockets, the workers), as
    // at a stop; the same program and arguments start again.
    pthread_sigmask(SIG_BLOCK, &hangup, nullptr);
    execv("/proc/self/exe", argv);
    ar::log::error("cannot restart for the new configuration: {}", std::strerror(errno));
    return 1;
  }
  return 0;
}
