// A slot's stages with the provider and power saving: its create (launch,
// created; a hung one abandoned), its terminate (leave), its power-down,
// and the provider's calls with their lifecycle logs.

#include <fmt/core.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <system_error>

#include "autoresume/text.hpp"
#include "log.hpp"
#include "provision/provisioner.hpp"
#include "provision/provisioner_detail.hpp"

namespace ar {

using namespace provisioner_detail;  // NOLINT: the provisioner's own helpers

namespace {

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

}  // namespace

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

void Provisioner::power_down(const std::string& name, bool force) {
  auto& work = work_[name];
  work.stage = Stage::power_down;
  work.since = now();
  work.force = force;
  work.calling = false;
  work.drained = false;
  power_down_call(name, force);
}

}  // namespace ar
