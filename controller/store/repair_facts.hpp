#pragma once
// A repair's facts (the resume engine's, kept with its step in the store):
// what failed, what replaces it, the helper jobs, the relaunch's plan and
// the moments its waits count from. A struct everywhere but in the store,
// which keeps it as one JSON object (the keys as before this type, so that
// a store written by an older controller reads back the same).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "autoresume/protocol.hpp"
#include "clock.hpp"

namespace ar {

struct FailedNode {
  std::string node;
  std::string why;
  std::int64_t instance = 0;  // its slurmd's start time: the instance that failed
  bool operator==(const FailedNode&) const = default;
};

// Where the relaunch runs: the job's nodes once repaired, and the step's
// own node count when it runs on fewer than the job holds (0: all).
struct RelaunchPlan {
  std::string nodelist;
  std::uint32_t num_nodes = 0;
  std::uint32_t step_nodes = 0;
  bool operator==(const RelaunchPlan&) const = default;
};

struct RepairFacts {
  std::vector<FailedNode> failed;                // in the order they were found
  std::vector<std::string> replacements;         // chosen, in order
  std::map<std::string, std::uint32_t> helpers;  // replacement -> its helper job
  std::vector<std::string> merged;               // replacements merged into the job
  std::vector<std::string> passed_over;          // replacements given up in this repair
  std::optional<std::uint32_t> step_nodes;       // a repair in place: the relaunch's node count
  std::optional<std::uint32_t> streak;           // the relaunch's backoff (relaunch_budget)
  std::optional<RelaunchPlan> relaunch;          // set with the relaunch verdict
  // A hung step's repair: why it is hung (the `hung` event's text); empty
  // for a node fault.
  std::string hang;
  // The attempt's progress when the repair began: whether any task beat,
  // and the highest training step one said.
  bool beat = false;
  std::optional<std::uint64_t> highest_step;
  // The moments the repair's waits count from.
  std::optional<Stamp> started;               // the fault found: repair_timeout
  std::optional<Stamp> out;                   // the failed nodes shrunk out of the job (node_out)
  std::optional<Stamp> expanded;              // the backoff and the old step's end
  std::optional<Stamp> old_step_cancelled;    // its last cancel (kOldStepGrace)
  std::map<std::string, Stamp> helper_since;  // a pending helper's patience, by node
  std::optional<Stamp> signalled;             // a hung step's tasks got the hang signal

  // The failed nodes' names.
  std::vector<std::string> failed_nodes() const;
  bool operator==(const RepairFacts&) const = default;
};

// The names of `failed`.
std::vector<std::string> failed_nodes(const std::vector<FailedNode>& failed);

// The store's JSON object, and back. from_json reads what any earlier
// controller stored (a field missing is left empty) and throws
// std::invalid_argument naming a field of the wrong type.
proto::json to_json(const RepairFacts& facts);
RepairFacts repair_facts_from_json(const proto::json& object);

}  // namespace ar
