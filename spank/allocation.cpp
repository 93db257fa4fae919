#include "allocation.hpp"

extern "C" {
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
}

#include <stdexcept>

#include "hostlist.hpp"

namespace ar::spank {

namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(what + ": " + slurm_strerror(slurm_get_errno()));
}

std::string node_address(const std::string& name) {
  node_info_msg_t* msg = nullptr;
  if (slurm_load_node_single(&msg, const_cast<char*>(name.c_str()), SHOW_ALL) != SLURM_SUCCESS)
    fail("cannot load node " + name);
  std::string address;
  if (msg != nullptr && msg->record_count > 0 && msg->node_array[0].node_addr != nullptr)
    address = msg->node_array[0].node_addr;
  slurm_free_node_info_msg(msg);
  if (address.empty()) throw std::runtime_error("node " + name + " has no NodeAddr");
  return address;
}

}  // namespace

Allocation load_allocation(std::uint32_t job_id) {
  job_info_msg_t* msg = nullptr;
  // SHOW_LOCAL: the job is this cluster's, and without it libslurm asks
  // slurmctld for the federation first, one more RPC.
  if (slurm_load_job(&msg, job_id, SHOW_ALL | SHOW_LOCAL) != SLURM_SUCCESS)
    fail("cannot load job " + std::to_string(job_id));
  Allocation allocation;
  if (msg != nullptr && msg->record_count > 0 && msg->job_array[0].nodes != nullptr)
    allocation.nodelist = msg->job_array[0].nodes;
  slurm_free_job_info_msg(msg);
  if (allocation.nodelist.empty())
    throw std::runtime_error("job " + std::to_string(job_id) + " has no nodes");
  allocation.hosts = slurm::expand_hostlist(allocation.nodelist);
  if (allocation.hosts.empty())
    throw std::runtime_error("the node list '" + allocation.nodelist + "' is empty");
  allocation.first_address = node_address(allocation.hosts.front());
  return allocation;
}

}  // namespace ar::spank
