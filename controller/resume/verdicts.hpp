#pragma once
// The one place a protected step is decided. The engine's looks decide
// through it (a repair's end, no fault within end_window, Slurm's doing, a
// step past its deadline), and so does the server while it answers srun
// (every node reported a clean end; a step past its deadline, which srun
// hears as give_up even when the store cannot take it). A decision is one
// store transaction and the first one stored stands, so both may call from
// their own threads; what is kept here locks itself.

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "autoresume/daemon_config.hpp"
#include "clock.hpp"
#include "resume/step_reports.hpp"
#include "store/store.hpp"

namespace ar {

// The step's nodes as slurmctld listed them when it was registered; none
// if that list cannot be read (then no exit report completes it).
std::vector<std::string> registered_hosts(const StoredStep& step);

// The audit line of a step's event (a repair's root action, a verdict):
// for whom, the uid that registered the run.
void audit_step(const StoredStep& step, EventKind kind, const std::string& detail);

class Verdicts {
 public:
  Verdicts(Store& store, StepReports& reports, const Clock& clock, const DaemonConfig& config)
      : store_(store), reports_(reports), clock_(clock), config_(config) {}
  Verdicts(const Verdicts&) = delete;
  Verdicts& operator=(const Verdicts&) = delete;

  // Decides `step` with its event and audit line; its exit reports are
  // forgotten. false if it was decided meanwhile (its srun cancelled it, or
  // the server decided it): `step` is left as it was. Throws what the store
  // throws.
  bool decide(StoredStep& step, Verdict verdict, const std::string& message);

  // An ended step every node of which reported its tasks exited 0 is
  // decided no_fault now (`step` reread); false if it is not, or was decided
  // meanwhile (`step` reread as well), or the store cannot take it (said
  // once: the engine decides after end_window as without the reports).
  bool clean_end(StoredStep& step);

  enum class Overdue {
    not_due,            // not past decide_by (resume/deadline.hpp)
    decided,            // give_up, stored now
    decided_meanwhile,  // another verdict was stored first: `step` reread
    unstored,           // give_up, which the store cannot take yet
  };
  // A step past its decide_by gets give_up: `step` holds it whether or not
  // the store took it (a failure is said once per step; each call tries
  // again). What follows is the engine's, whoever decided it (take_given_up).
  Overdue overdue(StoredStep& step);

  // A step given up at its deadline: the job's AdminComment is told, and
  // what is left of a repair (the old step, the helper jobs) is cancelled.
  struct GivenUp {
    StoredStep step;  // decided give_up, with its repair's facts
    bool repairing = false;
  };
  // The steps given up at their deadline since the last call, each once.
  std::vector<GivenUp> take_given_up();

 private:
  Store& store_;
  StepReports& reports_;
  const Clock& clock_;
  const DaemonConfig& config_;
  std::mutex mutex_;
  // Steps whose overdue give_up the store has not taken yet.
  std::set<std::string> unstored_;
  // Steps whose clean-end no_fault the store refused (said once).
  std::set<std::string> clean_end_failed_;
  std::map<std::string, GivenUp> given_up_;
};

}  // namespace ar
