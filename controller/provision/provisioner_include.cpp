// Merge mode: the include file the controller writes into slurm.conf
// (slurm_conf_include), from the admin's files read as they change; its
// reconfigure, or the slurmctld restart a new NodeName line needs; and
// `group plan`'s view of it.

#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <thread>

#include "autoresume/keyvalue.hpp"
#include "autoresume/text.hpp"
#include "hostlist.hpp"
#include "log.hpp"
#include "provision/groups.hpp"
#include "provision/provisioner.hpp"
#include "provision/provisioner_detail.hpp"

namespace ar {

using namespace provisioner_detail;  // NOLINT: the provisioner's own helpers

namespace {

using provision::SlotPhase;

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

}  // namespace

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

}  // namespace ar
