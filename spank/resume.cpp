// srun side of a resume: ask the controller for the verdict while the step
// runs (a watcher thread) and once it has ended (the exit hook), then act on
// it: run the step again by executing srun anew, or end with the verdict's
// exit status and a message.

#include "autoresume/resume.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "autoresume/client.hpp"
#include "autoresume/munge_cred.hpp"
#include "autoresume/protocol.hpp"
#include "autoresume/text.hpp"
#include "plugin.hpp"

namespace ar::spank {

namespace {

using namespace std::chrono_literals;

using SteadyClock = std::chrono::steady_clock;

// How often srun asks while the step runs, and while it waits after the end.
constexpr auto kRunningPoll = 1000ms;
constexpr auto kEndedPoll = 500ms;

// One line on srun's stderr, like srun's own messages, its control
// characters escaped (it carries the controller's words). Safe from any
// thread.
__attribute__((format(printf, 1, 2))) void say(const char* format, ...) {
  char line[4096];
  va_list args;
  va_start(args, format);
  std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  flockfile(stderr);
  std::fprintf(stderr, "%s: %s\n", kTag, printable(line).c_str());
  std::fflush(stderr);
  funlockfile(stderr);
}

// Sends `request` on srun's session with the controller, within `timeout`
// (0: connect_timeout); the controller's typed reply. Throws ClientError
// (with a refusal's code and message), ProtocolError (a malformed reply)
// or MungeError.
template <typename Request>
typename Request::Reply ask(const PluginConfig& config, const Request& request,
                            std::chrono::milliseconds timeout = 0ms) {
  return controller_session(config, timeout).send(request);
}

using Answer = proto::VerdictReply;

Answer ask_verdict(const PluginConfig& config, const ProtectedStep& step, bool ended,
                   std::chrono::milliseconds timeout = 0ms) {
  return ask(config, proto::VerdictRequest{step.run_id, step.attempt, ended}, timeout);
}

// Marks every descriptor above 2 close-on-exec: closing them outright
// would pull them from under srun's other threads.
void close_on_exec_above_stderr() {
#ifdef CLOSE_RANGE_CLOEXEC
  if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
#endif
  const long max = sysconf(_SC_OPEN_MAX);
  for (int fd = 3; fd < (max > 0 ? max : 65536); ++fd) {
    const int flags = fcntl(fd, F_GETFD);
    if (flags >= 0) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
}

using Variables = std::vector<std::pair<std::string, std::string>>;

// This srun's environment with `set`'s variables (in place of any of the
// same name) and without those `drop` names. Built as a copy, not with
// setenv, since srun's other threads may be reading the environment.
std::vector<std::string> environment_with(const Variables& set,
                                          const std::function<bool(std::string_view)>& drop) {
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const auto name = text.substr(0, text.find('='));
    const bool replaced =
        std::any_of(set.begin(), set.end(), [&](const auto& kv) { return kv.first == name; });
    if (replaced || (drop && drop(name))) continue;
    env.emplace_back(text);
  }
  for (const auto& [name, value] : set) env.push_back(name + "=" + value);
  return env;
}

// The environment for the next attempt: this one's, with the repaired
// allocation's variables and the relaunch marker.
std::vector<std::string> relaunch_environment(const ProtectedStep& step,
                                              const std::string& nodelist, const std::string& nodes,
                                              std::uint32_t resize) {
  const RelaunchMarker marker{step.run_id, step.attempt + 1, step.own_master_port};
  // The variables Slurm's own resize script sets; the task counts follow
  // from them, as the node count is the same as before.
  Variables set{{"SLURM_JOB_NODELIST", nodelist},
                {"SLURM_NODELIST", nodelist},
                {"SLURM_JOB_NUM_NODES", nodes},
                {"SLURM_NNODES", nodes},
                {kRelaunchVariable, marker.encode()}};
  // A step on fewer nodes: srun would read this one's task count (which
  // it set in its own environment) as -n; as many per node, or srun's
  // defaults.
  bool drop_tasks = false;
  if (resize > 0 && resize < step.nodes) {
    const char* tasks = std::getenv("SLURM_NTASKS");
    std::uint32_t count = 0;
    const std::string_view text(tasks != nullptr ? tasks : "");
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), count);
    const auto fewer = ec == std::errc() && end == text.data() + text.size()
                           ? resized_tasks(count, step.nodes, resize)
                           : std::nullopt;
    if (fewer) {
      set.emplace_back("SLURM_NTASKS", std::to_string(*fewer));
      set.emplace_back("SLURM_NPROCS", std::to_string(*fewer));
    } else {
      drop_tasks = true;
    }
  }
  return environment_with(set, [&](std::string_view name) {
    return (step.own_master_port && name == "MASTER_PORT") ||
           (drop_tasks && (name == "SLURM_NTASKS" || name == "SLURM_NPROCS"));
  });
}

// Executes srun anew with `args` and `env`; returns only if that failed,
// with srun as it was (said on its stderr).
void exec_srun(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  std::vector<char*> envp;
  for (const auto& entry : env) envp.push_back(const_cast<char*>(entry.c_str()));
  envp.push_back(nullptr);
  std::vector<char*> argv;
  for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::fflush(nullptr);

  // No signal meant for this srun may reach the next one.
  sigset_t all, before;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &before);
  const timespec zero{0, 0};
  while (sigtimedwait(&all, nullptr, &zero) > 0) {
  }
  // Handlers reset themselves at exec; what srun ignores and the user did
  // not (and the other way round) is set back to how srun started.
  const auto& st = state();
  std::vector<std::pair<int, struct sigaction>> changed;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    struct sigaction now {};
    if (sigaction(sig, nullptr, &now) != 0) continue;
    const bool ignored = now.sa_handler == SIG_IGN;
    const bool want_ignored = st.ignored_signals.contains(sig);
    if (ignored == want_ignored) continue;
    struct sigaction wanted {};
    wanted.sa_handler = want_ignored ? SIG_IGN : SIG_DFL;
    if (sigaction(sig, &wanted, nullptr) == 0) changed.emplace_back(sig, now);
  }
  close_on_exec_above_stderr();
  pthread_sigmask(SIG_SETMASK, &st.initial_mask, nullptr);
  execve("/proc/self/exe", argv.data(), envp.data());
  const int error = errno;
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  for (const auto& [sig, action] : changed) sigaction(sig, &action, nullptr);
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  say("cannot execute srun again: %s", std::strerror(error));
}

// Executes srun again for the next attempt; returns only if that failed,
// with srun as it was.
void relaunch(const ProtectedStep& step, const std::optional<Answer::Relaunch>& plan) {
  if (!plan || plan->nodelist.empty() || plan->num_nodes == 0) {
    say("cannot relaunch: the controller sent no node list (%s)",
        plan ? plan->to_json().dump().c_str() : "{}");
    return;
  }
  const auto& nodelist = plan->nodelist;
  const auto nodes = std::to_string(plan->num_nodes);
  const auto env_text = relaunch_environment(step, nodelist, nodes, plan->step_nodes);
  const auto args = relaunch_argv(step.argv, step.nodes, plan->step_nodes);
  say("relaunching step %u.%u of run %s as attempt %u on %s", step.job_id, step.step_id,
      step.run_id.c_str(), step.attempt + 1, nodelist.c_str());
  if (const auto dropped = dropped_node_options(step.argv, plan->step_nodes, step.nodes);
      !dropped.empty())
    say("the relaunch runs without %s: srun's node options name the earlier allocation%s",
        join(dropped, " ").c_str(),
        plan->step_nodes > 0
            ? (" (the step goes on on --nodes=" + std::to_string(plan->step_nodes) + ")").c_str()
            : "");
  exec_srun(args, env_text);
}

// Says a final verdict other than relaunch and ends srun with its status.
[[noreturn]] void end_with(const ProtectedStep& step, const Answer& answer) {
  say("step %u.%u (run %s, attempt %u): %s: %s", step.job_id, step.step_id, step.run_id.c_str(),
      step.attempt, std::string(to_string(answer.verdict)).c_str(), answer.message.c_str());
  std::fflush(nullptr);
  _exit(verdict_exit_status(answer.verdict).value_or(kExitGiveUp));
}

}  // namespace

class VerdictWatcher {
 public:
  VerdictWatcher(PluginConfig config, ProtectedStep step)
      : config_(std::move(config)), step_(std::move(step)), thread_([this] { loop(); }) {}
  ~VerdictWatcher() { stop(); }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wakeup_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop() {
    // The thread takes no signals: srun's own threads handle them.
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        if (wakeup_.wait_for(lock, kRunningPoll, [this] { return stopping_; })) return;
      }
      try {
        const auto answer = ask_verdict(config_, step_, false);
        if (answer.verdict == Verdict::relaunch) {
          relaunch(step_, answer.relaunch);
          return;  // failed: the exit hook tells the rest
        }
        if (is_final(answer.verdict)) {
          // The controller ended the step (or Slurm is ending the job):
          // srun need not wait for tasks on a dead node.
          end_with(step_, answer);
        }
      } catch (const std::exception&) {
        // Asked again in a second; the exit hook reports a lasting failure.
      }
    }
  }

  PluginConfig config_;
  ProtectedStep step_;
  std::mutex mutex_;
  std::condition_variable wakeup_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the rest is ready
};

void start_again(const RelaunchMarker& marker) {
  const auto& st = state();
  if (st.started_again >= kMaxStartsAgain) {
    say("srun was started again %u times for attempt %u of run %s; not again", st.started_again,
        marker.attempt, marker.run_id.c_str());
    return;
  }
  say("starting srun again for attempt %u of run %s", marker.attempt, marker.run_id.c_str());
  exec_srun(own_argv(), environment_with({{kRelaunchVariable, marker.encode()},
                                          {kAgainVariable, std::to_string(st.started_again + 1)}},
                                         {}));
}

void start_watcher(const PluginConfig& config, const ProtectedStep& step) {
  state().watcher = std::make_shared<VerdictWatcher>(config, step);
}

// Stop, do not relaunch: tells the controller, and ends srun.
[[noreturn]] void stop_waiting(const PluginConfig& config, const ProtectedStep& step, int sig) {
  const char* name = sigabbrev_np(sig);
  const std::string reason = std::string("srun got ") +
                             (name != nullptr ? std::string("SIG") + name : "a signal") +
                             " while waiting for the verdict";
  try {
    ask(config, proto::CancelRequest{step.run_id, step.attempt, reason});
  } catch (const std::exception& e) {
    say("could not tell the controller (%s)", e.what());
  }
  say("%s: not relaunching step %u.%u", reason.c_str(), step.job_id, step.step_id);
  std::fflush(nullptr);
  _exit(kExitCancelled);
}

namespace {

long long whole_seconds(SteadyClock::duration d) {
  return static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(d).count());
}

// A setting in seconds as the plugstack line gives it ("600", "2.5").
std::string setting_text(std::chrono::milliseconds d) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", static_cast<double>(d.count()) / 1000.0);
  return text;
}

// srun's wait for the verdict after its protected step ended, within the
// plugstack line's limits: verdict_timeout in all, unreachable_timeout
// without an answer, and no call past either (each call gets what is left,
// at most connect_timeout). At a limit srun stops waiting, says why, and
// keeps the step's own exit status.
class EndedWait {
 public:
  EndedWait(const PluginConfig& config, const ProtectedStep& step, const sigset_t& stop_signals)
      : config_(config), step_(step), stop_signals_(stop_signals) {}

  // ESPANK_SUCCESS: srun ends with the step's status; kFailure: a relaunch
  // failed. Does not return on a final verdict or a stop signal.
  int run() {
    say("step %u.%u ended; waiting for the controller's verdict (run %s, attempt %u)", step_.job_id,
        step_.step_id, step_.run_id.c_str(), step_.attempt);
    for (;;) {
      const auto now = SteadyClock::now();
      if (now >= deadline_) return stop_at_limit();
      try {
        const auto answer = ask_verdict(config_, step_, true, call_timeout(now));
        last_answer_ = SteadyClock::now();
        said_unreachable_ = false;
        if (const auto rc = act_on(answer)) return *rc;
      } catch (const std::exception& e) {
        const auto silent = SteadyClock::now() - last_answer_;
        if (silent >= config_.unreachable_timeout) {
          say("no answer from the controller at %s for %lld s (%s; unreachable_timeout=%s s); "
              "not relaunching step %u.%u, which keeps its own exit status",
              config_.controller.str().c_str(), whole_seconds(silent), e.what(),
              setting_text(config_.unreachable_timeout).c_str(), step_.job_id, step_.step_id);
          return ESPANK_SUCCESS;
        }
        if (!said_unreachable_) {
          say("cannot ask the controller at %s (%s); trying again",
              config_.controller.str().c_str(), e.what());
          said_unreachable_ = true;
        }
      }
      const timespec wait{0,
                          std::chrono::duration_cast<std::chrono::nanoseconds>(kEndedPoll).count()};
      if (const int sig = sigtimedwait(&stop_signals_, nullptr, &wait); sig > 0)
        stop_waiting(config_, step_, sig);
    }
  }

 private:
  // One call's timeout: within what is left of both limits.
  std::chrono::milliseconds call_timeout(SteadyClock::time_point now) const {
    const auto left = std::min(deadline_, last_answer_ + config_.unreachable_timeout) - now;
    const auto left_ms = std::chrono::duration_cast<std::chrono::milliseconds>(left);
    return std::clamp(left_ms, std::chrono::milliseconds{100}, config_.connect_timeout);
  }

  // What srun does on an answer: a status to return, or nothing to ask again.
  std::optional<int> act_on(const Answer& answer) {
    if (answer.verdict == Verdict::relaunch) {
      // Ctrl-C that came with the verdict still means stop.
      const timespec now{0, 0};
      if (const int sig = sigtimedwait(&stop_signals_, nullptr, &now); sig > 0)
        stop_waiting(config_, step_, sig);
      relaunch(step_, answer.relaunch);
      return kFailure;
    }
    if (answer.verdict == Verdict::no_fault) return ESPANK_SUCCESS;
    if (is_final(answer.verdict)) end_with(step_, answer);
    // The usual wait after a step (looking for a node at fault) goes
    // unsaid; a repair is worth a line per phase, and so are the quick
    // checks after a failed step.
    if (answer.message != last_message_ &&
        (answer.message.starts_with("repairing") ||
         answer.message.find("after the step failed") != std::string::npos)) {
      say("waiting: %s", answer.message.c_str());
      last_message_ = answer.message;
    }
    return std::nullopt;
  }

  // verdict_timeout passed without a final verdict: tell the controller, so
  // that it stops the repair, and keep the step's own exit status.
  int stop_at_limit() {
    const auto waited = SteadyClock::now() - started_;
    const std::string reason = "srun stopped waiting for the verdict after " +
                               std::to_string(whole_seconds(waited)) + " s (verdict_timeout)";
    say("no verdict from the controller at %s within verdict_timeout=%s s; not relaunching "
        "step %u.%u, which keeps its own exit status",
        config_.controller.str().c_str(), setting_text(config_.verdict_timeout).c_str(),
        step_.job_id, step_.step_id);
    try {
      ask(config_, proto::CancelRequest{step_.run_id, step_.attempt, reason});
    } catch (const std::exception& e) {
      say("could not tell the controller (%s)", e.what());
    }
    return ESPANK_SUCCESS;
  }

  const PluginConfig& config_;
  const ProtectedStep& step_;
  sigset_t stop_signals_;
  const SteadyClock::time_point started_ = SteadyClock::now();
  const SteadyClock::time_point deadline_ = started_ + config_.verdict_timeout;
  SteadyClock::time_point last_answer_ = started_;
  std::string last_message_;
  bool said_unreachable_ = false;
};

}  // namespace

int local_exit() {
  auto& st = state();
  if (st.watcher) {
    st.watcher->stop();
    st.watcher.reset();
  }
  if (!st.protected_step) return ESPANK_SUCCESS;
  const auto step = *st.protected_step;
  st.protected_step.reset();

  // srun blocks these and would act on them only after this hook: take them
  // here, as "stop, do not relaunch".
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop_signals, sig);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  return EndedWait(st.config, step, stop_signals).run();
}

}  // namespace ar::spank
