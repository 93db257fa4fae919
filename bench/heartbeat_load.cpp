// ar-heartbeat-load: heartbeats of many nodes at once, for bench/scale.sh.
// Each simulated node is what a node agent is to the controller: one
// session of its own (ar::Client: munge, the session's keys, signed
// requests), heartbeats every --interval seconds from its own loopback
// address, and the cross-checks the replies ask for answered as the agent
// answers them. Nodes are PREFIX1..PREFIXcount, at consecutive addresses
// from --first-address (last octets 1 to 254); --print-conf prints the
// slurm.conf lines that declare them so.
//
// At the end (after --seconds, or on SIGTERM or SIGINT) each node says
// goodbye, as a stopped agent does, and it prints one line:
//   heartbeats: N nodes, S sent (R/s), E failed, late L; reply p50 A ms,
//   p99 B ms, max C ms; sessions opened O
// counting only what happened after --warmup seconds. A reply's latency is
// a heartbeat's round trip on a session already open; the first of each
// node (munge and the session's handshake) is counted as an opening.

#include <arpa/inet.h>
#include <fmt/core.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "autoresume/client.hpp"
#include "autoresume/cross_check.hpp"
#include "autoresume/endpoint.hpp"
#include "autoresume/protocol.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::atomic<bool> g_stop{false};
extern "C" void on_signal(int /*signal*/) { g_stop.store(true); }

struct Options {
  std::string controller = "127.0.0.1:7860";
  std::string munge_socket;
  std::string prefix = "hb";
  unsigned count = 100;
  std::string first_address = "127.1.0.1";
  double interval_s = 2;
  unsigned threads = 4;
  double seconds = 60;
  double warmup_s = 0;
  bool print_conf = false;
};

// The count addresses from `first`, each last octet from 1 to 254.
std::vector<std::string> addresses(const std::string& first, unsigned count) {
  in_addr start{};
  if (inet_pton(AF_INET, first.c_str(), &start) != 1)
    throw std::invalid_argument("--first-address '" + first + "' is not a numeric IPv4 address");
  std::uint32_t at = ntohl(start.s_addr);
  std::vector<std::string> out;
  out.reserve(count);
  while (out.size() < count) {
    const auto last = at & 0xffU;
    if (last == 0 || last == 255) {
      ++at;
      continue;
    }
    if ((at >> 24) != 127)
      throw std::invalid_argument("--first-address '" + first + "' leaves 127.0.0.0/8 before " +
                                  std::to_string(count) + " addresses");
    in_addr a{htonl(at)};
    char text[INET_ADDRSTRLEN];
    out.emplace_back(inet_ntop(AF_INET, &a, text, sizeof text));
    ++at;
  }
  return out;
}

struct Node {
  std::string name;
  std::string address;
  std::optional<ar::Client> client;
  Clock::time_point due;
};

// What one thread saw.
struct Tally {
  std::uint64_t sent = 0;
  std::uint64_t failed = 0;
  std::uint64_t late = 0;  // sent over one interval after it was due
  std::uint64_t opened = 0;
  std::vector<float> latency_ms;
  std::map<std::string, std::uint64_t> errors;  // message -> count
};

void run_nodes(std::vector<Node>& nodes, const Options& options, const ar::Endpoint& endpoint,
               Clock::time_point measure_from, Clock::time_point end, Tally& tally) {
  const auto interval = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options.interval_s));
  const auto interval_ms = static_cast<std::uint32_t>(options.interval_s * 1000);
  std::size_t next = 0;
  while (!g_stop.load() && !nodes.empty()) {
    auto& node = nodes[next];
    next = (next + 1) % nodes.size();
    auto now = Clock::now();
    if (node.due > end) break;
    while (now < node.due && !g_stop.load()) {
      std::this_thread::sleep_for(std::min<Clock::duration>(node.due - now, 100ms));
      now = Clock::now();
    }
    if (g_stop.load()) break;
    const bool counted = now >= measure_from;
    if (counted && now - node.due > interval) ++tally.late;
    node.due += interval;
    if (node.due < now) node.due = now + interval;  // behind: not a burst to catch up
    const bool opening = !node.client;
    try {
      if (opening)
        node.client.emplace(ar::ClientOptions{
            endpoint,
            std::max<std::chrono::milliseconds>(2 * std::chrono::milliseconds{interval_ms}, 2000ms),
            options.munge_socket, 0, node.address});
      ar::proto::HeartbeatRequest beat{node.name, false, {}};
      beat.interval_ms = interval_ms;
      const auto start = Clock::now();
      auto reply = node.client->send(beat);
      const auto took = std::chrono::duration<float, std::milli>(Clock::now() - start).count();
      if (counted) {
        ++tally.sent;
        if (opening)
          ++tally.opened;
        else
          tally.latency_ms.push_back(took);
      }
      ar::answer_cross_checks(*node.client, node.name, interval_ms, std::move(reply));
    } catch (const std::exception& e) {
      node.client.reset();  // a new session next time
      if (counted) {
        ++tally.failed;
        ++tally.errors[e.what()];
      }
    }
  }
  // Goodbyes, as agents stopped by their service manager say them: the
  // controller stops watching the nodes.
  for (auto& node : nodes) {
    if (!node.client) continue;
    try {
      node.client->send(ar::proto::HeartbeatRequest{node.name, true, {}});
    } catch (const std::exception&) {
      // The controller watches it until heartbeat_timeout.
    }
  }
}

float percentile(std::vector<float>& values, double p) {
  if (values.empty()) return 0;
  const auto at = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(at), values.end());
  return values[at];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ar-heartbeat-load: heartbeats of many nodes, each with its own session and address",
               "ar-heartbeat-load"};
  Options options;
  app.add_option("--controller", options.controller, "auto-resumed's HOST:PORT")
      ->capture_default_str();
  app.add_option("--munge-socket", options.munge_socket, "munged's socket (default: munge's own)");
  app.add_option("--prefix", options.prefix, "The nodes' names: PREFIX1..PREFIXcount")
      ->capture_default_str();
  app.add_option("--count", options.count, "How many nodes")
      ->check(CLI::Range(1U, 100'000U))
      ->capture_default_str();
  app.add_option("--first-address", options.first_address,
                 "The first node's address, in 127.0.0.0/8; the others follow it")
      ->capture_default_str();
  app.add_option("--interval", options.interval_s, "Seconds between a node's heartbeats")
      ->check(CLI::Range(0.1, 60.0))
      ->capture_default_str();
  app.add_option("--threads", options.threads, "Threads sending (the nodes are shared out)")
      ->check(CLI::Range(1U, 256U))
      ->capture_default_str();
  app.add_option("--seconds", options.seconds, "How long to run")
      ->check(CLI::Range(0.1, 86'400.0))
      ->capture_default_str();
  app.add_option("--warmup", options.warmup_s, "Seconds at first that are not counted")
      ->check(CLI::Range(0.0, 86'400.0))
      ->capture_default_str();
  app.add_flag("--print-conf", options.print_conf,
               "Print the slurm.conf lines that declare the nodes, and exit");
  CLI11_PARSE(app, argc, argv);

  std::vector<std::string> where;
  ar::Endpoint endpoint;
  try {
    where = addresses(options.first_address, options.count);
    endpoint = ar::parse_endpoint("--controller", options.controller);
  } catch (const std::exception& e) {
    fmt::print(stderr, "ar-heartbeat-load: {}\n", e.what());
    return 2;
  }
  if (options.print_conf) {
    for (unsigned i = 0; i < options.count; ++i)
      fmt::print("NodeName={}{} NodeAddr={} CPUs=1 State=UNKNOWN\n", options.prefix, i + 1,
                 where[i]);
    return 0;
  }
  // A descriptor per node, and some.
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);

  const auto start = Clock::now();
  const auto interval = std::chrono::duration<double>(options.interval_s);
  const auto measure_from = start + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(options.warmup_s));
  const auto end = start + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(options.seconds));
  // Node i is due first at start + interval * i / count: the beats spread
  // over the interval, as agents started at different times.
  std::vector<std::vector<Node>> shares(options.threads);
  for (unsigned i = 0; i < options.count; ++i)
    shares[i % options.threads].push_back(
        {options.prefix + std::to_string(i + 1), where[i], std::nullopt,
         start + std::chrono::duration_cast<Clock::duration>(interval * i / options.count)});
  std::vector<Tally> tallies(options.threads);
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < options.threads; ++t)
    threads.emplace_back(run_nodes, std::ref(shares[t]), std::cref(options), std::cref(endpoint),
                         measure_from, end, std::ref(tallies[t]));
  for (auto& thread : threads) thread.join();

  Tally all;
  for (auto& t : tallies) {
    all.sent += t.sent;
    all.failed += t.failed;
    all.late += t.late;
    all.opened += t.opened;
    all.latency_ms.insert(all.latency_ms.end(), t.latency_ms.begin(), t.latency_ms.end());
    for (const auto& [what, n] : t.errors) all.errors[what] += n;
  }
  const double counted_s =
      std::max(1e-3, std::chrono::duration<double>(Clock::now() - measure_from).count());
  for (const auto& [what, n] : all.errors)
    fmt::print(stderr, "ar-heartbeat-load: {} x {}\n", n, what);
  const auto max = all.latency_ms.empty()
                       ? 0.0F
                       : *std::max_element(all.latency_ms.begin(), all.latency_ms.end());
  fmt::print(
      "heartbeats: {} nodes, {} sent ({:.0f}/s), {} failed, late {}; reply p50 {:.2f} ms, p99 "
      "{:.2f} ms, max {:.2f} ms; sessions opened {}\n",
      options.count, all.sent, static_cast<double>(all.sent) / counted_s, all.failed, all.late,
      static_cast<double>(percentile(all.latency_ms, 0.50)),
      static_cast<double>(percentile(all.latency_ms, 0.99)), static_cast<double>(max), all.opened);
  return 0;
}
