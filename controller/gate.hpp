#pragma once
// The guard rails (docs/guard.md): the one place the resume engine and the
// node keeper ask "may I act?" before they change anything in Slurm or call
// the provider, and tell what they would have done when they may not.
//
// The controller holds back while
//  - its configuration says mode=observe,
//  - an admin paused it (`auto-resume pause`, until `auto-resume unpause`),
//  - the circuit breaker is tripped: more node marks (FAIL or DOWN set by the
//    controller) or node replacements (the provider asked to replace a node)
//    within the last hour than max_marks_per_hour or
//    max_replacements_per_hour allow, not counting those whose repair
//    succeeded (settled: the step relaunched, the node back in service); it
//    stays tripped until `auto-resume resume-actions`, or until
//    breaker_reset_after has passed with nothing held back.
// The pause, the tripped breaker and the counted actions are in the store:
// a restarted controller holds back as the last one did.
//
// Held back, what the engine or the keeper would have done is said once
// per episode (the same subject and the same words): a `would` event and a
// log line "observe: would ..." ("paused: ...", "breaker: ...").

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "autoresume/daemon_config.hpp"
#include "autoresume/protocol.hpp"
#include "clock.hpp"
#include "said_once.hpp"
#include "store/store.hpp"

namespace ar {

// An admin's request that would act while the controller holds back.
class ActionsHeld : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What lifts a hold (Gate::held's words): "mode=observe in the
// configuration", "auto-resume unpause", "auto-resume resume-actions".
std::string held_advice(const std::string& why);

class Gate {
 public:
  // What the circuit breaker counts.
  enum class Counted { mark, replacement };

  // Reads the pause and the breaker from `store`, and says at start what
  // holds the controller back, if anything.
  Gate(Store& store, const DaemonConfig& config, const Clock& clock);
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  // Why the controller holds back now ("observe", "paused", "breaker", as
  // the log lines start), or nothing when it may act.
  std::optional<std::string> held();
  // Whether the controller may act now on `nodes`, one action of `kind`
  // each (none: an action the breaker does not count). Counts them when it
  // may; trips the breaker (an event, a log line) when they would go past
  // the limit.
  bool allow(Counted kind, const std::vector<std::string>& nodes);
  // The repair of `nodes` succeeded (the step they failed runs again, the
  // node is back in service): their last counted action of `kind` no
  // longer counts toward the breaker.
  void settled(Counted kind, const std::vector<std::string>& nodes);

  // What the controller would have done ("mark node3 FAIL, ..."): said
  // once while the subject's words (or the step's `episode`: its failed
  // nodes, say) stay the same, as a step's event or a node's. `scope`
  // groups the subjects for settle().
  void would(const StoredStep& step, const std::string& episode, const std::string& what);
  void would(const std::string& scope, const std::string& node, const std::string& what);
  // The episodes of `scope` whose subject is not in `current` are over: a
  // new one is said again.
  void settle(const std::string& scope, const std::set<std::string>& current);
  // A step's episode is over (its nodes are fine again).
  void settle(const StoredStep& step);

  // The nodes slurmctld lists: the base of a limit given in percent.
  void set_cluster_size(std::size_t nodes);

  // An admin's requests, on behalf of `by`: what was done.
  std::string pause(uid_t by, const std::string& reason);
  std::string unpause(uid_t by);
  std::string resume_actions(uid_t by);
  proto::GuardState state();
  // The breaker for the metrics: whether it is tripped, and the seconds
  // until it resets itself if nothing is held back meanwhile (-1: only
  // auto-resume resume-actions resets it; 0 when not tripped).
  struct Breaker {
    bool tripped = false;
    std::int64_t resets_in = 0;
  };
  Breaker breaker();

 private:
  std::optional<std::string> held_locked() const;
  // What still holds the controller back once `lifted` (the pause or the
  // breaker's flag) is lifted, as the end of its event's text; `acts` if
  // nothing does.
  const char* still_holds(const char* lifted, const char* acts) const;
  // A breaker tripped for breaker_reset_after with nothing held back since
  // resets itself (an event says so).
  void expire_locked();
  // When a tripped breaker resets itself if nothing is held back
  // meanwhile (unix seconds); nothing when it is not tripped or only the
  // admin resets it.
  std::optional<std::int64_t> resets_at_locked() const;
  // When the breaker last held something back (or tripped).
  std::int64_t last_held_ = 0;
  // Actions of `kind` counted within the last hour (resume_actions forgets
  // those before it).
  std::uint32_t counted(Counted kind);
  unsigned limit(Counted kind) const;
  void trip(Counted kind, std::uint32_t done, const std::vector<std::string>& nodes);
  // A change of the pause or the breaker: stored with its event, said in the
  // audit log; every episode starts again.
  void change(const Store::GuardChanges& changes, EventKind kind, uid_t by,
              const std::string& detail);

  Store& store_;
  const DaemonConfig& config_;
  const Clock& clock_;
  std::mutex mutex_;                          // the engine's thread and the server's workers
  std::map<std::string, proto::json> flags_;  // as stored: paused, tripped
  std::size_t nodes_ = 0;
  SaidOnce said_{10'000};  // subject -> the episode said for it (a step decided
                           // meanwhile never settles: bounded)
};

}  // namespace ar
