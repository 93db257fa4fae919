#include "hostlist.hpp"

extern "C" {
#include <slurm/slurm.h>
}

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <type_traits>

namespace ar::slurm {

namespace {

using Hostlist =
    std::unique_ptr<std::remove_pointer_t<hostlist_t>, decltype(&slurm_hostlist_destroy)>;

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& expression) {
  Hostlist list(slurm_hostlist_create(expression.c_str()), &slurm_hostlist_destroy);
  if (!list) throw std::runtime_error("cannot parse the node list '" + expression + "'");
  std::vector<std::string> hosts;
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
