// auto-resume-agent: the node agent. Sends this node's heartbeat to
// auto-resumed every --interval seconds over the plugin's authenticated
// transport (munge, as root), so that a hung node is found in seconds rather
// than after Slurm's SlurmdTimeout. A heartbeat's reply may name other nodes
// the controller cannot reach: the agent probes their slurmd from here and
// says what it found (a second vantage point, before the controller takes a
// node for dead). Heartbeats go from the node's NodeAddr
// (or --source): the controller takes them only from the node's address. On SIGTERM or SIGINT it
// says goodbye, and the controller stops watching the node until it is heard again.
//
// Each heartbeat also carries what the node's progress files say
// (progress.hpp): how long ago each task of a protected step beat, and its
// training step. The agent, not the step daemon, reads them: it already
// holds a session with the controller and beats every interval, so the
// progress costs no connection of its own, and it outlives any one step
// (a step daemon's thread would add to Slurm's own process what a stuck
// file system could hold up).
//
// With --dcgm-policy it also listens to DCGM's policy violations (`dcgmi
// policy --reg`): an XID or another violation marks the node FAIL with
// "Action:Replace dcgm: ..." the moment DCGM reports it, which the
// controller acts on like any failed health check.

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/core.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "autoresume/client.hpp"
#include "autoresume/connect.hpp"
#include "autoresume/cross_check.hpp"
#include "autoresume/health.hpp"
#include "autoresume/health_dcgm.hpp"
#include "autoresume/keyvalue.hpp"
#include "autoresume/process.hpp"
#include "autoresume/progress.hpp"
#include "autoresume/progress_files.hpp"
#include "autoresume/protocol.hpp"
#include "autoresume/text.hpp"
#include "autoresume/version.hpp"
#include "node_name.hpp"
#include "slurm_adapter.hpp"

namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

void log_line(const std::string& text) {
  fmt::print(stderr, "auto-resume-agent: {}\n", text);
  std::fflush(stderr);
}

std::atomic<bool> g_stopping{false};

// One line of `dcgmi policy --reg`'s output: a violation marks the node
// FAIL (once for the same violation: `last_mark`); an application's XID or
// dcgmi's own error is logged.
void on_policy_line(ar::health::DcgmPolicyListener& listener, const std::string& line,
                    const std::string& node, std::string& last_mark) {
  const auto result = listener.feed(line);
  if (!result) return;
  if (result->status != ar::health::Status::fail || result->detail.starts_with("dcgmi policy: ")) {
    // An application's XID, or dcgmi's own error (it exits; started again).
    log_line(fmt::format("dcgm: {}", result->detail));
    return;
  }
  const auto reason = ar::health::node_reason(*result, ar::health::Action::replace);
  if (reason == last_mark) return;  // the same violation again
  try {
    ar::slurm::set_node_fail(node, reason);
    last_mark = reason;
    log_line(fmt::format("dcgm: marked {} FAIL: {}", node, reason));
  } catch (const std::exception& e) {
    log_line(fmt::format("dcgm: cannot mark {} ({}): {}", node, reason, e.what()));
  }
}

// Runs `dcgmi policy [-g GROUP] --reg` and feeds its lines to the listener
// until the agent stops; a dcgmi that exits (no host engine yet, a restart
// of it) is started again after a pause. A violation marks the node FAIL.
void listen_to_dcgm(const std::string& dcgmi, const std::string& group, const std::string& node) {
  std::string last_mark;
  while (!g_stopping.load()) {
    std::vector<std::string> words{dcgmi, "policy"};
    if (!group.empty()) words.insert(words.end(), {"-g", group});
    words.emplace_back("--reg");
    ar::Spawned child;
    std::string spawn_error;
    try {
      child = ar::spawn_command(words);
    } catch (const std::exception& e) {
      spawn_error = e.what();
    }
    const auto pid = child.pid;
    const int output = child.output;
    if (!spawn_error.empty()) {
      log_line(fmt::format("dcgm: {}", spawn_error));
    } else {
      ar::health::DcgmPolicyListener listener;
      std::string pending;
      for (;;) {
        pollfd p{output, POLLIN, 0};
        if (g_stopping.load()) break;
        if (poll(&p, 1, 500) <= 0) continue;
        char buffer[4096];
        const auto n = read(output, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        pending.append(buffer, static_cast<std::size_t>(n));
        for (auto end = pending.find('\n'); end != std::string::npos; end = pending.find('\n')) {
          const auto line = pending.substr(0, end);
          pending.erase(0, end + 1);
          on_policy_line(listener, line, node, last_mark);
        }
      }
      // dcgmi unregisters on SIGTERM; one that does not end within 2 s is killed.
      kill(-pid, SIGTERM);
      int status = 0;
      for (int i = 0; waitpid(pid, &status, WNOHANG) == 0; ++i) {
        if (i == 20) kill(-pid, SIGKILL);
        std::this_thread::sleep_for(std::chrono::milliseconds{100});
      }
      if (!g_stopping.load())
        log_line(fmt::format("dcgm: {} policy --reg ended (status {}); again in 10 s", dcgmi,
                             WIFEXITED(status) ? WEXITSTATUS(status) : -1));
    }
    if (output >= 0) close(output);
    for (int i = 0; i < 100 && !g_stopping.load(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds{100});
  }
}

// The quick checks the controller asks for after a protected step failed
// on this node (docs/resume.md, "Hangs and crashes"): the checker (`PATH
// --node NODE`: auto-resume-healthcheck's interface, which skips the
// active checks on a node that runs a job, and marks the node FAIL
// "Action:Replace CHECK: ..." when one fails, as from slurmd's
// HealthCheckProgram) runs on a thread of its own, so that no heartbeat
// waits for it; one at a time. Its outcome goes with each heartbeat while
// the controller still asks for it.
class QuickChecks {
 public:
  QuickChecks(std::string program, std::string node)
      : program_(std::move(program)), node_(std::move(node)) {}
  ~QuickChecks() {
    if (worker_.joinable()) worker_.join();
  }
  QuickChecks(const QuickChecks&) = delete;
  QuickChecks& operator=(const QuickChecks&) = delete;

  // The controller's ask in a heartbeat's reply (none: it asks nothing).
  void on_ask(const std::optional<ar::proto::CheckAsk>& ask) {
    std::lock_guard lock(mutex_);
    asked_ = ask ? ask->id : 0;
    if (!ask || ask->id == started_ || running_) return;
    if (worker_.joinable()) worker_.join();
    started_ = ask->id;
    running_ = true;
    worker_ = std::thread([this, id = ask->id, timeout = ask->timeout_ms] { run(id, timeout); });
  }
  // What to tell the controller with the next heartbeat.
  std::optional<ar::proto::CheckDone> result() const {
    std::lock_guard lock(mutex_);
    if (!done_ || done_->id != asked_) return std::nullopt;
    return done_;
  }

 private:
  void run(std::uint64_t id, std::uint32_t timeout_ms) {
    ar::proto::CheckDone done{id, true, {}};
    if (program_ == "none") {
      done.detail = "no checker (--failure-check none)";
    } else {
      // A margin for the answer to reach the controller within its wait.
      const auto limit = std::chrono::milliseconds{timeout_ms * 4 / 5};
      const auto out = ar::run_command({program_, "--node", node_},
                                       std::max(limit, std::chrono::milliseconds{1}));
      // Its lines that failed, else its last words.
      std::string failed;
      std::size_t start = 0;
      while (start < out.output.size()) {
        auto end = out.output.find('\n', start);
        if (end == std::string::npos) end = out.output.size();
        const auto line = out.output.substr(start, end - start);
        if (line.find(": fail: ") != std::string::npos)
          failed += (failed.empty() ? "" : "; ") + line;
        start = end + 1;
      }
      if (out.status == 1) {
        done.passed = false;
        done.detail = failed.empty() ? ar::printable(out.output) : ar::printable(failed);
      } else if (out.status != 0) {
        // Nothing could be told: no node is taken on that.
        done.detail = "the checks could not tell: " +
                      ar::printable(out.error.empty() ? out.output : out.error);
      }
      if (done.detail.size() > ar::proto::kMaxCheckDetailBytes)
        done.detail.resize(ar::proto::kMaxCheckDetailBytes);
      log_line(fmt::format("quick checks (ask {}): {}{}", id, done.passed ? "passed" : "failed",
                           done.detail.empty() ? "" : ": " + done.detail));
    }
    std::lock_guard lock(mutex_);
    done_ = std::move(done);
    running_ = false;
  }

  const std::string program_;
  const std::string node_;
  mutable std::mutex mutex_;
  std::thread worker_;
  std::uint64_t asked_ = 0;    // the controller's latest ask (0: none)
  std::uint64_t started_ = 0;  // the last ask run
  bool running_ = false;
  std::optional<ar::proto::CheckDone> done_;
};

// What the command line asks for.
struct Options {
  std::string controller = env_or("AUTO_RESUME_CONTROLLER", "127.0.0.1:7860");
  std::string munge_socket = env_or("AUTO_RESUME_MUNGE_SOCKET", "");
  uid_t controller_uid = 0;
  std::string node = ar::this_node_name();
  std::string source;  // empty: the node's NodeAddr
  double interval_s = 2;
  bool dcgm_policy = false;
  std::string dcgm_group;
  std::string dcgmi = "dcgmi";
  std::string progress_dir = ar::kDefaultProgressDir;
  std::string failure_check = "auto-resume-healthcheck";
};

// The command line's options, bound to `options` (which must stay put).
void add_options(CLI::App& app, Options& options) {
  app.add_option("--controller", options.controller,
                 "auto-resumed's HOST:PORT (env AUTO_RESUME_CONTROLLER)")
      ->capture_default_str();
  app.add_option("--munge-socket", options.munge_socket,
                 "munged's socket (env AUTO_RESUME_MUNGE_SOCKET; default: munge's own)");
  app.add_option("--controller-uid", options.controller_uid,
                 "The uid auto-resumed runs as, if not root (env AUTO_RESUME_CONTROLLER_UID)")
      ->envname("AUTO_RESUME_CONTROLLER_UID")
      ->capture_default_str();
  app.add_option("--node", options.node, "This node's name in slurm.conf")->capture_default_str();
  app.add_option("--source", options.source,
                 "The address heartbeats are sent from; the controller takes a node's heartbeats "
                 "only from its NodeAddr, NodeHostname or heartbeat_bind (default: the node's "
                 "NodeAddr as slurmctld has it; 'any': the system's choice)");
  app.add_option("--interval", options.interval_s,
                 "Seconds between heartbeats (keep it well under the controller's "
                 "heartbeat_timeout)")
      ->check(CLI::Range(0.1, 60.0))
      ->capture_default_str();
  app.add_flag("--dcgm-policy", options.dcgm_policy,
               "Listen to DCGM's policy violations (dcgmi policy --reg) and mark the node FAIL "
               "on one (set the policy first: dcgmi policy --set ...)");
  app.add_option("--dcgm-group", options.dcgm_group,
                 "The DCGM group whose policy is watched (default: "
                 "dcgmi's default group, all GPUs)");
  app.add_option("--dcgmi", options.dcgmi, "The dcgmi to run")->capture_default_str();
  app.add_option("--progress-dir", options.progress_dir,
                 "Where the protected steps' progress files are (the plugin's progress_dir): "
                 "each heartbeat reports how long ago each task beat")
      ->check([](const std::string& value) {
        return !value.empty() && value.front() == '/' ? std::string{} : "expected an absolute path";
      })
      ->capture_default_str();
  app.add_option("--failure-check", options.failure_check,
                 "The quick checks run when the controller asks, after a protected step failed "
                 "here: PATH --node NODE (auto-resume-healthcheck's interface: exit 1 when a "
                 "check failed, having marked the node); none: never")
      ->capture_default_str();
  app.set_version_flag("-V,--version", std::string("auto-resume-agent ") + ar::kVersion);
}

// The numeric address heartbeats go from: --source as given ("any": none),
// else the node's NodeAddr from slurmctld, resolved. Throws when slurmctld
// cannot say or the name does not resolve.
std::string source_address(const Options& options) {
  if (options.source == "any") return {};
  if (!options.source.empty()) return options.source;
  const auto address = ar::slurm::node_address(options.node);
  std::string error;
  const auto found = ar::net::resolve(address, 0, error);
  if (!found)
    throw std::runtime_error("NodeAddr " + address + " of " + options.node +
                             " does not resolve: " + error);
  auto numeric = ar::net::numeric_host(*found);
  if (numeric.empty())
    throw std::runtime_error("NodeAddr " + address + " of " + options.node +
                             " has no numeric address");
  return numeric;
}

// Sends a heartbeat every interval until one of `stop_signals` (blocked)
// arrives, then a goodbye: the signal. A failure is said when it starts and
// when it ends, not every interval.
int send_heartbeats(const Options& options, const ar::Endpoint& endpoint,
                    const sigset_t& stop_signals) {
  const auto interval = std::chrono::milliseconds(static_cast<long>(options.interval_s * 1000));
  const auto timeout = std::max(interval, std::chrono::milliseconds{1000});
  // One session for all heartbeats: munge once per connection, not per beat.
  // Made once the source address is known (slurmctld may be down at first).
  std::optional<ar::Client> client;
  bool said_truncated = false;
  QuickChecks checks(options.failure_check, options.node);
  auto send = [&](bool stopping) {
    if (!client) {
      const auto source = source_address(options);
      log_line(fmt::format("heartbeats go from {}", source.empty() ? "any address" : source));
      client.emplace(ar::ClientOptions{endpoint, timeout, options.munge_socket,
                                       options.controller_uid, source});
    }
    ar::proto::HeartbeatRequest beat{options.node, stopping, {}};
    beat.interval_ms = static_cast<std::uint32_t>(interval.count());
    if (!stopping) {
      auto scan =
          ar::scan_progress(options.progress_dir, options.node, std::chrono::system_clock::now());
      if (scan.truncated && !said_truncated)
        log_line(
            fmt::format("more progress files under {}/{} than a heartbeat carries ({} steps, "
                        "{} ranks): the rest is left out",
                        options.progress_dir, options.node, ar::proto::kMaxProgressSteps,
                        ar::proto::kMaxProgressRanks));
      said_truncated = scan.truncated;
      beat.progress = std::move(scan.steps);
      beat.checked = checks.result();
    }
    auto reply = client->send(beat);
    if (stopping) return;
    checks.on_ask(reply.check);
    // Cross-checks: the nodes the controller cannot reach are probed from
    // here, and what was found goes back at once.
    ar::answer_cross_checks(*client, options.node, beat.interval_ms, std::move(reply));
  };
  std::string last_error;
  for (;;) {
    try {
      send(false);
      if (!last_error.empty()) log_line("the controller answers again");
      last_error.clear();
    } catch (const std::exception& e) {
      if (last_error != e.what()) log_line(fmt::format("heartbeat not taken: {}", e.what()));
      last_error = e.what();
    }
    timespec wait{static_cast<time_t>(interval.count() / 1000),
                  static_cast<long>(interval.count() % 1000) * 1'000'000};
    const int signal = sigtimedwait(&stop_signals, nullptr, &wait);
    if (signal < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (signal > 0) {
      try {
        send(true);
      } catch (const std::exception& e) {
        log_line(fmt::format("goodbye not taken: {}", e.what()));
      }
      return signal;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"auto-resume-agent: send this node's heartbeat to auto-resumed",
               "auto-resume-agent"};
  Options options;
  add_options(app, options);
  CLI11_PARSE(app, argc, argv);

  ar::Endpoint endpoint;
  try {
    endpoint = ar::parse_endpoint("--controller", options.controller);
  } catch (const ar::ConfigError& e) {
    fmt::print(stderr, "auto-resume-agent: {}\n", e.what());
    return 2;
  }
  if (unsigned char bytes[16]; !options.source.empty() && options.source != "any" &&
                               inet_pton(AF_INET, options.source.c_str(), bytes) != 1 &&
                               inet_pton(AF_INET6, options.source.c_str(), bytes) != 1) {
    fmt::print(stderr,
               "auto-resume-agent: --source '{}' is not a numeric IPv4 or IPv6 address (nor "
               "'any')\n",
               options.source);
    return 2;
  }
  if (options.dcgm_policy || options.source.empty()) {
    try {
      ar::slurm::init();  // marks go to slurmctld directly; NodeAddr comes from it
    } catch (const std::exception& e) {
      fmt::print(stderr, "auto-resume-agent: {}\n", e.what());
      return 2;
    }
  }
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGHUP);
  sigprocmask(SIG_BLOCK, &stop_signals, nullptr);

  log_line(fmt::format("{} sends heartbeats for {} to {} every {} s", ar::kVersion, options.node,
                       endpoint.str(), options.interval_s));
  std::thread dcgm;
  if (options.dcgm_policy)
    dcgm = std::thread(listen_to_dcgm, options.dcgmi, options.dcgm_group, options.node);
  const int signal = send_heartbeats(options, endpoint, stop_signals);
  log_line(fmt::format("signal {}: stopped", signal));
  g_stopping.store(true);
  if (dcgm.joinable()) dcgm.join();
  return 0;
}
