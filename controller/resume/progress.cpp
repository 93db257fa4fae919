#include "resume/progress.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <set>

#include "autoresume/text.hpp"

namespace ar {

using std::chrono::milliseconds;

void ProgressReports::report(const std::string& node, const std::vector<proto::StepProgress>& steps,
                             Steady::time_point now) {
  std::lock_guard lock(mutex_);
  prune(now);
  for (const auto& step : steps) {
    const Key key{step.job_id, step.step_id};
    if (!steps_.contains(key) && steps_.size() >= kMaxSteps) {
      const auto oldest =
          std::min_element(heard_.begin(), heard_.end(),
                           [](const auto& a, const auto& b) { return a.second < b.second; });
      drop(oldest->first);
    }
    auto& seen = steps_[key];
    heard_[key] = now;
    seen.reported[node] = now;
    for (const auto& r : step.ranks) {
      const auto last = now - milliseconds{r.age_ms};
      auto it = seen.ranks.find(r.rank);
      if (it == seen.ranks.end()) {
        if (ranks_ >= kMaxRanks) continue;
        it = seen.ranks.emplace(r.rank, Rank{node, last, r.beat}).first;
        ++ranks_;
      } else {
        auto& rank = it->second;
        // An interval that ends an announced section says nothing of the
        // run's pace (auto leaves it out).
        if (last > rank.last + kSameBeat && rank.beat.section.empty()) {
          if (seen.intervals.size() == kMaxIntervals) seen.intervals.pop_front();
          seen.intervals.push_back(std::chrono::duration_cast<milliseconds>(last - rank.last));
        }
        // A file rewritten with an older time (a clock set back) stands.
        rank = Rank{node, last, r.beat};
      }
      if (r.beat.step && (!seen.highest || *r.beat.step > *seen.highest))
        seen.highest = r.beat.step;
    }
  }
}

void ProgressReports::drop(Key key) {
  ranks_ -= steps_[key].ranks.size();
  steps_.erase(key);
  heard_.erase(key);
}

void ProgressReports::prune(Steady::time_point now) {
  std::vector<Key> old;
  for (const auto& [key, heard] : heard_)
    if (now - heard > kForgetAfter) old.push_back(key);
  for (const auto& key : old) drop(key);
}

std::optional<ProgressReports::Seen> ProgressReports::seen(std::uint32_t job_id,
                                                           std::uint32_t step_id) const {
  std::lock_guard lock(mutex_);
  const auto it = steps_.find({job_id, step_id});
  if (it == steps_.end()) return std::nullopt;
  return it->second;
}

std::vector<milliseconds> ProgressReports::take_intervals(std::uint32_t job_id,
                                                          std::uint32_t step_id) {
  std::lock_guard lock(mutex_);
  const auto it = steps_.find({job_id, step_id});
  if (it == steps_.end()) return {};
  std::vector<milliseconds> out(it->second.intervals.begin(), it->second.intervals.end());
  it->second.intervals.clear();
  return out;
}

milliseconds hang_timeout_of(const HangRule& rule, const std::vector<milliseconds>& samples) {
  if (!rule.timeout.automatic) return milliseconds{std::int64_t{rule.timeout.seconds} * 1000};
  if (samples.size() < HangRule::kMinSamples) return rule.first_beat;
  auto sorted = samples;
  const auto at = (sorted.size() * 99 + 99) / 100 - 1;  // the p99, nearest rank
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(at), sorted.end());
  return std::max(rule.floor, sorted[at] * HangRule::kFactor);
}

namespace {

std::string seconds_ago(ProgressReports::Steady::duration age) {
  return fmt::format("{} s ago", std::chrono::duration_cast<std::chrono::seconds>(age).count());
}

std::string at_step(const ProgressReports::Rank& rank) {
  return rank.beat.step ? fmt::format(", at step {}", *rank.beat.step) : "";
}

}  // namespace

std::optional<ProgressReports::Seen> of_attempt(std::optional<ProgressReports::Seen> seen,
                                                milliseconds since_start,
                                                ProgressReports::Steady::time_point now) {
  if (!seen) return seen;
  std::erase_if(seen->ranks,
                [&](const auto& entry) { return now - entry.second.last > since_start; });
  seen->highest.reset();
  for (const auto& [number, rank] : seen->ranks)
    if (rank.beat.step && (!seen->highest || *rank.beat.step > *seen->highest))
      seen->highest = rank.beat.step;
  return seen;
}

std::optional<Hang> hang_of(const std::optional<ProgressReports::Seen>& seen,
                            const std::vector<std::string>& hosts, const HangRule& rule,
                            const std::vector<milliseconds>& samples, bool run_beat_before,
                            milliseconds since_start, ProgressReports::Steady::time_point now) {
  if (!rule.timeout.on()) return std::nullopt;
  const auto timeout = hang_timeout_of(rule, samples);
  auto of_step = [&](const std::string& node) {
    return std::find(hosts.begin(), hosts.end(), node) != hosts.end();
  };
  std::vector<std::pair<std::uint32_t, const ProgressReports::Rank*>> beat;
  if (seen)
    for (const auto& [number, rank] : seen->ranks)
      if (of_step(rank.node)) beat.emplace_back(number, &rank);
  if (beat.empty()) {
    if (!run_beat_before || since_start <= rule.first_beat) return std::nullopt;
    return Hang{
        fmt::format("no task beat within {} s of the attempt's start "
                    "(hang_first_beat_timeout), while earlier attempts of the run did",
                    std::chrono::duration_cast<std::chrono::seconds>(rule.first_beat).count()),
        {},
        std::nullopt};
  }
  // Quiet past the timeout (or past its announced section), on a node
  // whose agent reports now; the rest of those ranks beat since.
  using Entry = std::pair<std::uint32_t, const ProgressReports::Rank*>;
  std::vector<Entry> quiet;
  std::vector<Entry> beating;
  for (const auto& entry : beat) {
    const auto& rank = *entry.second;
    const auto heard = seen->reported.find(rank.node);
    if (heard == seen->reported.end() || now - heard->second > HangRule::kFresh) continue;
    auto allowed = std::chrono::duration_cast<ProgressReports::Steady::duration>(timeout);
    if (!rank.beat.section.empty())
      allowed = std::max(allowed, std::chrono::duration_cast<ProgressReports::Steady::duration>(
                                      std::chrono::seconds{rank.beat.section_s}));
    (now - rank.last > allowed ? quiet : beating).push_back(entry);
  }
  if (quiet.empty()) return std::nullopt;
  auto by_last = [](const Entry& a, const Entry& b) { return a.second->last < b.second->last; };
  // Who stopped first: the quiet ones while others still beat; when all
  // are quiet, the lowest step where the ranks say it and differ, else the
  // earliest last beats, when they are spread out at all.
  std::set<std::uint32_t> first;
  if (!beating.empty()) {
    for (const auto& entry : quiet) first.insert(entry.first);
  } else {
    std::uint64_t lowest = UINT64_MAX;
    std::uint64_t top = 0;
    bool steps_known = true;
    for (const auto& entry : quiet) {
      const auto& step = entry.second->beat.step;
      if (!step) steps_known = false;
      lowest = std::min(lowest, step.value_or(0));
      top = std::max(top, step.value_or(0));
    }
    const auto [earliest, latest] = std::minmax_element(quiet.begin(), quiet.end(), by_last);
    const auto spread = latest->second->last - earliest->second->last;
    for (const auto& [number, rank] : quiet) {
      if (steps_known && lowest != top) {
        if (*rank->beat.step == lowest) first.insert(number);
      } else if (spread >= milliseconds{200}) {
        if (rank->last - earliest->second->last < spread / 2) first.insert(number);
      }
    }
  }
  Hang hang;
  hang.step = seen->highest;
  const auto timeout_text =
      fmt::format("{} s{}", std::chrono::duration_cast<std::chrono::seconds>(timeout).count(),
                  rule.timeout.automatic ? ", learnt from the run" : "");
  if (first.empty()) {
    std::set<std::string> nodes;
    for (const auto& entry : quiet) nodes.insert(entry.second->node);
    const auto& earliest = *std::min_element(quiet.begin(), quiet.end(), by_last)->second;
    hang.detail = fmt::format(
        "{} rank{} on {} stopped beating together {}{} (hang timeout {}); no rank stopped first",
        quiet.size(), quiet.size() == 1 ? "" : "s",
        join(std::vector<std::string>(nodes.begin(), nodes.end()), ","),
        seconds_ago(now - earliest.last), at_step(earliest), timeout_text);
    return hang;
  }
  std::vector<std::string> culprits;
  std::set<std::string> culprit_nodes;
  std::vector<Entry> others;
  for (const auto& entry : quiet) {
    const auto& [number, rank] = entry;
    if (!first.contains(number)) {
      others.push_back(entry);
      continue;
    }
    culprit_nodes.insert(rank->node);
    if (culprits.size() < 8)
      culprits.push_back(fmt::format("rank {} on {} (last beat {}{})", number, rank->node,
                                     seconds_ago(now - rank->last), at_step(*rank)));
  }
  if (first.size() > culprits.size())
    culprits.push_back(fmt::format("{} more", first.size() - culprits.size()));
  hang.nodes.assign(culprit_nodes.begin(), culprit_nodes.end());
  const auto& rest = beating.empty() ? others : beating;
  std::string rest_text;
  if (!rest.empty()) {
    const auto& latest = *std::max_element(rest.begin(), rest.end(), by_last)->second;
    rest_text =
        fmt::format("; {} other rank{} {}, last {}{}", rest.size(), rest.size() == 1 ? "" : "s",
                    beating.empty() ? "stopped later" : "beat since",
                    seconds_ago(now - latest.last), at_step(latest));
  }
  hang.detail = fmt::format("{} stopped beating first{} (hang timeout {})", join(culprits, ", "),
                            rest_text, timeout_text);
  return hang;
}

}  // namespace ar
