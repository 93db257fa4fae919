#include "slurm_adapter.hpp"

extern "C" {
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
}

#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <memory>

namespace ar::slurm {

namespace {

// libslurm's errors for a slurmctld it could not reach, or that did not
// answer within MessageTimeout.
bool unreachable(int error) {
  return (error >= SLURM_COMMUNICATIONS_CONNECTION_ERROR &&
          error <= SLURM_COMMUNICATIONS_SHUTDOWN_ERROR) ||
         (error >= SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR &&
          error <= SLURMCTLD_COMMUNICATIONS_SHUTDOWN_ERROR) ||
         (error >= SLURM_PROTOCOL_SOCKET_IMPL_ZERO_RECV_LENGTH &&
          error <= SLURM_PROTOCOL_SOCKET_ZERO_BYTES_SENT) ||
         error == ETIMEDOUT || error == ECONNREFUSED;
}

[[noreturn]] void fail(const std::string& what) {
  const int error = slurm_get_errno();
  if (unreachable(error)) throw SlurmUnreachable(what + ": " + slurm_strerror(error), error);
  throw SlurmError(what + ": " + slurm_strerror(error), error);
}

std::string text(const char* s) { return s != nullptr ? s : ""; }

}  // namespace

// Exported by libslurm though not declared in its headers.
extern "C" char* slurm_job_state_string(uint32_t state);
extern "C" void slurm_xfree(void** item);
extern "C" char* slurm_job_reason_string(enum job_state_reason inx);

namespace {
// Slurm 22.05's slurm_free_job_info_msg misses each job's admin_comment:
// without this every look at a job whose AdminComment auto-resume wrote
// leaks it. slurm_xfree leaves NULL behind, so a fixed libslurm frees
// nothing twice.
void free_jobs(job_info_msg_t* msg) {
  for (std::uint32_t i = 0; msg != nullptr && i < msg->record_count; ++i)
    slurm_xfree(reinterpret_cast<void**>(&msg->job_array[i].admin_comment));
  slurm_free_job_info_msg(msg);
}
}  // namespace

void init() { slurm_init(nullptr); }

// The job reads ask this cluster's slurmctld alone: without SHOW_LOCAL,
// libslurm first asks it for the federation (REQUEST_FED_INFO), one more
// RPC per read. The controller repairs this cluster's jobs only.
constexpr std::uint16_t kJobShow = SHOW_ALL | SHOW_LOCAL;

namespace {

JobInfo job_info(const slurm_job_info_t& j) {
  JobInfo info;
  info.job_id = j.job_id;
  info.uid = j.user_id;
  info.gid = j.group_id;
  info.state = slurm_job_state_string(j.job_state);
  info.running = (j.job_state & JOB_STATE_BASE) == JOB_RUNNING && !(j.job_state & JOB_COMPLETING);
  info.pending = (j.job_state & JOB_STATE_BASE) == JOB_PENDING;
  info.suspended = (j.job_state & JOB_STATE_BASE) == JOB_SUSPENDED;
  if (info.pending)
    info.reason = slurm_job_reason_string(static_cast<job_state_reason>(j.state_reason));
  info.nodes = text(j.nodes);
  if (!info.nodes.empty()) info.hosts = expand_hostlist(info.nodes);
  info.batch = j.batch_flag != 0;
  info.batch_host = text(j.batch_host);
  info.name = text(j.name);
  info.partition = text(j.partition);
  info.qos = text(j.qos);
  info.account = text(j.account);
  info.features = text(j.features);
  info.reservation = text(j.resv_name);
  info.licenses = text(j.licenses);
  info.wckey = text(j.wckey);
  info.exclusive = j.shared == JOB_SHARED_NONE;
  info.has_gres = (j.gres_total != nullptr && j.gres_total[0] != '\0') ||
                  (j.tres_per_node != nullptr && j.tres_per_node[0] != '\0');
  info.requeue = j.requeue != 0;
  info.admin_comment = text(j.admin_comment);
  info.end_time = j.end_time;
  info.restart_count = j.restart_cnt;
  info.num_nodes = j.num_nodes;
  if (j.num_nodes > 0) info.cpus_per_node = (j.num_cpus + j.num_nodes - 1) / j.num_nodes;
  info.memory_per_node = j.pn_min_memory;
  info.heterogeneous = j.het_job_id != 0 && j.het_job_id != NO_VAL;
  return info;
}

}  // namespace

std::optional<JobInfo> load_job(std::uint32_t job_id) {
  job_info_msg_t* msg = nullptr;
  if (slurm_load_job(&msg, job_id, kJobShow) != SLURM_SUCCESS) {
    if (slurm_get_errno() == ESLURM_INVALID_JOB_ID) return std::nullopt;
    fail("cannot load job " + std::to_string(job_id));
  }
  std::unique_ptr<job_info_msg_t, decltype(&free_jobs)> owner(msg, &free_jobs);
  if (msg == nullptr || msg->record_count == 0) return std::nullopt;
  return job_info(msg->job_array[0]);
}

std::map<std::uint32_t, JobInfo> load_user_jobs(const std::set<std::uint32_t>& ids, uid_t owner,
                                                std::size_t& listed) {
  std::map<std::uint32_t, JobInfo> out;
  job_info_msg_t* msg = nullptr;
  if (slurm_load_job_user(&msg, owner, kJobShow) != SLURM_SUCCESS)
    fail("cannot load the jobs of uid " + std::to_string(owner));
  std::unique_ptr<job_info_msg_t, decltype(&free_jobs)> held(msg, &free_jobs);
  listed = msg == nullptr ? 0 : msg->record_count;
  for (std::uint32_t i = 0; msg != nullptr && i < msg->record_count; ++i)
    if (ids.contains(msg->job_array[i].job_id))
      out.emplace(msg->job_array[i].job_id, job_info(msg->job_array[i]));
  return out;
}

uid_t slurm_user_uid() {
  slurm_conf_t* conf = nullptr;
  if (slurm_load_ctl_conf(0, &conf) != SLURM_SUCCESS) fail("slurm_load_ctl_conf");
  const uid_t uid = conf->slurm_user_id;
  slurm_free_ctl_conf(conf);
  return uid;
}

std::uint32_t message_timeout() {
  slurm_conf_t* conf = nullptr;
  if (slurm_load_ctl_conf(0, &conf) != SLURM_SUCCESS) fail("slurm_load_ctl_conf");
  const std::uint32_t seconds = conf->msg_timeout;
  slurm_free_ctl_conf(conf);
  return seconds;
}

NodeWatcher::~NodeWatcher() { slurm_free_node_info_msg(static_cast<node_info_msg_t*>(last_)); }

const std::vector<NodeInfo>& NodeWatcher::load() {
  auto* last = static_cast<node_info_msg_t*>(last_);
  node_info_msg_t* msg = nullptr;
  if (slurm_load_node(last != nullptr ? last->last_update : 0, &msg, SHOW_ALL) != SLURM_SUCCESS) {
    if (slurm_get_errno() == SLURM_NO_CHANGE_IN_DATA && last != nullptr) return nodes_;
    fail("cannot load the nodes");
  }
  slurm_free_node_info_msg(last);
  last_ = msg;
  nodes_.clear();
  for (std::uint32_t i = 0; i < msg->record_count; ++i) {
    const auto& n = msg->node_array[i];
    if (n.name == nullptr) continue;
    NodeInfo node;
    node.name = n.name;
    node.address = text(n.node_addr);
    node.hostname = text(n.node_hostname);
    node.port = n.port;
    const auto base = n.node_state & NODE_STATE_BASE;
    node.down = base == NODE_STATE_DOWN;
    node.idle = base == NODE_STATE_IDLE;
    node.fail = (n.node_state & NODE_STATE_FAIL) != 0;
    node.drain = (n.node_state & NODE_STATE_DRAIN) != 0;
    node.not_responding = (n.node_state & NODE_STATE_NO_RESPOND) != 0;
    node.completing = (n.node_state & NODE_STATE_COMPLETING) != 0;
    node.allocated = base == NODE_STATE_ALLOCATED || base == NODE_STATE_MIXED;
    node.reason = text(n.reason);
    node.reason_time = n.reason_time;
    node.slurmd_start_time = n.slurmd_start_time;
    node.gres = text(n.gres);
    node.cloud = (n.node_state & NODE_STATE_CLOUD) != 0;
    node.powered_down = (n.node_state & NODE_STATE_POWERED_DOWN) != 0;
    node.powering_up = (n.node_state & NODE_STATE_POWERING_UP) != 0;
    node.powering_down = (n.node_state & NODE_STATE_POWERING_DOWN) != 0;
    nodes_.push_back(std::move(node));
  }
  return nodes_;
}

std::string node_address(const std::string& node) {
  node_info_msg_t* msg = nullptr;
  if (slurm_load_node_single(&msg, const_cast<char*>(node.c_str()), SHOW_ALL) != SLURM_SUCCESS) {
    if (slurm_get_errno() == ESLURM_INVALID_NODE_NAME)
      throw SlurmError("slurmctld does not know node '" + node + "'", ESLURM_INVALID_NODE_NAME);
    fail("cannot load node " + node);
  }
  std::string address;
  if (msg->record_count > 0) address = text(msg->node_array[0].node_addr);
  slurm_free_node_info_msg(msg);
  if (address.empty()) throw SlurmError("slurmctld does not know node '" + node + "'", 0);
  return address;
}

std::map<std::string, std::vector<std::string>> partitions() {
  partition_info_msg_t* msg = nullptr;
  if (slurm_load_partitions(0, &msg, SHOW_ALL) != SLURM_SUCCESS) fail("cannot load the partitions");
  std::map<std::string, std::string> lists;
  for (std::uint32_t i = 0; i < msg->record_count; ++i)
    if (msg->partition_array[i].name != nullptr)
      lists[msg->partition_array[i].name] = text(msg->partition_array[i].nodes);
  slurm_free_partition_info_msg(msg);
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& [name, nodes] : lists)
    out[name] = nodes.empty() ? std::vector<std::string>{} : expand_hostlist(nodes);
  return out;
}

std::map<std::string, std::vector<std::string>> reservations() {
  reserve_info_msg_t* msg = nullptr;
  if (slurm_load_reservations(0, &msg) != SLURM_SUCCESS) fail("cannot load the reservations");
  std::map<std::string, std::string> lists;
  const auto now = std::time(nullptr);
  for (std::uint32_t i = 0; i < msg->record_count; ++i) {
    const auto& r = msg->reservation_array[i];
    if (r.name != nullptr && r.start_time <= now && now < r.end_time)
      lists[r.name] = text(r.node_list);
  }
  slurm_free_reservation_info_msg(msg);
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& [name, nodes] : lists)
    out[name] = nodes.empty() ? std::vector<std::string>{} : expand_hostlist(nodes);
  return out;
}

namespace {
void update_node(const std::string& node, std::uint32_t state, const std::string& reason) {
  update_node_msg_t msg;
  slurm_init_update_node_msg(&msg);
  msg.node_names = const_cast<char*>(node.c_str());
  msg.node_state = state;
  if (!reason.empty()) {
    msg.reason = const_cast<char*>(reason.c_str());
    msg.reason_uid = getuid();
  }
  if (slurm_update_node(&msg) != SLURM_SUCCESS) fail("cannot update node " + node);
}

void update_job(job_desc_msg_t& desc, const std::string& what) {
  if (slurm_update_job(&desc) != SLURM_SUCCESS) fail(what);
}
}  // namespace

void set_node_fail(const std::string& node, const std::string& reason) {
  update_node(node, NODE_STATE_FAIL, reason);
}

void set_node_down(const std::string& node, const std::string& reason) {
  update_node(node, NODE_STATE_DOWN, reason);
}

void resume_node(const std::string& node) { update_node(node, NODE_RESUME, ""); }

void undrain_node(const std::string& node) { update_node(node, NODE_STATE_IDLE, ""); }

void power_up(const std::string& node) { update_node(node, NODE_STATE_POWER_UP, ""); }

// As `scontrol update state=POWER_DOWN_ASAP`: power down once no job runs.
void power_down_asap(const std::string& node) {
  update_node(node, NODE_STATE_POWER_DOWN | NODE_STATE_POWER_DRAIN, "");
}

// As `scontrol update state=POWER_DOWN_FORCE`.
void power_down_force(const std::string& node) {
  update_node(node, NODE_STATE_POWER_DOWN | NODE_STATE_POWERED_DOWN, "");
}

void set_node_address(const std::string& node, const std::string& address,
                      const std::string& hostname) {
  update_node_msg_t msg;
  slurm_init_update_node_msg(&msg);
  msg.node_names = const_cast<char*>(node.c_str());
  msg.node_addr = const_cast<char*>(address.c_str());
  if (!hostname.empty()) msg.node_hostname = const_cast<char*>(hostname.c_str());
  if (slurm_update_node(&msg) != SLURM_SUCCESS)
    fail("cannot set the address of node " + node + " to " + address);
}

void set_admin_comment(std::uint32_t job_id, const std::string& text) {
  job_desc_msg_t desc;
  slurm_init_job_desc_msg(&desc);
  desc.job_id = job_id;
  desc.admin_comment = const_cast<char*>(text.c_str());
  update_job(desc, "cannot set the AdminComment of job " + std::to_string(job_id));
}

void shrink_job(std::uint32_t job_id, const std::string& nodelist) {
  job_desc_msg_t desc;
  slurm_init_job_desc_msg(&desc);
  desc.job_id = job_id;
  desc.req_nodes = const_cast<char*>(nodelist.c_str());
  update_job(desc, "cannot shrink job " + std::to_string(job_id) + " to " + nodelist);
}

namespace {
// Slurm 22.05's slurm_free_job_step_info_response_msg misses submit_line
// and cpus_per_tres (it frees tres_per_node twice instead): without this a
// daemon that lists steps every half second grows by ~170 bytes a call.
// slurm_xfree leaves NULL behind, so a fixed libslurm frees nothing twice.
void free_steps(job_step_info_response_msg_t* msg) {
  for (std::uint32_t i = 0; msg != nullptr && i < msg->job_step_count; ++i) {
    slurm_xfree(reinterpret_cast<void**>(&msg->job_steps[i].submit_line));
    slurm_xfree(reinterpret_cast<void**>(&msg->job_steps[i].cpus_per_tres));
  }
  slurm_free_job_step_info_response_msg(msg);
}

// Step job.step as slurmctld lists it: its node list ("" when it has none
// yet), or nothing if it is not listed.
std::optional<std::string> find_step(std::uint32_t job_id, std::uint32_t step_id) {
  job_step_info_response_msg_t* msg = nullptr;
  if (slurm_get_job_steps(0, job_id, step_id, &msg, kJobShow) != SLURM_SUCCESS) {
    if (slurm_get_errno() == ESLURM_INVALID_JOB_ID) return std::nullopt;
    fail("cannot load step " + std::to_string(job_id) + "." + std::to_string(step_id));
  }
  std::optional<std::string> nodes;
  for (std::uint32_t i = 0; msg != nullptr && i < msg->job_step_count; ++i)
    if (msg->job_steps[i].step_id.step_id == step_id) nodes = text(msg->job_steps[i].nodes);
  free_steps(msg);
  return nodes;
}
}  // namespace

std::optional<std::string> step_nodes(std::uint32_t job_id, std::uint32_t step_id) {
  auto nodes = find_step(job_id, step_id);
  if (nodes && nodes->empty()) return std::nullopt;
  return nodes;
}

bool step_exists(std::uint32_t job_id, std::uint32_t step_id) {
  return find_step(job_id, step_id).has_value();
}

std::set<std::pair<std::uint32_t, std::uint32_t>> all_steps_listed(
    const std::set<std::pair<std::uint32_t, std::uint32_t>>& asked, std::size_t& listed) {
  std::set<std::pair<std::uint32_t, std::uint32_t>> out;
  job_step_info_response_msg_t* msg = nullptr;
  if (slurm_get_job_steps(0, NO_VAL, NO_VAL, &msg, kJobShow) != SLURM_SUCCESS)
    fail("cannot load the steps");
  listed = msg == nullptr ? 0 : msg->job_step_count;
  for (std::uint32_t i = 0; msg != nullptr && i < msg->job_step_count; ++i) {
    const std::pair key{msg->job_steps[i].step_id.job_id, msg->job_steps[i].step_id.step_id};
    if (asked.contains(key)) out.insert(key);
  }
  free_steps(msg);
  return out;
}

void kill_step(std::uint32_t job_id, std::uint32_t step_id) {
  if (slurm_kill_job_step(job_id, step_id, SIGKILL) == SLURM_SUCCESS) return;
  const int error = slurm_get_errno();
  if (error == ESLURM_ALREADY_DONE || error == ESLURM_INVALID_JOB_ID) return;
  fail("cannot cancel step " + std::to_string(job_id) + "." + std::to_string(step_id));
}

void signal_step(std::uint32_t job_id, std::uint32_t step_id, int signal) {
  if (slurm_signal_job_step(job_id, step_id, static_cast<std::uint32_t>(signal)) == SLURM_SUCCESS)
    return;
  const int error = slurm_get_errno();
  if (error == ESLURM_ALREADY_DONE || error == ESLURM_INVALID_JOB_ID) return;
  fail("cannot signal step " + std::to_string(job_id) + "." + std::to_string(step_id));
}

std::optional<bool> step_daemons_left(std::uint32_t job_id, std::uint32_t step_id,
                                      const std::string& nodelist) {
  slurm_step_id_t id{};
  id.job_id = job_id;
  id.step_id = step_id;
  id.step_het_comp = NO_VAL;
  job_step_pids_response_msg_t* resp = nullptr;
  std::string nodes = nodelist;  // the API takes a char*
  const int rc = slurm_job_step_get_pids(&id, nodes.data(), &resp);
  const bool some =
      resp != nullptr && resp->pid_list != nullptr && slurm_list_count(resp->pid_list) > 0;
  slurm_job_step_pids_response_msg_free(resp);
  if (some) return true;
  // A slurmd with no slurmstepd of the step answers ESLURM_INVALID_JOB_ID
  // (the last error of all the nodes' is returned).
  if (rc == SLURM_SUCCESS || rc == ESLURM_INVALID_JOB_ID) return false;
  return std::nullopt;
}

void requeue(std::uint32_t job_id) {
  if (slurm_requeue(job_id, 0) != SLURM_SUCCESS)
    fail("cannot requeue job " + std::to_string(job_id));
}

void reconfigure() {
  if (slurm_reconfigure() != SLURM_SUCCESS) fail("cannot reconfigure slurmctld");
}

bool ping() { return slurm_ping(0) == SLURM_SUCCESS; }

std::uint32_t allocate_expand_helper(const ExpandRequest& request, uid_t uid, gid_t gid) {
  job_desc_msg_t desc;
  slurm_init_job_desc_msg(&desc);
  auto text = [](const std::string& s) {
    return s.empty() ? nullptr : const_cast<char*>(s.c_str());
  };
  desc.name = text(request.name);
  desc.dependency = text(request.dependency);
  desc.req_nodes = text(request.req_nodes);
  desc.min_nodes = request.min_nodes;
  desc.max_nodes = request.max_nodes;
  if (request.min_cpus > 0) desc.min_cpus = request.min_cpus;
  if (request.pn_min_memory > 0) desc.pn_min_memory = request.pn_min_memory;
  // slurmctld takes the submitter from the credential, and refuses a job
  // for another uid to anyone but root and SlurmUser.
  desc.user_id = uid;
  desc.group_id = gid;
  desc.partition = text(request.partition);
  desc.qos = text(request.qos);
  desc.account = text(request.account);
  desc.features = text(request.features);
  desc.reservation = text(request.reservation);
  desc.licenses = text(request.licenses);
  desc.wckey = text(request.wckey);
  if (request.exclusive) desc.shared = JOB_SHARED_NONE;
  resource_allocation_response_msg_t* response = nullptr;
  if (slurm_allocate_resources(&desc, &response) != SLURM_SUCCESS)
    fail("cannot allocate " + request.req_nodes + " (" + request.dependency + ")");
  const auto id = response->job_id;
  slurm_free_resource_allocation_response_msg(response);
  return id;
}

void merge_expand_helper(std::uint32_t helper_id, std::uint32_t job_id) {
  job_desc_msg_t helper;
  slurm_init_job_desc_msg(&helper);
  helper.job_id = helper_id;
  helper.min_nodes = 0;
  try {
    update_job(helper, "cannot hand the nodes of job " + std::to_string(helper_id) + " to job " +
                           std::to_string(job_id));
  } catch (const SlurmError& e) {
    // The helper's expanding link is not in slurmctld's saved state.
    if (e.errno_value() == ESLURM_INVALID_NODE_COUNT)
      throw HelperUnlinked(e.what(), e.errno_value());
    throw;
  }
}

std::vector<std::uint32_t> live_jobs_named(const std::string& name, uid_t owner) {
  job_info_msg_t* msg = nullptr;
  if (slurm_load_jobs(0, &msg, kJobShow) != SLURM_SUCCESS) fail("cannot load the jobs");
  std::vector<std::uint32_t> ids;
  for (std::uint32_t i = 0; i < msg->record_count; ++i) {
    const auto& j = msg->job_array[i];
    const auto base = j.job_state & JOB_STATE_BASE;
    if (j.name != nullptr && name == j.name && j.user_id == owner &&
        (base == JOB_PENDING || base == JOB_RUNNING))
      ids.push_back(j.job_id);
  }
  free_jobs(msg);
  return ids;
}

void cancel_job(std::uint32_t job_id) {
  if (slurm_kill_job(job_id, SIGKILL, 0) == SLURM_SUCCESS) return;
  const int error = slurm_get_errno();
  if (error == ESLURM_ALREADY_DONE || error == ESLURM_INVALID_JOB_ID) return;
  fail("cannot cancel job " + std::to_string(job_id));
}

void set_node_drain(const std::string& node, const std::string& reason) {
  update_node(node, NODE_STATE_DRAIN, reason);
}

}  // namespace ar::slurm
