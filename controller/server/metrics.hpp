#pragma once
// The controller's metrics (metrics_listen, docs/metrics.md): what it
// counts as it goes (events as the store commits them, requests by op and
// outcome, provider calls, recoveries) and what a scrape reads from the
// store, the node keeper and the provisioner. No label names a job or a
// node: a label's values come from small fixed sets (ops, outcomes, event
// kinds, node groups).

#include <chrono>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "autoresume/process.hpp"
#include "server/metrics_text.hpp"

namespace ar {

class Store;
class NodeKeeper;
class Provisioner;

class ControllerMetrics {
 public:
  ControllerMetrics();

  // An event the store committed: its kind, and whether it is a node's
  // (a node's replacement and a step's node replaced are both "replaced").
  void event(std::string_view kind, bool node_event);
  // A request answered: its op (one the controller knows, else "other")
  // and outcome ("ok" or the error's code).
  void request(std::string_view op, std::string_view outcome);
  // A session's handshake: "opened", "refused" or "failed" (Server).
  void session(std::string_view outcome);
  // A provider call: "replace", "create", "terminate", "list" or
  // "slurmctld_restart"; outcome "ok", "failed" (an exit status but 0) or
  // "error" (did not run to an exit: timeout, not found, stopped).
  void provider_call(std::string_view op, std::string_view outcome, double seconds);
  // A protected step running again (its next attempt registered), this
  // long after its fault was detected.
  void recovered(double seconds);
  // One look of the resume engine took this long (Engine::run).
  void look(double seconds);

  // What a scrape reads besides the counters (each may be null).
  struct Sources {
    Store* store = nullptr;
    NodeKeeper* keeper = nullptr;
    const Provisioner* provisioner = nullptr;
    std::filesystem::path state_dir;
    std::chrono::milliseconds heartbeat_timeout{0};  // 0: no node counts as silent
  };
  // The exposition text, the gauges read now.
  std::string scrape(const Sources& sources);

  metrics::Registry& registry() { return registry_; }

 private:
  metrics::Registry registry_;
  std::mutex scrape_mutex_;  // one scrape at a time: each clears and sets the gauges
};

// A CommandRunner that times each call into `metrics` as a provider call,
// its op named by `op_of` (from the argv).
class MeteredRunner : public CommandRunner {
 public:
  using OpOf = std::function<std::string(const std::vector<std::string>& argv)>;
  MeteredRunner(CommandRunner& inner, ControllerMetrics& metrics, OpOf op_of)
      : inner_(inner), metrics_(metrics), op_of_(std::move(op_of)) {}

  CommandResult run(const std::vector<std::string>& argv,
                    std::chrono::milliseconds timeout) override;
  CommandResult run_with_env(const std::vector<std::string>& argv,
                             std::chrono::milliseconds timeout,
                             const std::vector<std::string>& environment) override;
  void cancel_all() override { inner_.cancel_all(); }

 private:
  CommandResult timed(const std::vector<std::string>& argv,
                      const std::function<CommandResult()>& call);
  CommandRunner& inner_;
  ControllerMetrics& metrics_;
  OpOf op_of_;
};

}  // namespace ar
