#include "provision/provisioner.hpp"

#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "autoresume/keyvalue.hpp"
#include "autoresume/text.hpp"
#include "files.hpp"
#include "hostlist.hpp"
#include "log.hpp"
#include "nodes/provider.hpp"
#include "provision/groups.hpp"

namespace ar {

namespace {

using provision::SlotPhase;

constexpr std::chrono::seconds kPowerRetry{30};  // POWER_UP or POWER_DOWN_ASAP not acted on
constexpr std::size_t kTailBytes = 2000;

std::string_view outcome_name(provision::CreateOutcome outcome) {
  switch (outcome) {
    case provision::CreateOutcome::ok:
      return "created";
    case provision::CreateOutcome::retryable:
      return "create_failed";
    case provision::CreateOutcome::capacity:
      return "capacity_unavailable";
    case provision::CreateOutcome::bootstrap:
      return "lifecycle_failed";
    case provision::CreateOutcome::config:
      return "configuration_error";
  }
  return "?";
}

// The last bytes of a file (a lifecycle log), or why it cannot be read.
std::string file_tail(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "(no log at " + path + ")";
  const auto size = static_cast<std::int64_t>(in.tellg());
  const auto keep = std::min<std::int64_t>(size, kTailBytes);
  in.seekg(size - keep);
  std::string text(static_cast<std::size_t>(keep), '\0');
  in.read(text.data(), keep);
  return (size > keep ? "..." : "") + printable(text);
}

// Why a provider call failed: its error or exit status, and its output's tail.
std::string failure(const CommandResult& result) {
  return (result.error.empty() ? "exit " + std::to_string(result.status) : result.error) +
         "; output: " + printable(output_tail(result.output));
}

// A file's text; nullopt if it does not exist, ConfigError if it cannot be read.
std::optional<std::string> read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return std::nullopt;
    throw ConfigError("cannot read " + path.string() + ": " +
                      std::error_code(errno, std::generic_category()).message());
  }
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Writes `text` beside `path` and renames it over it (files.hpp: a reader
// sees the old file or the new one; nothing planted is followed).
void write_text(const std::filesystem::path& path, const std::string& text) {
  if (const auto warning = files::replace_file(path, text); !warning.empty())
    log::warn("{}", warning);
}

// A mark that asks for the node's replacement (as the node keeper reads them).
bool marked_for_replacement(const slurm::NodeInfo& node) {
  return (node.fail || node.down) &&
         (node.reason.starts_with("Action:Replace") || node.reason.starts_with("auto-resume:"));
}

}  // namespace

Provisioner::Provisioner(Store& store, const DaemonConfig& config, slurm::SlurmApi& slurm,
                         const Clock& clock, CommandRunner& runner, Gate* gate)
    : store_(store),
      config_(config),
      settings_(config.provision),
      slurm_(slurm),
      clock_(clock),
      runner_(runner),
      gate_(gate) {
  plan_settings_.max_parallel_creates = settings_.max_parallel_creates;
  plan_settings_.retry_backoff = settings_.create_backoff;
  plan_settings_.alert_after = settings_.create_alert_after;
  plan_settings_.capacity_backoff = settings_.capacity_backoff;
  plan_settings_.max_bootstrap_failures = settings_.max_bootstrap_failures;
  plan_settings_.min_count_timeout = settings_.min_count_timeout;
  plan_settings_.register_timeout = config.register_timeout;
  if (const auto stored = store_.provision_state())
    cluster_ = provision::cluster_from_json(*stored);
  for (auto& record : store_.instance_records())
    if (record.terminated == 0) open_.emplace(record.token, std::move(record));
}

Provisioner::~Provisioner() {
  if (!work_.empty() || listing_ || !orphan_calls_.empty() || !abandoned_.empty() || restarting_)
    runner_.cancel_all();
  if (restarting_) restart_call_.wait();
  for (auto& [node, work] : work_)
    if (work.calling) work.call.wait();
  if (listing_) list_call_.wait();
  for (auto& [key, call] : orphan_calls_) call.wait();
  for (auto& [key, hung] : abandoned_) hung.call.wait();
}

provision::Millis Provisioner::now() const { return Millis{clock_.unix_now() * 1000}; }

provision::Cluster Provisioner::state() const {
  std::lock_guard lock(mutex_);
  return cluster_;
}

std::size_t Provisioner::provider_calls_running() const {
  std::lock_guard lock(mutex_);
  const auto running = [](const auto& call) {
    return call.valid() && call.wait_for(std::chrono::seconds{0}) != std::future_status::ready;
  };
  std::size_t n = listing_ && running(list_call_) ? 1U : 0U;
  for (const auto& [node, work] : work_) n += work.calling && running(work.call) ? 1U : 0U;
  for (const auto& [key, call] : orphan_calls_) n += running(call) ? 1U : 0U;
  for (const auto& [token, abandoned] : abandoned_) n += running(abandoned.call) ? 1U : 0U;
  return n;
}

bool Provisioner::owns(const std::string& node) const {
  std::lock_guard lock(mutex_);
  for (const auto& group : cluster_.groups) {
    const auto& prefix = group.spec.node_prefix;
    if (!node.starts_with(prefix) || node.size() == prefix.size()) continue;
    const auto number = std::string_view(node).substr(prefix.size());
    if (number.front() == '0' ||
        !std::ranges::all_of(number, [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    if (number.size() <= 5 && std::stoul(std::string(number)) <= group.spec.max_count) return true;
  }
  return false;
}

void Provisioner::add(const std::vector<provision::Event>& events) {
  for (const auto& e : events) {
    const std::string level(provision::to_string(e.level));
    log::info("group {}{}{}: {}: {}", e.group, e.node.empty() ? "" : " node ", e.node,
              provision::to_string(e.kind), e.text);
    events_.push_back({std::string(provision::to_string(e.kind)), level,
                       e.node.empty() ? "group" : "instance", e.group, e.node, e.text});
  }
}

void Provisioner::meter(const provision::Group& group, const provision::Slot& slot,
                        const std::function<void(InstanceRecord&)>& change) {
  const auto token = provision::token(group, slot);
  auto [it, added] = open_.try_emplace(token);
  auto& record = it->second;
  if (added) {
    record.token = token;
    record.group = group.spec.name;
    record.node = group.spec.node(slot.index);
    record.operation = slot.operation;
    record.requested = clock_.unix_now();
  }
  change(record);
  changed_records_.push_back(record);
  if (record.terminated != 0) open_.erase(it);
}

void Provisioner::save() {
  if (!dirty_ && events_.empty() && changed_records_.empty()) return;
  store_.save_provision(provision::to_json(cluster_), events_, changed_records_);
  events_.clear();
  changed_records_.clear();
  dirty_ = false;
}

void Provisioner::write(const std::string& key, std::string what, std::function<void()> call,
                        std::function<void()> then, bool again) {
  auto& queue = queued_[key];
  queue.push_back({std::move(what), std::move(call), std::move(then), again, {}});
  if (queue.size() == 1) start_write(key);
}

void Provisioner::start_write(const std::string& key) {
  // At most kMaxWrites at once (a new group drains all its slots): the
  // others wait in their queues, started as those under way return.
  if (writes_.started() && writes_.size() >= kMaxWrites) return;
  try {
    writes_.run(key, [call = queued_.at(key).front().call] {
      call();
      return true;
    });
  } catch (const std::exception& e) {
    log::warn("{}: cannot start its write to slurmctld now ({}): tried again at the next tick", key,
              e.what());
    return;
  }
  if (!writes_.started()) take_write(key);  // it ran at once
}

void Provisioner::take_write(const std::string& key) {
  auto outcome = writes_.take(key);
  if (!outcome) return;
  auto& queue = queued_.at(key);
  bool ok = true;
  try {
    outcome->get();
    write_failed_.erase(key + ": " + queue.front().what);
  } catch (const std::exception& e) {
    ok = false;
    auto& failed = queue.front();
    const auto now = clock_.now();
    if (failed.again) {
      if (failed.first_failed == Clock::Steady::time_point{}) failed.first_failed = now;
      if (now - failed.first_failed < kWriteRetryFor) {
        if (write_failed_.insert(key + ": " + failed.what).second)
          log::info("{}: {}: {}: made again until slurmctld takes it (for {} s at most)", key,
                    failed.what, e.what(), kWriteRetryFor.count());
        return;  // still first in its queue: take_writes starts it again
      }
    }
    if (key == kSlurmctld)  // an event too: the admin's include file waits for it
      say_once("include/write", "",
               std::string("the include file's reconfigure: ") + e.what() +
                   " (tried again at the next tick)");
    else if (failed.again)
      log::warn("{}: {}: {}: given up after {} s of tries", key, failed.what, e.what(),
                kWriteRetryFor.count());
    else if (write_failed_.insert(key + ": " + failed.what).second)
      log::warn("{}: {}: {}", key, failed.what, e.what());
  }
  auto done = std::move(queue.front());
  queue.pop_front();
  if (queue.empty()) {
    queued_.erase(key);
  } else {
    start_write(key);
  }
  if (!ok || !done.then) return;
  try {
    done.then();
  } catch (const std::exception& e) {
    log::warn("{}: after {}: {}", key, done.what, e.what());
  }
}

void Provisioner::take_writes() {
  for (const auto& key : writes_.finished()) take_write(key);
  // Queues that wait for room (kMaxWrites), whose start failed, or whose
  // write failed and is made again. (Their keys first: a write that runs at
  // once, without threads, may end its queue.)
  std::vector<std::string> waiting;
  for (const auto& entry : queued_)
    if (!writes_.has(entry.first)) waiting.push_back(entry.first);
  for (const auto& key : waiting) {
    if (writes_.size() >= kMaxWrites) break;
    if (queued_.contains(key) && !writes_.has(key)) start_write(key);
  }
}

void Provisioner::drain(const std::string& node, const std::string& why,
                        std::function<void()> then) {
  write(
      node, "drain (" + why + ")",
      [this, node, reason = kReasonPrefix + why] { slurm_.set_node_drain(node, reason); },
      std::move(then));
}

void Provisioner::drain_slot(const std::string& node) {
  undrained_.insert(node);
  if (writing(node)) return;  // this drain, or a write before it
  drain(node, "empty slot", [this, node] { undrained_.erase(node); });
}

std::function<void()> Provisioner::on_work(const std::string& name,
                                           std::function<void(Work&)> change) {
  return [this, name, change = std::move(change)] {
    if (const auto w = work_.find(name); w != work_.end()) change(w->second);
  };
}

std::string Provisioner::reload_groups(bool act) {
  LoadedGroups loaded;
  try {
    loaded = load_own_groups();
    last_groups_error_.clear();
  } catch (const ConfigError& e) {
    // The groups stay as they were until the folder is right again.
    if (last_groups_error_ != e.what()) {
      last_groups_error_ = e.what();
      log::warn("group files: {}", e.what());
      events_.push_back({"group_file_error", "error", "cluster", "", "", e.what()});
    }
    return e.what();
  }
  // A group whose file is in error (or clashes with another's) keeps its
  // last good state until the file is right; the others go on. Said once
  // a group, as the group's event.
  std::vector<std::string> errors;
  for (const auto& [name, why] : loaded.errors) {
    errors.push_back(name + ": " + why);
    if (auto& said = group_errors_[name]; said != why) {
      said = why;
      log::warn("group {}: {}", name, why);
      events_.push_back({"group_file_error", "error", "group", name, "", why});
    }
  }
  std::erase_if(group_errors_,
                [&](const auto& entry) { return !loaded.errors.contains(entry.first); });
  const auto& specs = loaded.specs;
  // Merge mode: the groups whose slots slurmctld has as their files ask.
  const auto declared = merge() ? keep_include(specs, act) : std::set<std::string>();
  for (const auto& spec : specs) {
    auto* found = provision::find_group(cluster_, spec.name);
    if (found == nullptr && merge() && !declared.contains(spec.name))
      continue;  // its slots are not in slurmctld yet (keep_include said why)
    if (found == nullptr) {
      cluster_.groups.push_back(provision::new_group(spec));
      auto& group = cluster_.groups.back();
      add({provision::start_operation(cluster_, group, spec.count, spec.min_count, now())});
      plan_after_now();
      // Write-ahead: no slot may be allocated before it has an instance.
      if (act && spec.type == GroupType::compute)
        for (unsigned i = 1; i <= spec.max_count; ++i) drain_slot(spec.node(i));
      dirty_ = true;
      continue;
    }
    auto& group = *found;
    // In merge mode a new max_count is applied once slurmctld has the slots
    // (keep_include). Otherwise the slots declared to Slurm stay as they
    // are, and node_prefix and type never change: said once. A default
    // max_count (the file sets none) stays what it was when the group came.
    const bool new_max = spec.max_count_set && spec.max_count != group.spec.max_count;
    if (new_max && declared.contains(spec.name)) adopt_slots(group, spec.max_count, act);
    if (spec.node_prefix != group.spec.node_prefix || spec.type != group.spec.type) {
      say_once(group.spec.name + "/slots", spec.name,
               "node_prefix and type cannot change while the group exists: not applied (the "
               "group keeps " +
                   group.spec.node_prefix + " and " + std::string(to_string(group.spec.type)) +
                   ")");
    } else if (new_max && !merge()) {
      say_once(group.spec.name + "/slots", spec.name,
               "max_count changes the slots declared to Slurm: not applied without "
               "slurm_conf_include (the group keeps max_count " +
                   std::to_string(group.spec.max_count) + ")");
    } else {
      said_.forget(group.spec.name + "/slots");
    }
    if (spec.count != group.spec.count || spec.min_count != group.spec.min_count) {
      try {
        add({provision::start_operation(cluster_, group, spec.count, spec.min_count, now())});
        plan_after_now();
        said_.forget(group.spec.name + "/count");
      } catch (const ConfigError& e) {
        say_once(group.spec.name + "/count", spec.name, e.what());
        continue;  // the operation before goes on
      }
      dirty_ = true;
    }
    const auto keep = group.spec;
    group.spec = spec;
    group.spec.max_count = keep.max_count;
    group.spec.node_prefix = keep.node_prefix;
    group.spec.type = keep.type;
  }
  return join(errors, "; ");
}

void Provisioner::adopt_slots(provision::Group& group, unsigned max_count, bool act) {
  const auto before = group.spec.max_count;
  if (max_count < before) {
    for (unsigned i = max_count; i < before; ++i)
      if (group.slots[i].phase != SlotPhase::empty) return;  // keep_include kept them
    for (unsigned i = max_count; i < before; ++i) undrained_.erase(group.spec.node(i + 1));
    group.slots.resize(max_count);
  } else {
    group.slots.resize(max_count);
    for (unsigned i = before; i < max_count; ++i) {
      group.slots[i].index = i + 1;
      // Write-ahead, as for a new group: drained before it is in a partition.
      if (act && group.spec.type == GroupType::compute) drain_slot(group.spec.node(i + 1));
    }
  }
  group.spec.max_count = max_count;
  dirty_ = true;
  add_cluster_event(
      "slots_changed", "info", group.spec.name, "",
      fmt::format("max_count {} -> {}: slurmctld has the group's slots", before, max_count));
}

std::filesystem::path Provisioner::slurm_conf_path() const {
  if (!settings_.slurm_conf.empty()) return settings_.slurm_conf;
  if (const char* env = std::getenv("SLURM_CONF"); env != nullptr && *env == '/') return env;
  return "/etc/slurm/slurm.conf";
}

Provisioner::FileStamp Provisioner::file_stamp(const std::filesystem::path& path) {
  std::error_code error;
  const auto time = std::filesystem::last_write_time(path, error);
  if (error) return std::nullopt;
  const auto size = std::filesystem::file_size(path, error);
  if (error) return std::nullopt;
  return std::pair{time, size};
}

include::AdminConf Provisioner::read_admin_conf() {
  if (admin_conf_ && std::ranges::all_of(admin_conf_->files, [](const auto& file) {
        return file_stamp(file.first) == file.second;
      }))
    return admin_conf_->conf;
  AdminConfRead read;
  // Each file's stamp is taken before it is read: a change while it is
  // read shows at the next look.
  const auto read_file = [&read](const std::filesystem::path& path) {
    read.files.emplace_back(path, file_stamp(path));
    return read_text(path);
  };
  include::AdminConf conf;
  const auto main_file = slurm_conf_path();
  const auto folder = main_file.parent_path();
  const auto ours = std::filesystem::weakly_canonical(settings_.slurm_conf_include);
  const auto resolve = [&](const std::string& written) {
    std::filesystem::path path(written);
    return path.is_absolute() ? path : folder / path;
  };
  std::vector<std::filesystem::path> files{main_file};
  bool ours_included = false;
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (i > 64) throw ConfigError(main_file.string() + ": more than 64 included files");
    const auto text = read_file(files[i]);
    if (!text) throw ConfigError("cannot read " + files[i].string() + ": no such file");
    const auto first = conf.includes.size();
    include::scan_slurm_conf(*text, conf);
    for (auto j = first; j < conf.includes.size(); ++j) {
      const auto path = resolve(conf.includes[j]);
      if (std::filesystem::weakly_canonical(path) == ours) {
        ours_included = true;
      } else {
        files.push_back(path);
      }
    }
  }
  if (!ours_included)
    throw ConfigError(main_file.string() + " has no 'Include " +
                      settings_.slurm_conf_include.string() +
                      "' line: add it once (the controller writes that file, nothing else)");
  if (const auto gres = read_file(folder / "gres.conf"))
    conf.gres_lines = include::gres_conf_nodes(*gres);
  if (conf.topology_tree)
    if (const auto topology = read_file(folder / "topology.conf"))
      conf.switch_nodes = include::topology_nodes(*topology);
  read.conf = conf;
  admin_conf_ = std::move(read);
  return conf;
}

std::vector<include::IncludeGroup> Provisioner::include_groups(const std::vector<GroupSpec>& specs,
                                                               bool final) {
  std::vector<include::IncludeGroup> out;
  std::set<std::string> named;
  for (const auto& spec : specs) {
    named.insert(spec.name);
    include::IncludeGroup entry{spec, final ? spec.max_count : 0};
    if (const auto* group = provision::find_group(cluster_, spec.name); group != nullptr) {
      const auto& now_spec = group->spec;
      entry.spec.node_prefix = now_spec.node_prefix;
      entry.spec.type = now_spec.type;
      if (!spec.max_count_set) entry.spec.max_count = now_spec.max_count;
      // Slots above a lower max_count leave the file only once empty.
      for (auto i = entry.spec.max_count; i < now_spec.max_count; ++i)
        if (group->slots[i].phase != SlotPhase::empty) {
          say_once(spec.name + "/shrink", spec.name,
                   fmt::format("max_count {} waits: node {} still has an instance (lower count "
                               "first)",
                               entry.spec.max_count, now_spec.node(i + 1)));
          entry.spec.max_count = now_spec.max_count;
          break;
        }
      entry.members =
          final ? entry.spec.max_count : std::min(entry.spec.max_count, now_spec.max_count);
      // A slot joins the NodeSet only once drained (with the slots before it).
      for (unsigned i = 1; !final && i <= entry.members; ++i)
        if (undrained_.contains(now_spec.node(i))) entry.members = i - 1;
    }
    out.push_back(std::move(entry));
  }
  // A group whose file is gone stays as it is.
  for (const auto& group : cluster_.groups)
    if (!named.contains(group.spec.name)) out.push_back({group.spec, group.spec.max_count});
  std::ranges::sort(out, {}, [](const include::IncludeGroup& g) { return g.spec.name; });
  return out;
}

std::set<std::string> Provisioner::keep_include(const std::vector<GroupSpec>& specs, bool act) {
  const auto& path = settings_.slurm_conf_include;
  const auto groups = include_groups(specs, false);
  std::string text;
  std::string current;
  try {
    const auto admin = read_admin_conf();
    // Said once a run: other hosts cannot be checked from here.
    if (said_.say("include/shared")) {
      const auto risk =
          include::sharing_risk(admin, std::filesystem::weakly_canonical(slurm_conf_path()),
                                std::filesystem::weakly_canonical(path));
      if (!risk.empty()) add_cluster_event("include_not_shared", "warning", "", "", risk);
    }
    const auto expand = [](const std::string& list) { return slurm::expand_hostlist(list); };
    if (auto error = include::check(groups, admin, expand); !error.empty())
      throw ConfigError(std::move(error));
    text = include::render(groups, admin, slurm::compress_hostlist);
    current = read_text(path).value_or("");
    said_.forget("include");
  } catch (const std::exception& e) {
    say_once("include", "", std::string("the include file is not written: ") + e.what());
    return {};
  }
  std::set<std::string> all;
  for (const auto& group : groups) all.insert(group.spec.name);
  const auto change = include::classify(current, text);
  if (change != include::Change::restart) {
    said_.forget("include/restart");
    if (!act) return all;
    if (current != text) {
      try {
        write_text(path, text);
      } catch (const std::exception& e) {
        say_once("include/write", "", std::string("the include file: ") + e.what());
        return {};
      }
      said_.forget("include/write");
      auto written = fmt::format("{} written ({}): {}", path.string(), include::to_string(change),
                                 join(include::diff(current, text), " | "));
      if (change != include::Change::reconfigure) {
        add_cluster_event("slurm_conf_written", "info", "", "", written);
      } else {
        reconfigure_owed_ = std::move(written);
      }
    }
    if (reconfigure_owed_.empty()) return all;
    // slurmctld reads the file at its reconfigure, on a thread of its own;
    // the groups it declares count once that is in (tried again each tick).
    if (!writing(kSlurmctld))
      write(
          kSlurmctld, "reconfigure for the include file", [this] { slurm_.reconfigure(); },
          [this, owed = reconfigure_owed_] {
            said_.forget("include/write");
            add_cluster_event("slurm_conf_written", "info", "", "", owed);
            // A file written again meanwhile waits for a reconfigure of its own.
            if (reconfigure_owed_ == owed) reconfigure_owed_.clear();
          });
    if (reconfigure_owed_.empty()) return all;
    return {};
  }
  // A change of the NodeName lines: slurmctld must restart to read it.
  if (!act || text == failed_restart_text_) return {};
  const auto diff = join(include::diff(current, text), " | ");
  if (settings_.slurmctld_restart_command.empty()) {
    const auto staged = path.string() + ".next";
    try {
      if (read_text(staged).value_or("") != text) write_text(staged, text);
    } catch (const std::exception& e) {
      say_once("include/write", "", std::string("the include file: ") + e.what());
      return {};
    }
    if (said_.say("include/restart", text)) {
      add_cluster_event("restart_required", "warning", "", "",
                        fmt::format("the groups' NodeName lines change ({}): staged in {}; "
                                    "move it over {} and restart slurmctld (or set "
                                    "slurmctld_restart_command)",
                                    diff, staged, path.string()));
    }
    return {};
  }
  if (repairing_ || std::ranges::any_of(work_, [](const auto& w) { return w.second.calling; })) {
    if (said_.say("include/restart", "wait")) {
      add_cluster_event("restart_waits", "info", "", "",
                        "the include file needs a slurmctld restart: it waits for the repairs "
                        "and provider calls in flight");
    }
    return {};
  }
  said_.say("include/restart", text);
  add_cluster_event("slurmctld_restart", "warning", "", "",
                    fmt::format("restarting slurmctld for the include file: {}", diff));
  restart_text_ = text;
  restarting_ = true;
  reconfigure_owed_.clear();  // the restart reconfigures too
  restart_call_ = std::async(std::launch::async, [this, path, text, current] {
    const auto& command = settings_.slurmctld_restart_command;
    const auto timeout = settings_.slurmctld_restart_timeout;
    // Runs the command and waits for slurmctld; empty if it came back.
    const auto restart = [&]() -> std::string {
      const auto deadline = std::chrono::steady_clock::now() + timeout;
      const auto result = runner_.run(command, timeout);
      if (result.status != 0) return "the restart command failed: " + failure(result);
      while (!slurm_.ping()) {
        if (std::chrono::steady_clock::now() >= deadline)
          return "slurmctld did not answer within slurmctld_restart_timeout";
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
      return {};
    };
    try {
      write_text(path.string() + ".prev", current);
      write_text(path, text);
    } catch (const std::exception& e) {
      return std::string("cannot write the include file: ") + e.what();
    }
    auto why = restart();
    if (why.empty()) {
      try {
        slurm_.reconfigure();  // the slurmds read the new lines too
      } catch (const std::exception& e) {
        log::warn("after the slurmctld restart: {}", e.what());
      }
      return why;
    }
    // Back to the previous file, and slurmctld with it.
    try {
      write_text(path, current);
    } catch (const std::exception& e) {
      return why + "; and the previous file could not be put back: " + e.what();
    }
    const auto again = restart();
    return why + "; the previous file is back" +
           (again.empty() ? " and slurmctld runs with it" : " but " + again);
  });
  return {};
}

bool Provisioner::restart_done() {
  if (!restarting_) return true;
  if (restart_call_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return false;
  restarting_ = false;
  std::string why;
  try {
    why = restart_call_.get();
  } catch (const std::exception& e) {
    why = e.what();
  }
  if (why.empty()) {
    add_cluster_event("slurmctld_restarted", "info", "", "",
                      "slurmctld restarted with the new include file");
  } else {
    failed_restart_text_ = restart_text_;
    add_cluster_event("slurmctld_restart_failed", "error", "", "",
                      why + " (not tried again until the group files change)");
  }
  dirty_ = true;
  return true;
}

Provisioner::IncludePlan Provisioner::plan_include() {
  std::lock_guard lock(mutex_);
  IncludePlan plan;
  plan.path = settings_.slurm_conf_include.string();
  if (!merge()) {
    plan.error = "slurm_conf_include is not set: the admin declares the slots in slurm.conf";
    return plan;
  }
  try {
    const auto loaded = load_own_groups();
    if (!loaded.errors.empty())
      throw ConfigError(loaded.errors.begin()->first + ": " + loaded.errors.begin()->second);
    const auto groups = include_groups(loaded.specs, true);
    const auto admin = read_admin_conf();
    const auto expand = [](const std::string& list) { return slurm::expand_hostlist(list); };
    if (auto error = include::check(groups, admin, expand); !error.empty())
      throw ConfigError(std::move(error));
    const auto text = include::render(groups, admin, slurm::compress_hostlist);
    const auto current = read_text(settings_.slurm_conf_include).value_or("");
    plan.change = std::string(include::to_string(include::classify(current, text)));
    plan.diff = include::diff(current, text);
  } catch (const std::exception& e) {
    plan.error = e.what();
  }
  return plan;
}

LoadedGroups Provisioner::load_own_groups() const {
  // Group files say which nodes the controller (root) creates, and it
  // writes their .next and .prev beside them: only from a folder of its own.
  std::error_code missing;
  if (std::filesystem::exists(settings_.groups_dir, missing)) {
    try {
      files::check_own_folder(settings_.groups_dir, "groups_dir");
    } catch (const std::runtime_error& e) {
      throw ConfigError(e.what());
    }
  }
  return load_each_group(settings_.groups_dir);
}

provision::Group& Provisioner::known_group(const std::string& name) {
  auto* group = provision::find_group(cluster_, name);
  if (group == nullptr)
    throw std::invalid_argument("no group '" + name + "' is known (its file: " +
                                (settings_.groups_dir / (name + ".conf")).string() + ")");
  return *group;
}

std::string Provisioner::set_group(const std::string& name, std::optional<unsigned> count,
                                   std::optional<unsigned> min_count, uid_t uid) {
  const auto path = settings_.groups_dir / (name + ".conf");
  // Read, changed and written under the lock: two group sets at once both land.
  std::lock_guard lock(mutex_);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::invalid_argument("no group '" + name + "': cannot read " + path.string() + ": " +
                                std::error_code(errno, std::generic_category()).message());
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::map<std::string, std::string> values;
  if (count) values["count"] = std::to_string(*count);
  if (min_count) values["min_count"] = std::to_string(*min_count);
  const auto changed = set_group_keys(text, values);
  GroupSpec spec;
  try {
    spec = parse_group(name, changed, path.string());
  } catch (const ConfigError& e) {
    throw std::invalid_argument(e.what());
  }
  // The slots declared to Slurm stay: a count beyond them is refused here,
  // not found wrong at the next tick.
  if (const auto* group = provision::find_group(cluster_, name);
      group != nullptr && spec.count > group->spec.max_count)
    throw std::invalid_argument("count " + std::to_string(spec.count) + " is more than max_count " +
                                std::to_string(group->spec.max_count) + " of group '" + name +
                                "' (the slots declared to Slurm)");
  try {
    write_text(path, changed);  // the admin's file keeps its mode and owner
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string("cannot replace the group's file: ") + e.what());
  }
  std::string what;
  for (const auto& [key, value] : values) what += (what.empty() ? "" : " ") + key + "=" + value;
  events_.push_back({"group_set", "info", "group", name, "",
                     fmt::format("{} set by uid {} in {}", what, uid, path.string())});
  std::string message = fmt::format("group {}: {} written to {}", name, what, path.string());
  if (held()) {
    message += "; the controller holds back now (auto-resume status): the change waits";
  } else {
    const auto errors = reload_groups();
    if (const auto own = group_errors_.find(name); own != group_errors_.end()) {
      // Its change cannot be applied (a clash with another group): the file
      // goes back to what it was, and the request fails.
      const auto why = own->second;
      try {
        write_text(path, text);
      } catch (const std::exception& e) {
        log::warn("group {}: cannot put {} back: {}", name, path.string(), e.what());
      }
      reload_groups();
      save();
      throw std::invalid_argument(fmt::format("group {}: {} not applied ({} left as it was): {}",
                                              name, what, path.string(), why));
    }
    if (const auto* group = provision::find_group(cluster_, name); group != nullptr)
      message += fmt::format("; operation {} (count {}, min_count {})", group->operation.id,
                             group->operation.count, group->operation.min_count);
    if (!errors.empty())
      message +=
          "; other group files are in error (those groups keep their last good state): " + errors;
  }
  dirty_ = true;
  save();
  return message;
}

std::string Provisioner::apply_groups(uid_t uid) {
  std::lock_guard lock(mutex_);
  if (held()) throw std::invalid_argument("the controller holds back now (auto-resume status)");
  std::map<std::string, std::uint64_t> before;
  for (const auto& group : cluster_.groups) before[group.spec.name] = group.operation.id;
  const auto errors = reload_groups();
  if (!last_groups_error_.empty()) {
    save();
    throw std::invalid_argument("the group files cannot be read (nothing changed): " + errors);
  }
  std::vector<std::string> started;
  for (const auto& group : cluster_.groups)
    if (before[group.spec.name] != group.operation.id)
      started.push_back(fmt::format("{} (operation {}, count {})", group.spec.name,
                                    group.operation.id, group.operation.count));
  const auto message =
      started.empty() ? fmt::format("{} group(s) read: nothing changed", cluster_.groups.size())
                      : "operations started: " + join(started, ", ");
  events_.push_back({"group_apply", "info", "cluster", "", "",
                     fmt::format("group files read at the request of uid {}: {}", uid, message)});
  save();
  // The groups that read well are applied; those in error fail the request.
  if (!errors.empty())
    throw std::invalid_argument(fmt::format(
        "{}; group files in error (those groups keep their last good state): {}", message, errors));
  return message;
}

std::string Provisioner::retry_group(const std::string& name, uid_t uid) {
  std::lock_guard lock(mutex_);
  auto& group = known_group(name);
  std::vector<std::string> what;
  if (group.stopped)
    what.push_back(fmt::format("stopped after {} lifecycle failures", group.bootstrap_failures));
  if (group.config_failed) what.push_back("failed by a configuration error (78)");
  if (group.capacity_until > now()) what.push_back("waiting for capacity");
  if (std::ranges::any_of(group.slots, [&](const auto& slot) { return slot.retry_at > now(); }))
    what.push_back("creates backing off");
  provision::retry(group);
  const auto message =
      what.empty() ? fmt::format("group {} was neither stopped nor waiting: nothing to retry", name)
                   : fmt::format("group {} creates again (it was {})", name, join(what, ", "));
  events_.push_back({"group_retry", "info", "group", name, "",
                     fmt::format("{} (asked by uid {})", message, uid)});
  plan_after_now();  // planned on nodes read from now on
  dirty_ = true;
  save();
  return message;
}

std::string Provisioner::roll_group(const std::string& name, unsigned batch, uid_t uid) {
  std::lock_guard lock(mutex_);
  auto& group = known_group(name);
  if (batch == 0 || batch > GroupSpec::kMaxCount)
    throw std::invalid_argument("invalid batch " + std::to_string(batch) + ": expected 1-" +
                                std::to_string(GroupSpec::kMaxCount));
  provision::roll(group, batch);
  const auto rolling = std::ranges::count_if(group.slots, [](const auto& s) { return s.roll; });
  const auto message =
      rolling == 0 ? fmt::format("group {} has no instance in service: nothing to replace", name)
                   : fmt::format(
                         "group {}: {} instance(s) to replace, {} at a time (idle first; "
                         "each drained, its jobs end first)",
                         name, rolling, batch);
  events_.push_back({"roll_started", "info", "group", name, "",
                     fmt::format("{} (asked by uid {})", message, uid)});
  plan_after_now();  // planned on nodes read from now on
  dirty_ = true;
  save();
  return message;
}

std::optional<std::string> Provisioner::lifecycle_log(const std::string& node) const {
  std::lock_guard lock(mutex_);
  for (const auto& group : cluster_.groups)
    for (const auto& slot : group.slots)
      if (group.spec.node(slot.index) == node)
        return slot.attempt == 0 ? std::string() : log_file(group, slot);
  return std::nullopt;
}

void Provisioner::say_once(const std::string& key, const std::string& group,
                           const std::string& text) {
  if (said_.say(key, text)) {
    log::warn("group {}: {}", group, text);
    events_.push_back({"group_config", "error", "group", group, "", text});
  }
}

std::future<CommandResult> Provisioner::call(std::vector<std::string> argv,
                                             std::vector<std::string> env) {
  return std::async(std::launch::async, [this, argv = std::move(argv), env = std::move(env)] {
    return runner_.run_with_env(argv, settings_.timeout, env);
  });
}

std::string Provisioner::log_file(const provision::Group& group,
                                  const provision::Slot& slot) const {
  return (settings_.lifecycle_log_dir / group.spec.name /
          (group.spec.node(slot.index) + "." + std::to_string(slot.attempt) + ".log"))
      .string();
}

void Provisioner::launch(provision::Group& group, provision::Slot& slot,
                         const slurm::NodeInfo* node) {
  const auto name = group.spec.node(slot.index);
  const bool compute = group.spec.type == GroupType::compute;
  auto [it, fresh] = work_.try_emplace(name);
  auto& work = it->second;
  if (work.stage == Stage::power_down || work.stage == Stage::hide) {
    // The slot's last instance, or a failed create's power-up, is still
    // going down: the new one waits for it.
    if (powered_down(name, node, work)) work_.erase(it);
    return;
  }
  if (fresh) {
    work.stage = compute ? Stage::power_up : Stage::create;
    work.since = now();
    if (compute) {
      power_up_call(name);
      return;
    }
  }
  if (work.stage == Stage::power_up) {
    // The instance may boot only once Slurm waits for it (POWERING_UP): an
    // earlier registration leaves the power-up pending (docs/provisioning.md).
    const bool waiting = node != nullptr && node->powering_up;
    const bool up_already = node != nullptr && !node->powering_up && node->slurmd_start_time > 0;
    if (!waiting && !up_already) {
      if (now() - work.since >= kPowerRetry) {
        power_up_call(name);
        work.since = now();
      }
      return;
    }
    // POWER_UP dropped the Reason: the create waits until it is back.
    drain(name, "provisioning", on_work(name, [](Work& w) {
            if (w.stage == Stage::power_up) w.stage = Stage::create;
          }));
    if (work.stage != Stage::create) return;  // the drain is under way
  }
  if (!work.calling) {
    const auto log = log_file(group, slot);
    std::error_code ignored;
    std::filesystem::create_directories(std::filesystem::path(log).parent_path(), ignored);
    work.call = call({settings_.command.string(), "create", group.spec.name, name,
                      provision::token(group, slot)},
                     {"AR_GROUP_TYPE=" + std::string(to_string(group.spec.type)),
                      "AR_LIFECYCLE_SCRIPT=" + group.spec.lifecycle_script,
                      "AR_LIFECYCLE_LOG=" + log, "AR_NODE_CONF=" + group.spec.node_conf});
    work.calling = true;
    work.called_at = now();
    return;
  }
  if (work.call.wait_for(std::chrono::seconds{0}) != std::future_status::ready) {
    const auto limit = std::chrono::duration_cast<Millis>(settings_.create_timeout);
    if (limit.count() > 0 && now() - work.called_at >= limit) abandon(group, slot, work);
    return;
  }
  const auto result = work.call.get();
  work_.erase(it);
  created(group, slot, result);
}

void Provisioner::abandon(provision::Group& group, provision::Slot& slot, Work& work) {
  const auto name = group.spec.node(slot.index);
  const auto token = provision::token(group, slot);
  const auto key = token + "#" + std::to_string(work.called_at.count());
  abandoned_.emplace(key,
                     Abandoned{group.spec.name, name, token, work.called_at, std::move(work.call)});
  work_.erase(name);
  CommandResult result;
  result.error = fmt::format(
      "no answer within create_timeout={} s: abandoned for another try (the call goes on until "
      "provision_timeout; an instance it makes is terminated)",
      std::chrono::duration_cast<std::chrono::seconds>(settings_.create_timeout).count());
  add_cluster_event("create_abandoned", "warning", group.spec.name, name,
                    fmt::format("create (token {}): {}", token, result.error));
  created(group, slot, result);
}

void Provisioner::reap_abandoned() {
  for (auto it = abandoned_.begin(); it != abandoned_.end();) {
    auto& hung = it->second;
    if (hung.call.wait_for(std::chrono::seconds{0}) != std::future_status::ready) {
      ++it;
      continue;
    }
    const auto result = hung.call.get();
    const auto& token = hung.token;
    const auto after = (now() - hung.called_at).count() / 1000;
    std::string id;
    std::string why = failure(result);
    if (result.status == 0 || result.status == 65) {
      try {
        id = parse_create_output(result.output).instance_id;
      } catch (const std::invalid_argument& e) {
        why = e.what();
      }
    }
    if (!id.empty()) {
      const auto key = token + " " + id;
      reaped_.insert(key);
      if (!orphan_calls_.contains(key))
        orphan_calls_.emplace(
            key, call({settings_.command.string(), "terminate", hung.group, hung.node, id}, {}));
      add_cluster_event("create_abandoned", "warning", hung.group, hung.node,
                        fmt::format("the abandoned create (token {}) returned instance {} after "
                                    "{} s: terminating it",
                                    token, id, after));
    } else {
      add_cluster_event(
          "create_abandoned", "info", hung.group, hung.node,
          fmt::format(
              "the abandoned create (token {}) returned after {} s with no instance to "
              "terminate ({}){}",
              token, after, why,
              result.status == 0 ? "; an instance it made is found by `list` as an orphan" : ""));
    }
    it = abandoned_.erase(it);
  }
}

void Provisioner::created(provision::Group& group, provision::Slot& slot,
                          const CommandResult& result) {
  const auto name = group.spec.node(slot.index);
  auto outcome = provision::create_outcome(result.status, result.status < 0);
  std::string detail;
  CreateOutput out;
  if (outcome == provision::CreateOutcome::ok || outcome == provision::CreateOutcome::bootstrap) {
    try {
      out = parse_create_output(result.output);
    } catch (const std::invalid_argument& e) {
      outcome = provision::CreateOutcome::retryable;
      detail = e.what();
    }
  }
  if (outcome == provision::CreateOutcome::ok && group.spec.type == GroupType::compute &&
      !out.node_addr.empty())
    write(
        name, "NodeAddr",
        [this, name, addr = out.node_addr, host = out.node_hostname] {
          slurm_.set_node_address(name, addr, host);
        },
        {}, true);
  if (outcome == provision::CreateOutcome::bootstrap) {
    detail = fmt::format("host {}, script {}: {}", name, group.spec.lifecycle_script,
                         file_tail(log_file(group, slot)));
  } else if (outcome != provision::CreateOutcome::ok && detail.empty()) {
    detail = failure(result);
  } else if (outcome == provision::CreateOutcome::ok) {
    detail = out.instance_id.empty() ? "" : "instance " + out.instance_id;
  }
  const bool exists =
      outcome == provision::CreateOutcome::ok || outcome == provision::CreateOutcome::bootstrap;
  meter(group, slot, [&](InstanceRecord& r) {
    if (exists) {
      r.started = clock_.unix_now();
      r.instance_id = out.instance_id;
    } else {
      r.terminated = clock_.unix_now();
      r.end_reason = outcome_name(outcome);
    }
  });
  if (exists) slot.instance_id = out.instance_id;
  add(provision::on_created(cluster_, group.spec.name, slot.index, outcome, detail, now(),
                            plan_settings_));
  dirty_ = true;
  // Nothing came: the slot powered up for it goes down again (a POWERING_UP
  // node takes only a forced power-down).
  if (!exists && group.spec.type == GroupType::compute) power_down(name, true);
}

void Provisioner::leave(provision::Group& group, provision::Slot& slot,
                        const slurm::NodeInfo* node) {
  const auto name = group.spec.node(slot.index);
  auto [it, fresh] = work_.try_emplace(name);
  auto& work = it->second;
  auto finish = [&](bool ok, const std::string& why) {
    const auto reason = std::string(provision::to_string(slot.leave));
    work_.erase(it);
    if (ok)
      meter(group, slot, [&](InstanceRecord& r) {
        r.terminated = clock_.unix_now();
        r.end_reason = reason;
      });
    else
      log::warn("{}: terminate failed: {}", name, why);
    add(provision::on_terminated(cluster_, group.spec.name, slot.index, ok, now(), plan_settings_));
    dirty_ = true;
  };
  if (fresh) {
    work.stage = Stage::terminate;
    work.since = now();
    work.call = call({settings_.command.string(), "terminate", group.spec.name, name,
                      slot.instance_id.empty() ? "-" : slot.instance_id},
                     {});
    work.calling = true;
    return;
  }
  if (work.stage == Stage::terminate) {
    if (work.call.wait_for(std::chrono::seconds{0}) != std::future_status::ready) return;
    const auto result = work.call.get();
    work.calling = false;
    if (result.status != 0) {
      finish(false, failure(result));
      return;
    }
    if (group.spec.type == GroupType::service) {
      finish(true, "");
      return;
    }
    // A slot whose slurmd never registered (a failed lifecycle script, a
    // register timeout) is still powering up: only _FORCE powers it down.
    power_down(name, node != nullptr && node->powering_up);
    return;
  }
  if (powered_down(name, node, work)) finish(true, "");
}

bool Provisioner::powered_down(const std::string& name, const slurm::NodeInfo* node, Work& work) {
  if (node == nullptr) {  // hidden: powered down; done once drained again
    if (!work.drained) drain(name, "empty slot", on_work(name, [](Work& w) { w.drained = true; }));
    return work.drained;
  }
  if (work.stage == Stage::power_down && node->powering_down) {
    // Slurm cleared the drain as it began powering down.
    drain(name, "empty slot", on_work(name, [](Work& w) {
            if (w.stage == Stage::power_down) w.stage = Stage::hide;
          }));
  } else if (work.stage == Stage::power_down && now() - work.since >= kPowerRetry) {
    work.force = work.force || node->powering_up;
    power_down_call(name, work.force);
    work.since = now();
  }
  return false;
}

void Provisioner::power_up_call(const std::string& name) {
  // One write: no POWER_UP unless the drain is in.
  write(name, "drain (provisioning) and POWER_UP", [this, name] {
    slurm_.set_node_drain(name, std::string(kReasonPrefix) + "provisioning");
    slurm_.power_up(name);
  });
}

void Provisioner::power_down_call(const std::string& name, bool force) {
  if (force)
    write(name, "POWER_DOWN_FORCE", [this, name] { slurm_.power_down_force(name); });
  else
    write(name, "POWER_DOWN_ASAP", [this, name] { slurm_.power_down_asap(name); });
}

void Provisioner::power_down(const std::string& name, bool force) {
  auto& work = work_[name];
  work.stage = Stage::power_down;
  work.since = now();
  work.force = force;
  work.calling = false;
  work.drained = false;
  power_down_call(name, force);
}

void Provisioner::observe_slot(provision::Group& group, provision::Slot& slot,
                               const slurm::NodeInfo* node) {
  const bool compute = group.spec.type == GroupType::compute;
  const auto name = group.spec.node(slot.index);
  switch (slot.phase) {
    case SlotPhase::empty:
      // Powered up for an instance that did not come (a failed create), or
      // by someone else (Slurm for a job, had the drain gone): it goes back
      // down, drained.
      if (const auto it = work_.find(name); it != work_.end()) {
        if (powered_down(name, node, it->second)) work_.erase(it);
      } else if (compute && node != nullptr && node->cloud && node->powering_down) {
        // Powering down with no step of ours in flight (the controller
        // restarted meanwhile): Slurm cleared the drain, set it again.
        drain(name, "empty slot", [this, name] {
          auto& work = work_[name];
          work.stage = Stage::hide;
          work.since = now();
        });
      } else if (compute && node != nullptr && node->cloud) {
        drain(name, "empty slot", [this, name] { power_down(name, true); });
      }
      return;
    case SlotPhase::creating:
      launch(group, slot, node);
      return;
    case SlotPhase::joining:
      if (compute && node != nullptr && !node->powering_up && node->slurmd_start_time > 0 &&
          !node->not_responding) {
        add(provision::on_registered(cluster_, group.spec.name, slot.index, now()));
        drain(name, "ready, held until released");
        dirty_ = true;
      }
      return;
    case SlotPhase::terminating:
      leave(group, slot, node);
      return;
    default:
      break;
  }
  if (!compute) return;
  slot.busy = node != nullptr && (node->allocated || node->completing);
  slot.unhealthy = node == nullptr || node->down || node->fail || node->not_responding;
  slot.replace = node != nullptr && marked_for_replacement(*node);
  slot.kept = slot.phase == SlotPhase::in_service && node != nullptr && node->drain &&
              !slot.replace && !node->reason.starts_with(kReasonPrefix);
}

void Provisioner::observe(const NodeMap& nodes) {
  for (auto& group : cluster_.groups) {
    for (auto& slot : group.slots) {
      const auto name = group.spec.node(slot.index);
      if (writing(name)) continue;  // its stage waits for its write
      const auto it = nodes.find(name);
      try {
        observe_slot(group, slot, it == nodes.end() ? nullptr : it->second);
      } catch (const std::exception& e) {
        log::warn("{}: {}", name, e.what());  // tried again at the next tick
      }
    }
  }
}

void Provisioner::say_held() {
  // Held back: nothing changes in Slurm, at the provider or in the store
  // (provider calls in flight wait). The group files are read into a copy
  // (a new group's slots are not drained: that waits too) and what the
  // plan would start is said once.
  auto held = cluster_;
  std::swap(held, cluster_);
  const auto events = events_.size();
  const auto saying = said_;
  reload_groups(false);
  cluster_.slurmctld_up = true;
  const auto plan = provision::plan(cluster_, now(), plan_settings_);
  std::swap(held, cluster_);
  events_.resize(events);
  said_ = saying;
  std::set<std::string> subjects;
  for (const auto& action : plan.actions) {
    const auto subject = action.slot == 0 ? action.group : group_node(held, action);
    subjects.insert(subject);
    gate_->would(
        "provision", subject,
        fmt::format("{} {} (group {})", provision::to_string(action.kind), subject, action.group));
  }
  gate_->settle("provision", subjects);
}

std::string Provisioner::group_node(const provision::Cluster& cluster,
                                    const provision::Action& action) {
  const auto* group = provision::find_group(cluster, action.group);
  return group != nullptr ? group->spec.node(action.slot)
                          : action.group + "#" + std::to_string(action.slot);
}

void Provisioner::execute(const provision::Action& action) {
  auto& group = *provision::find_group(cluster_, action.group);
  if (action.kind == provision::ActionKind::rollback) return;
  auto& slot = group.slots.at(action.slot - 1);
  const auto name = group.spec.node(slot.index);
  const bool compute = group.spec.type == GroupType::compute;
  switch (action.kind) {
    case provision::ActionKind::create:
      meter(group, slot, [](InstanceRecord&) {});
      break;
    case provision::ActionKind::drain:
      // An idle slot's terminate is recorded in the same plan: drained too.
      if (compute && (slot.phase == SlotPhase::draining || slot.phase == SlotPhase::terminating))
        drain(name, std::string(provision::to_string(action.leave)));
      break;
    case provision::ActionKind::release: {
      auto in_service = [this, group_name = group.spec.name, index = slot.index] {
        meter_slot(group_name, index, [&](InstanceRecord& r) { r.in_service = clock_.unix_now(); });
      };
      if (compute)
        write(
            name, "resume", [this, name] { slurm_.resume_node(name); }, std::move(in_service),
            true);
      else
        in_service();
      break;
    }
    default:
      break;
  }
}

void Provisioner::meter_slot(const std::string& name, unsigned index,
                             const std::function<void(InstanceRecord&)>& change) {
  auto* group = provision::find_group(cluster_, name);
  if (group == nullptr || index == 0 || index > group->slots.size()) return;
  meter(*group, group->slots[index - 1], change);
}

bool Provisioner::known_instance(const ListedInstance& listed) const {
  const auto it = open_.find(listed.token);
  return it != open_.end() &&
         (it->second.instance_id.empty() || it->second.instance_id == listed.instance_id);
}

void Provisioner::sweep_orphans() {
  const auto timeout = std::chrono::duration_cast<Millis>(settings_.orphan_timeout);
  // Terminates asked for before.
  for (auto it = orphan_calls_.begin(); it != orphan_calls_.end();) {
    if (it->second.wait_for(std::chrono::seconds{0}) != std::future_status::ready) {
      ++it;
      continue;
    }
    const auto result = it->second.get();
    const auto& key = it->first;
    const auto parts = split_token(key.substr(0, key.find(' ')));
    if (result.status == 0) {
      orphans_.erase(key);
      said_.forget("orphan/" + key);
      add_cluster_event(
          "orphan_terminated", "warning", parts ? parts->group : "", parts ? parts->node : "",
          reaped_.erase(key) > 0
              ? fmt::format("instance {} (token {}), made by an abandoned create: terminated",
                            key.substr(key.find(' ') + 1), key.substr(0, key.find(' ')))
              : fmt::format("instance {} (token {}) was unknown to the controller for {} s: "
                            "terminated",
                            key.substr(key.find(' ') + 1), key.substr(0, key.find(' ')),
                            timeout.count() / 1000));
    } else {
      say_once("orphan/" + key, parts ? parts->group : "",
               "the terminate of unknown instance " + key + " failed: " + failure(result));
    }
    it = orphan_calls_.erase(it);
  }
  if (timeout.count() == 0) return;  // terminates of abandoned creates only
  if (!listing_) {
    if (now() < next_list_) return;
    list_call_ = call({settings_.command.string(), "list"}, {});
    listing_ = true;
    return;
  }
  if (list_call_.wait_for(std::chrono::seconds{0}) != std::future_status::ready) return;
  const auto result = list_call_.get();
  listing_ = false;
  next_list_ = now() + std::clamp(timeout / 2, Millis{1000}, Millis{60'000});
  std::vector<ListedInstance> listed;
  try {
    if (result.status != 0) throw std::invalid_argument(failure(result));
    listed = parse_list_output(result.output);
    said_.forget("orphan/list");
  } catch (const std::invalid_argument& e) {
    say_once("orphan/list", "",
             std::string("the provider's list failed (orphans are not looked for): ") + e.what());
    return;
  }
  std::map<std::string, Millis> still;
  for (const auto& instance : listed) {
    if (known_instance(instance)) continue;
    const auto key = instance.token + " " + instance.instance_id;
    const auto seen = orphans_.contains(key) ? orphans_.at(key) : now();
    still[key] = seen;
    const auto parts = split_token(instance.token);
    if (!parts) {
      say_once("orphan/" + key, "",
               "the provider lists instance " + instance.instance_id + " with token '" +
                   instance.token + "', which is no GROUP:NODE:ATTEMPT: left alone");
      continue;
    }
    if (now() - seen < timeout || orphan_calls_.contains(key)) continue;
    orphan_calls_.emplace(key, call({settings_.command.string(), "terminate", parts->group,
                                     parts->node, instance.instance_id},
                                    {}));
  }
  for (const auto& [key, call] : orphan_calls_) still.try_emplace(key, now());
  orphans_ = std::move(still);
}

void Provisioner::add_cluster_event(const std::string& kind, const std::string& level,
                                    const std::string& group, const std::string& node,
                                    const std::string& text) {
  log::warn("{}{}{}: {}: {}", group.empty() ? "" : "group " + group, node.empty() ? "" : " node ",
            node, kind, text);
  events_.push_back({kind, level, node.empty() ? "cluster" : "instance", group, node, text});
}

void Provisioner::tick(const NodeMap& nodes, bool repairing,
                       Clock::Steady::time_point nodes_read_at) {
  std::lock_guard lock(mutex_);
  repairing_ = repairing;
  if (!restart_done()) return;  // slurmctld restarts for the include file
  if (gate_ != nullptr && gate_->held()) {
    say_held();  // the writes' outcomes wait too: what follows them changes things
    return;
  }
  take_writes();
  for (const auto& node : std::vector<std::string>(undrained_.begin(), undrained_.end()))
    drain_slot(node);
  reload_groups();
  if (plan_after_) {
    if (nodes_read_at < *plan_after_) {
      save();
      return;  // planned at a look whose read began after the operation did
    }
    plan_after_.reset();
  }
  cluster_.slurmctld_up = true;  // the nodes were just loaded from it
  observe(nodes);
  const auto plan = provision::plan(cluster_, now(), plan_settings_);
  for (const auto& action : plan.actions) provision::record(cluster_, action, now());
  add(plan.events);
  dirty_ = dirty_ || !plan.actions.empty();
  save();  // write-ahead: recorded before any is carried out
  for (const auto& action : plan.actions) {
    try {
      execute(action);
    } catch (const std::exception& e) {
      log::warn("group {}: {} {}: {}", action.group, provision::to_string(action.kind), action.slot,
                e.what());
    }
  }
  add(provision::update_status(cluster_));
  reap_abandoned();
  if (settings_.orphan_timeout.count() > 0 || !orphan_calls_.empty()) sweep_orphans();
  save();
}

}  // namespace ar
