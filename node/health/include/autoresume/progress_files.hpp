#pragma once
// The node agent's reading of its node's progress files (progress.hpp):
// PROGRESS_DIR/NODE/JOB.STEP/RANK, written by the steps' tasks (any user),
// read by root. Nothing here follows a link, blocks on a file that is not
// a plain one, or reads more than kMaxBeatBytes of one; names that are not
// JOB.STEP or RANK are passed over. Slurm-free: unit-tested on a folder.

#include <chrono>
#include <string>
#include <vector>

#include "autoresume/protocol.hpp"

namespace ar {

struct ProgressScan {
  std::vector<proto::StepProgress> steps;  // by job, step, rank; ranks that never beat left out
  // More than kMaxProgressSteps steps or kMaxProgressRanks ranks, or a
  // folder with more than 4,096 names: the rest is left out.
  bool truncated = false;
};

// What PROGRESS_DIR/NODE holds now; `now` is the wall clock the files'
// times are measured against. A missing folder is no step.
ProgressScan scan_progress(const std::string& base, const std::string& node,
                           std::chrono::system_clock::time_point now);

}  // namespace ar
