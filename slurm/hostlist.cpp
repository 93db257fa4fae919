#include "hostlist.hpp"

extern "C" {
#include <slurm/slurm.h>
}

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace ar::slurm {

namespace {

using Hostlist =
    std::unique_ptr<std::remove_pointer_t<hostlist_t>, decltype(&slurm_hostlist_destroy)>;

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& expression, std::size_t max_hosts) {
  // A long expression is named by its start.
  const auto named =
      "the node list '" + expression.substr(0, 64) + (expression.size() > 64 ? "...'" : "'");
  Hostlist list(slurm_hostlist_create(expression.c_str()), &slurm_hostlist_destroy);
  if (!list) throw std::runtime_error("cannot parse " + named);
  // Counted from its ranges, before a single name is made.
  if (const auto count = slurm_hostlist_count(list.get());
      count < 0 || static_cast<std::size_t>(count) > max_hosts)
    throw std::runtime_error(named + " names " + std::to_string(count) +
                             " hosts, more than the limit of " + std::to_string(max_hosts));
  std::vector<std::string> hosts;
  hosts.reserve(static_cast<std::size_t>(slurm_hostlist_count(list.get())));
  while (char* host = slurm_hostlist_shift(list.get())) {
    hosts.emplace_back(host);
    std::free(host);
  }
  return hosts;
}

std::string compress_hostlist(const std::vector<std::string>& hosts) {
  Hostlist list(slurm_hostlist_create(""), &slurm_hostlist_destroy);
  if (!list) throw std::runtime_error("cannot make a node list");
  for (const auto& host : hosts) slurm_hostlist_push_host(list.get(), host.c_str());
  char* ranged = slurm_hostlist_ranged_string_malloc(list.get());
  std::string out = ranged != nullptr ? ranged : "";
  std::free(ranged);
  return out;
}

}  // namespace ar::slurm
