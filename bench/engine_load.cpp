// bench/steps.sh's program: the controller's own work with many protected
// steps. The real resume engine, node keeper, store (SQLite in WAL mode, on
// disk) and request service, wired as auto-resumed wires them (every
// outside call on a thread of its own), over the unit tests' in-memory
// Slurm: slurmctld's latency is not in a look (the look never waits on a
// call), so a look's time here is the engine's own. For each world (1 step;
// --steps steps; --steps steps with --repairs of them under repair), each
// step a job of 2 nodes of its own, users by the dozen:
//   - the registrations through the service (as srun's `register`), timed;
//   - --ticks looks, a second of the engine's clock apart, each timed
//     (p50, p99, the most);
//   - with repairs: each repair's srun asking for its verdict
//     (`verdict`, ended), timed, while the repairs stay under way (their
//     helper jobs pend);
//   - the store's size on disk (database and WAL).
// The last line: look p99 with --steps steps and --repairs repairs / with 1
// step. Exits 1 when a world did not hold (a repair ended, a step decided).

#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "autoresume/protocol.hpp"
#include "fakes.hpp"
#include "nodes/node_keeper.hpp"
#include "resume/engine.hpp"
#include "resume/verdicts.hpp"
#include "server/service.hpp"

namespace {

namespace proto = ar::proto;
using Millis = std::chrono::duration<double, std::milli>;
using std::chrono::steady_clock;

struct Figures {
  std::vector<double> register_ms;
  std::vector<double> look_ms;
  std::vector<double> verdict_ms;
  std::uintmax_t store_bytes = 0;
  int repairing = 0;
  int registered = 0;
};

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::ranges::sort(v);
  const auto at = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(at, v.size() - 1)];
}

std::string node_name(int i) { return fmt::format("node{}", i); }

// One controller's engine, keeper, store and service over the fakes:
// `steps` jobs of 2 nodes each, step 0 of each protected; the first
// `repairs` jobs' second node down before the first look; spares as many.
class World : public ar::test::Fakes {
 public:
  World(int steps, int repairs) : steps_(steps), repairs_(repairs) {
    slurm.add_nodes(2 * steps + repairs);
    slurm.helpers_start = false;  // every repair waits for its helper job
    config.heartbeat_timeout = std::chrono::milliseconds{0};    // no agents
    config.slurm_read_interval = std::chrono::milliseconds{0};  // every look reads
    config.repair_timeout = std::chrono::seconds{24 * 3600};
    store_ = std::make_unique<ar::Store>(dir.path, clock);
    keeper_ = std::make_unique<ar::NodeKeeper>(*store_, config, slurm, clock, prober, runner);
    verdicts_ = std::make_unique<ar::Verdicts>(*store_, reports, clock, config);
    engine_ = std::make_unique<ar::Engine>(*store_, config, *keeper_, slurm, clock, prober, reports,
                                           *verdicts_);
    service_ = std::make_unique<ar::Service>(
        *store_, slurm, clock, [] {}, reports, *verdicts_, keeper_.get(), &config);
  }

  Figures run(int ticks, int verdicts) {
    Figures out;
    for (int i = 0; i < steps_; ++i) {
      const auto job = job_id(i);
      const auto first = 2 * i + 1;
      slurm.add_job(job, owner(i), {node_name(first), node_name(first + 1)});
      const auto nodelist = fmt::format("node[{}-{}]", first, first + 1);
      slurm.add_step(job, 0, nodelist);
      const proto::json fields{{"job_id", job},
                               {"step_id", 0},
                               {"run_id", run_id(i)},
                               {"attempt", 0},
                               {"argv", {"srun", "--auto-resume=1", "python", "train.py"}},
                               {"cwd", "/home/user/run"},
                               {"nodelist", nodelist}};
      const auto t0 = steady_clock::now();
      const auto reply = ask("register", fields, owner(i));
      out.register_ms.push_back(Millis(steady_clock::now() - t0).count());
      if (!reply.value("ok", false)) throw std::runtime_error("register refused: " + reply.dump());
    }
    for (int i = 0; i < repairs_; ++i) slurm.nodes[node_name(2 * i + 2)].down = true;
    // As auto-resumed starts them: a look waits for a read at most
    // Engine::kReadWait, and on no other call.
    engine_->start_calls();
    for (int t = 0; t < ticks; ++t) {
      clock.advance(std::chrono::seconds{1});
      const auto t0 = steady_clock::now();
      engine_->tick();
      out.look_ms.push_back(Millis(steady_clock::now() - t0).count());
      // The calls the look started answer meanwhile, as between looks.
      std::this_thread::sleep_for(std::chrono::milliseconds{5});
    }
    for (int v = 0; repairs_ > 0 && v < verdicts; ++v) {
      const auto i = v % repairs_;
      const proto::json fields{{"run_id", run_id(i)}, {"attempt", 0}, {"ended", true}};
      const auto t0 = steady_clock::now();
      const auto reply = ask("verdict", fields, owner(i));
      out.verdict_ms.push_back(Millis(steady_clock::now() - t0).count());
      if (reply["result"].value("verdict", "") != "wait")
        throw std::runtime_error("a repair's verdict is not 'wait': " + reply.dump());
    }
    for (int i = 0; i < steps_; ++i) {
      const auto step = store_->find(run_id(i), 0);
      if (step && step->state == ar::StepState::repairing) ++out.repairing;
      if (step && step->state == ar::StepState::registered) ++out.registered;
    }
    for (const auto& entry : std::filesystem::directory_iterator(dir.path))
      if (entry.is_regular_file()) out.store_bytes += entry.file_size();
    return out;
  }

 private:
  // Above the in-memory Slurm's helper job ids (5000 on).
  static std::uint32_t job_id(int i) { return 1'000'000 + static_cast<std::uint32_t>(i); }
  static uid_t owner(int i) { return 2000 + static_cast<uid_t>(i % 48); }
  static std::string run_id(int i) { return fmt::format("run-{}", i); }
  proto::json ask(const std::string& op, const proto::json& fields, uid_t caller) {
    const auto request = proto::parse_request(proto::make_request(1, op, fields));
    return proto::json::parse(service_->handle(request, caller, "127.0.0.1"));
  }

  int steps_;
  int repairs_;
  std::unique_ptr<ar::Store> store_;
  std::unique_ptr<ar::NodeKeeper> keeper_;
  std::unique_ptr<ar::Verdicts> verdicts_;
  std::unique_ptr<ar::Engine> engine_;
  std::unique_ptr<ar::Service> service_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The resume engine's looks, registrations and verdicts with many protected steps"};
  int steps = 1000;
  int repairs = 8;
  int ticks = 200;
  int verdicts = 400;
  app.add_option("--steps", steps, "protected steps, each a 2-node job of its own")
      ->check(CLI::Range(1, 100'000));
  app.add_option("--repairs", repairs, "of them, under repair throughout")
      ->check(CLI::Range(0, 1'000));
  app.add_option("--ticks", ticks, "looks timed per world")->check(CLI::Range(1, 100'000));
  app.add_option("--verdicts", verdicts, "verdict requests timed (with repairs)")
      ->check(CLI::Range(1, 100'000));
  CLI11_PARSE(app, argc, argv);
  if (repairs > steps) {
    fmt::print(stderr, "engine-load: --repairs {} is more than --steps {}\n", repairs, steps);
    return 2;
  }
  // Quiet: the engine logs every repair's step to stderr.
  struct World1 {
    int steps, repairs;
  };
  const std::vector<World1> worlds{{1, 0}, {steps, 0}, {steps, repairs}};
  fmt::print("{:>6} {:>7} {:>6} {:>13} {:>9} {:>9} {:>8} {:>11} {:>11} {:>9}\n", "steps", "repairs",
             "looks", "register p50", "look p50", "look p99", "look max", "verdict p50",
             "verdict p99", "store");
  double base_p99 = 0;
  double last_p99 = 0;
  for (const auto& w : worlds) {
    Figures f;
    try {
      World world(w.steps, w.repairs);
      f = world.run(ticks, verdicts);
    } catch (const std::exception& e) {
      fmt::print(stderr, "engine-load: {} steps, {} repairs: {}\n", w.steps, w.repairs, e.what());
      return 1;
    }
    if (f.repairing != w.repairs || f.registered != w.steps - w.repairs) {
      fmt::print(stderr,
                 "engine-load: {} steps, {} repairs: after the looks {} were under repair and "
                 "{} registered: the world did not hold\n",
                 w.steps, w.repairs, f.repairing, f.registered);
      return 1;
    }
    const auto p99 = quantile(f.look_ms, 0.99);
    if (&w == &worlds.front()) base_p99 = p99;
    last_p99 = p99;
    const auto verdict = [&](double q) {
      return f.verdict_ms.empty() ? std::string("-")
                                  : fmt::format("{:.2f} ms", quantile(f.verdict_ms, q));
    };
    fmt::print(
        "{:>6} {:>7} {:>6} {:>10.2f} ms {:>6.2f} ms {:>6.2f} ms {:>5.1f} ms {:>11} {:>11} {:>5} "
        "KiB\n",
        w.steps, w.repairs, f.look_ms.size(), quantile(f.register_ms, 0.5),
        quantile(f.look_ms, 0.5), p99, *std::ranges::max_element(f.look_ms), verdict(0.5),
        verdict(0.99), f.store_bytes / 1024);
  }
  fmt::print(
      "look p99 with {} steps and {} repairs / with 1 step: {:.2f} ms / {:.2f} ms = x{:.1f} "
      "(goal: at most 50 ms)\n",
      steps, repairs, last_p99, base_p99, base_p99 > 0 ? last_p99 / base_p99 : 0.0);
  return 0;
}
