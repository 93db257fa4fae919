#include "autoresume/resume.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <utility>

#include "autoresume/srun_args.hpp"

namespace ar {

namespace {

constexpr std::array<std::pair<Verdict, std::string_view>, 7> kVerdictNames{{
    {Verdict::none, "none"},
    {Verdict::wait, "wait"},
    {Verdict::relaunch, "relaunch"},
    {Verdict::requeued, "requeued"},
    {Verdict::give_up, "give_up"},
    {Verdict::cancelled, "cancelled"},
    {Verdict::no_fault, "no_fault"},
}};

constexpr std::string_view kAppendOption = "--open-mode=append";
constexpr std::string_view kOverlapOption = "--overlap";

// The options that name nodes of the allocation the step first ran on
// (srun's long names).
bool names_nodes(const SrunOption& option) {
  return option.name == "nodelist" || option.name == "nodefile" || option.name == "exclude";
}

// Those, and the one that would truncate the output files.
bool dropped_for_relaunch(const SrunOption& option) {
  return names_nodes(option) || option.name == "open-mode";
}

}  // namespace

std::string_view to_string(Verdict verdict) {
  for (const auto& [v, name] : kVerdictNames)
    if (v == verdict) return name;
  return "?";
}

std::optional<Verdict> parse_verdict(std::string_view text) {
  for (const auto& [v, name] : kVerdictNames)
    if (name == text) return v;
  return std::nullopt;
}

bool is_final(Verdict verdict) { return verdict != Verdict::none && verdict != Verdict::wait; }

std::optional<int> verdict_exit_status(Verdict verdict) {
  switch (verdict) {
    case Verdict::give_up:
      return kExitGiveUp;
    case Verdict::requeued:
      return kExitRequeued;
    case Verdict::cancelled:
      return kExitCancelled;
    default:
      return std::nullopt;
  }
}

NodeLook look_at(const NodeHealth& node) {
  if (!node.known) return {"it is no longer known to slurmctld", {}};
  const auto reason = node.reason.empty() ? std::string() : " (" + node.reason + ")";
  // Slurm dropped it (--no-kill) or the job's user shrank the job: only
  // Slurm's word that it is unhealthy, or suspicion, makes it a fault.
  const std::string left = node.in_job ? "" : "it left the job's allocation and ";
  if (node.down) return {left + (node.in_job ? "it " : "") + "is DOWN" + reason, {}};
  if (!node.in_job && node.fail) return {left + "is FAIL" + reason, {}};
  constexpr std::string_view kReplace = "Action:Replace";
  if (node.in_job && node.fail && node.reason.starts_with(kReplace) &&
      node.reason.find(':', kReplace.size()) != std::string::npos)
    return {std::string(kCheckFailed) + node.reason, {}};
  std::vector<std::string> signs;
  if (node.not_responding) signs.emplace_back("its slurmd is not responding");
  if (!node.probes_silent.empty()) signs.push_back(node.probes_silent);
  if (signs.empty()) return {};
  auto why = left + signs.front();
  for (std::size_t i = 1; i < signs.size(); ++i) why += "; " + signs[i];
  std::array<char, 32> age{};
  std::snprintf(age.data(), age.size(), "%.1f s", node.agent_age);
  const std::string seconds = age.data();
  if (node.crowd)
    return {{}, why + ", but too many nodes are suspected at once: not taken for that alone"};
  switch (node.agent) {
    case AgentView::beating:
      return {{},
              why + ", but its own agent's last heartbeat came " + seconds +
                  " ago: watched, not taken"};
    case AgentView::silent:
      return {why + "; its own agent has been silent for " + seconds, {}};
    case AgentView::none:
      break;
  }
  return {why, {}};  // no agent on it to say otherwise
}

bool silent_crowd(std::size_t silent, std::size_t heard, unsigned max_percent) {
  return silent >= 2 && silent * 100 > static_cast<std::size_t>(max_percent) * heard;
}

std::chrono::seconds relaunch_backoff(std::uint32_t next_attempt, std::chrono::seconds base,
                                      std::chrono::seconds cap) {
  if (next_attempt <= 1 || base.count() <= 0) return std::chrono::seconds{0};
  auto delay = base;
  for (std::uint32_t i = 2; i < next_attempt && delay < cap; ++i) delay *= 2;
  return std::min(delay, cap);
}

RelaunchBudget relaunch_budget(const std::vector<AttemptTimes>& attempts,
                               std::chrono::milliseconds window,
                               std::chrono::milliseconds healthy_after) {
  RelaunchBudget out;
  for (auto it = attempts.rbegin(); it != attempts.rend(); ++it) {
    if (healthy_after.count() > 0 && it->ran >= healthy_after) break;
    if (it->progressed) break;
    if (it->attempt == 0) break;  // the run's first launch: no relaunch before it
    ++out.streak;
    if (it->since_start <= window) ++out.in_window;
  }
  return out;
}

std::string RelaunchMarker::encode() const {
  return run_id + " " + std::to_string(attempt) + " " + (own_master_port ? "1" : "0");
}

std::optional<RelaunchMarker> RelaunchMarker::decode(std::string_view text) {
  const auto first = text.find(' ');
  const auto second = text.find(' ', first == std::string_view::npos ? first : first + 1);
  if (first == 0 || first == std::string_view::npos || second == std::string_view::npos)
    return std::nullopt;
  RelaunchMarker marker;
  marker.run_id = std::string(text.substr(0, first));
  const auto number = text.substr(first + 1, second - first - 1);
  const auto [end, ec] =
      std::from_chars(number.data(), number.data() + number.size(), marker.attempt);
  if (ec != std::errc() || end != number.data() + number.size() || number.empty())
    return std::nullopt;
  const auto flag = text.substr(second + 1);
  if (flag != "0" && flag != "1") return std::nullopt;
  marker.own_master_port = flag == "1";
  return marker;
}

std::vector<std::string> relaunch_argv(const std::vector<std::string>& argv,
                                       std::uint32_t step_nodes, std::uint32_t resize) {
  if (argv.empty()) return argv;
  const auto line = parse_srun_argv(argv);
  const auto given = [&](std::string_view name) {
    return std::any_of(line.options.begin(), line.options.end(),
                       [&](const SrunOption& option) { return option.name == name; });
  };
  const bool node_options = std::any_of(line.options.begin(), line.options.end(), names_nodes);
  const bool pin_nodes = node_options && !given("nodes") && step_nodes > 0;
  const bool shrinks = resize > 0 && resize < step_nodes;
  auto kept = without_srun_options(argv, line, [&](const SrunOption& option) {
    return dropped_for_relaunch(option) || (resize > 0 && option.name == "nodes") ||
           (shrinks && option.name == "ntasks");
  });
  std::vector<std::string> ours{std::string(kAppendOption)};
  if (!given("overlap")) ours.emplace_back(kOverlapOption);
  if (resize > 0)
    ours.push_back("--nodes=" + std::to_string(resize));
  else if (pin_nodes)
    ours.push_back("--nodes=" + std::to_string(step_nodes));
  kept.insert(kept.begin() + 1, ours.begin(), ours.end());
  return kept;
}

std::vector<std::string> dropped_node_options(const std::vector<std::string>& argv,
                                              std::uint32_t resize, std::uint32_t step_nodes) {
  const bool shrinks = resize > 0 && resize < step_nodes;
  std::vector<std::string> dropped;
  for (const auto& option : parse_srun_argv(argv).options) {
    if (!names_nodes(option) && !(resize > 0 && option.name == "nodes") &&
        !(shrinks && option.name == "ntasks"))
      continue;
    const auto value = option.value.value_or("");
    dropped.push_back(option.letter != 0 ? std::string("-") + option.letter + " " + value
                                         : "--" + option.name + "=" + value);
  }
  return dropped;
}

std::optional<std::uint32_t> resized_tasks(std::uint32_t tasks, std::uint32_t nodes,
                                           std::uint32_t resize) {
  if (nodes == 0 || resize == 0 || tasks % nodes != 0) return std::nullopt;
  return tasks / nodes * resize;
}

std::string with_story(std::string_view comment, std::string_view entry) {
  const auto at = comment.find(kStoryMarker);
  auto own = comment.substr(0, at);
  while (!own.empty() && own.back() == ' ') own.remove_suffix(1);
  std::vector<std::string> entries;
  if (at != std::string_view::npos) {
    auto story = comment.substr(at + kStoryMarker.size());
    for (std::size_t from = 0; from <= story.size();) {
      const auto end = std::min(story.find("; ", from), story.size());
      if (const auto part = story.substr(from, end - from); !part.empty() && part != "...")
        entries.emplace_back(part);
      from = end + 2;
    }
  }
  entries.emplace_back(entry.substr(0, kMaxStoryBytes));
  const auto joined = [&entries](std::size_t first) {
    std::string out = first > 0 ? "..." : "";
    for (auto i = first; i < entries.size(); ++i) out += (out.empty() ? "" : "; ") + entries[i];
    return out;
  };
  std::size_t first = 0;
  while (first + 1 < entries.size() && joined(first).size() > kMaxStoryBytes) ++first;
  return std::string(own) + (own.empty() ? "" : " ") + std::string(kStoryMarker) + joined(first);
}

}  // namespace ar
