#pragma once
// The progress signal of a protected step (docs/resume.md, "Hangs and
// crashes"). Each task of a registered step gets AUTO_RESUME_PROGRESS, a
// file of its own on the node's local disk (default /dev/shm). A beat is any
// write or touch of it; what the file holds says more, at the task's
// choice:
//
//   (empty)            a beat
//   STEP               a beat at training step STEP (0 to 2^63-1)
//   STEP NAME:SECONDS  a beat, and a section known to be slow starts: the
//   NAME:SECONDS       next beat may be up to SECONDS away (a checkpoint
//                      save); NAME is 1-32 letters, digits, '_', '.', '-'
//
// The node agent reads the files and reports, with its heartbeat, each
// rank's age since its last beat and what the file said; no beat is ever a
// request to the controller. A file whose content is none of these still
// counts as a beat, with no step. Slurm-free: the plugin, the agent and the
// controller share it.
//
// Layout: PROGRESS_DIR/NODE/JOB.STEP/RANK, where RANK is the task's global
// id. PROGRESS_DIR/NODE is root's (made by the step daemon, root); each
// JOB.STEP folder is the job's owner's, 0700, removed when the step ends.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace ar {

inline constexpr const char* kProgressVariable = "AUTO_RESUME_PROGRESS";
inline constexpr const char* kDefaultProgressDir = "/dev/shm/auto-resume";
// What a file may announce: a section of at most a week, with a short name.
inline constexpr std::uint32_t kMaxSectionSeconds = 7 * 24 * 3600;
inline constexpr std::size_t kMaxSectionName = 32;
// The most of a progress file anyone reads.
inline constexpr std::size_t kMaxBeatBytes = 128;

struct Beat {
  std::optional<std::uint64_t> step;  // the training step, if the file says it
  std::string section;                // a slow section announced (empty: none)
  std::uint32_t section_s = 0;        // how long it may last
  bool operator==(const Beat&) const = default;
};

// What a progress file's content says; nothing when it is not one of the
// forms above (the write still counts as a beat).
std::optional<Beat> parse_beat(std::string_view text);

// The folder of one node's progress files of one step, and its name alone.
std::string progress_step_dir(const std::string& base, const std::string& node,
                              std::uint32_t job_id, std::uint32_t step_id);
std::string progress_step_name(std::uint32_t job_id, std::uint32_t step_id);
// JOB.STEP back to its ids; nothing for another name.
std::optional<std::pair<std::uint32_t, std::uint32_t>> parse_progress_step_name(
    std::string_view name);
// A rank's file name (its global task id, decimal digits) back to the
// rank; nothing for another name.
std::optional<std::uint32_t> parse_rank_name(std::string_view name);

// `--auto-resume-hang-timeout=S|auto`: seconds (1 to a week; 0 is off), or
// `auto` (learnt from the run's own beats).
struct HangTimeout {
  std::uint32_t seconds = 0;  // 0: off, unless automatic
  bool automatic = false;
  bool on() const { return automatic || seconds > 0; }
};
inline constexpr const char* kHangTimeoutOptionName = "auto-resume-hang-timeout";
inline constexpr const char* kHangTimeoutArgInfo = "S|auto";
inline constexpr const char* kHangTimeoutUsage =
    "[auto_resume] relaunch the step when its tasks stop beating (AUTO_RESUME_PROGRESS) for S "
    "seconds, or for a time learnt from the run (auto); a step that never beats is never hung";
// Throws ConfigError naming the value.
HangTimeout parse_hang_timeout(const char* value);
std::string hang_timeout_text(const HangTimeout& timeout);

// `--auto-resume-hang-signal=SIG`: a signal sent to every task of a hung
// step before it is cancelled (USR1 with Python's faulthandler.register
// prints the stacks): a name with or without SIG, or a number 1-64.
inline constexpr const char* kHangSignalOptionName = "auto-resume-hang-signal";
inline constexpr const char* kHangSignalArgInfo = "SIG";
inline constexpr const char* kHangSignalUsage =
    "[auto_resume] on a hang, send SIG (say USR1) to every task and wait a grace period "
    "before the step is cancelled, so that the tasks can print their stacks";
// Throws ConfigError naming the value.
int parse_hang_signal(const char* value);
// A signal's name without SIG ("USR1"), or its number.
std::string signal_text(int signal);

}  // namespace ar
