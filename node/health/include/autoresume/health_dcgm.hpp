#pragma once
// NVIDIA DCGM's verdicts on a node's GPUs, read from what `dcgmi` prints:
//
// - DcgmPolicyListener: the violations `dcgmi policy --reg` reports while it
//   runs (a listener: a node agent keeps dcgmi running and feeds it lines);
// - check_dcgm_health: `dcgmi health -c -j`, the passive health watches
//   (a check of seconds, fit for slurmd's HealthCheckProgram);
// - check_dcgm_diag: `dcgmi diag -r LEVEL -j`, the active diagnostic that
//   stresses the GPUs (minutes: idle or drained nodes only).
//
// Pure functions of text: no process is run and nothing is marked here.

#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "autoresume/health.hpp"

namespace ar::health {

// Reads `dcgmi policy --reg` (DCGM 2 to 4) line by line and turns each
// violation it reports into a Result of check "dcgm".
//
// dcgmi prints "Listening for violations." once registered, then for each
// violation a block of a "Timestamp: <ctime>" line and one to three lines
// of what was violated, e.g.
//
//   Timestamp: Tue Mar  4 12:00:00 2025
//   XID error 79 detected.
//
// feed() returns a Result when a block is complete:
// - fail for every violation: an XID (named, e.g. "XID 79: GPU has fallen
//   off the bus"), double-bit ECC errors, PCIe replays, retired pages, the
//   temperature or power limit, an NVLink error counter, or an unknown one;
//   also for a line of dcgmi's own starting "Error:" (it could not register
//   or lost the host engine: the listener is dead);
// - pass for an XID that applications cause (13, 31, 43, 45): reported so
//   that the caller can log it, but not the node's fault.
// Every other line (blank, the "Listening" line, unknown text) returns
// nothing; a block cut short by the next "Timestamp:" is dropped.
//
// dcgmi does not print which GPU violated the policy. To have it in the
// reason, register one DCGM group per GPU (`dcgmi group -c gpu0 -a 0`,
// `dcgmi policy -g GROUP --reg`), run one dcgmi and one listener per GPU and
// name the GPU here: the reason then reads "XID 79 on GPU 0: ...".
//
// Not thread-safe; one instance per dcgmi process. Lines may carry a
// trailing '\r' or newline.
class DcgmPolicyListener {
 public:
  explicit DcgmPolicyListener(std::string gpu = "") : gpu_(std::move(gpu)) {}

  std::optional<Result> feed(std::string_view line);

  // Whether dcgmi has said "Listening for violations." (registered).
  bool listening() const { return listening_; }

 private:
  enum class Block { none, dbe, pcie, pages, thermal, power, nvlink };
  Result violation(std::string what, std::string values) const;
  // An XID line's result.
  Result xid_result(std::string_view rest) const;
  // A value line of `block`, the violation under way: its result once the
  // block's last value is in.
  std::optional<Result> block_value(Block block, std::string_view line);

  std::string gpu_;
  bool listening_ = false;
  Block block_ = Block::none;  // the violation whose count lines come next
  std::string first_;          // a first value of a two-value block
};

// What NVIDIA's XID catalog says an XID means, for the common ones; empty
// for others.
std::string_view xid_meaning(unsigned xid);
// XIDs an application causes (a fault in its code, or its own kill), which
// say nothing about the node's hardware.
bool xid_from_application(unsigned xid);

// DCGM's health watches, from `dcgmi health -c -j` (its JSON: "body" holds
// "Overall Health" and, per entity group such as "GPU", each entity's
// systems with their "value" Healthy/Warning/Failure and the incident
// messages in "overflow"). `expected_gpus` 0 makes the check not applicable.
// Fails on an entity system at Warning or Failure (named with its messages),
// on an overall health other than Healthy, on a tool that did not run or
// printed no JSON (with dcgmi's "Error: ..." line, e.g. that the health
// watches are not enabled: `dcgmi health -s a` must have set them).
Result check_dcgm_health(const ToolRun& run, unsigned expected_gpus);

// DCGM's diagnostic, from `dcgmi diag -r LEVEL -j`: DCGM 4's layout
// ("DCGM Diagnostic" / "test_categories" / "tests" / "results" with
// "entity_group", "entity_id", "status", "warnings"[]."warning") and DCGM 2
// and 3's ("DCGM GPU Diagnostic", results with a "gpu_id"). dcgmi shows a
// warning as "Fail" in JSON. `expected_gpus` 0 makes it not applicable.
// Fails on each result "Fail" (naming the test, the GPU and its warnings),
// on a test whose summary failed without a GPU's result, on a
// "runtime_error", on fewer GPUs diagnosed than expected (when the output
// lists them), on no tests at all, and on a tool that did not run or
// printed no JSON. Passes when every result is Pass or Skip.
Result check_dcgm_diag(const ToolRun& run, unsigned expected_gpus);

}  // namespace ar::health
