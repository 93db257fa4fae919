// Instances no slot knows: those abandoned creates made (reap_abandoned),
// and those the provider's `list` shows (sweep_orphans), terminated once
// listed for orphan_timeout.

#include <fmt/core.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "provision/provisioner.hpp"
#include "provision/provisioner_detail.hpp"

namespace ar {

using namespace provisioner_detail;  // NOLINT: the provisioner's own helpers

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

}  // namespace ar
