#pragma once
// What the server hears of protected steps while they run and end, for the
// resume engine to decide with: the step daemons' reports of their tasks'
// exit, when each step's srun last asked for its verdict, and the node
// agents' reports of the tasks' progress. One object,
// made before both and handed to each at construction (main.cpp); each part
// locks itself (the server's threads write, the engine's reads).

#include "resume/exit_reports.hpp"
#include "resume/failure_checks.hpp"
#include "resume/progress.hpp"
#include "resume/verdict_asks.hpp"

namespace ar {

struct StepReports {
  ExitReports exits;         // tasks_exited, per step; forgotten once it is decided
  VerdictAsks asks;          // verdict requests, per step
  ProgressReports progress;  // the node agents' reports of the progress files
  FailureChecks checks;      // the quick checks asked of the agents after a failed step
};

}  // namespace ar
