#include "libslurm.hpp"

#include <stdexcept>
#include <string>

namespace ar::slurm {

std::optional<JobInfo> LibSlurm::load_job(std::uint32_t job_id) { return slurm::load_job(job_id); }

bool LibSlurm::Bulk::wanted(std::size_t key, std::size_t asked) {
  if (asked <= kOneByOne) return false;
  // Learned again now and then: a list that was long may be short now.
  if (++rounds_ % kRelearn == 0) listed_.clear();
  const auto it = listed_.find(key);
  return it == listed_.end() || it->second <= kPerAsked * asked;
}

std::map<std::uint32_t, JobInfo> LibSlurm::load_jobs(const std::set<std::uint32_t>& ids,
                                                     uid_t owner) {
  std::lock_guard lock(bulk_mutex_);
  std::map<std::uint32_t, JobInfo> out;
  if (job_lists_.wanted(owner, ids.size())) {
    std::size_t listed = 0;
    out = slurm::load_user_jobs(ids, owner, listed);
    job_lists_.listed_[owner] = listed;
    return out;
  }
  for (const auto id : ids)
    if (auto job = slurm::load_job(id)) out.emplace(id, std::move(*job));
  return out;
}

uid_t LibSlurm::slurm_user_uid() { return slurm::slurm_user_uid(); }

std::chrono::seconds LibSlurm::message_timeout() {
  auto known = message_timeout_.load();
  if (known < 0) {
    known = slurm::message_timeout();
    message_timeout_ = known;
  }
  return std::chrono::seconds(known);
}

const std::vector<NodeInfo>& LibSlurm::load_nodes() { return watcher_.load(); }

std::optional<NodeInfo> LibSlurm::load_node(const std::string& name) {
  NodeWatcher watcher;  // its own: the engine thread may be using watcher_
  for (const auto& node : watcher.load())
    if (node.name == name) return node;
  return std::nullopt;
}

std::map<std::string, std::vector<std::string>> LibSlurm::partitions() {
  return slurm::partitions();
}

std::map<std::string, std::vector<std::string>> LibSlurm::reservations() {
  return slurm::reservations();
}

void LibSlurm::set_node_fail(const std::string& node, const std::string& reason) {
  slurm::set_node_fail(node, reason);
}

void LibSlurm::set_node_down(const std::string& node, const std::string& reason) {
  slurm::set_node_down(node, reason);
}

void LibSlurm::set_node_drain(const std::string& node, const std::string& reason) {
  slurm::set_node_drain(node, reason);
}

void LibSlurm::resume_node(const std::string& node) { slurm::resume_node(node); }

void LibSlurm::undrain_node(const std::string& node) { slurm::undrain_node(node); }

void LibSlurm::power_up(const std::string& node) { slurm::power_up(node); }

void LibSlurm::power_down_asap(const std::string& node) { slurm::power_down_asap(node); }

void LibSlurm::power_down_force(const std::string& node) { slurm::power_down_force(node); }

void LibSlurm::set_node_address(const std::string& node, const std::string& address,
                                const std::string& hostname) {
  slurm::set_node_address(node, address, hostname);
}

void LibSlurm::shrink_job(std::uint32_t job_id, const std::string& nodelist) {
  slurm::shrink_job(job_id, nodelist);
}

std::optional<std::string> LibSlurm::step_nodes(std::uint32_t job_id, std::uint32_t step_id) {
  return slurm::step_nodes(job_id, step_id);
}

bool LibSlurm::step_exists(std::uint32_t job_id, std::uint32_t step_id) {
  return slurm::step_exists(job_id, step_id);
}

std::set<std::pair<std::uint32_t, std::uint32_t>> LibSlurm::listed_steps(
    const std::set<std::pair<std::uint32_t, std::uint32_t>>& asked) {
  std::lock_guard lock(bulk_mutex_);
  if (step_lists_.wanted(0, asked.size())) {
    std::size_t listed = 0;
    auto out = slurm::all_steps_listed(asked, listed);
    step_lists_.listed_[0] = listed;
    return out;
  }
  std::set<std::pair<std::uint32_t, std::uint32_t>> out;
  for (const auto& [job, step] : asked)
    if (slurm::step_exists(job, step)) out.emplace(job, step);
  return out;
}

void LibSlurm::kill_step(std::uint32_t job_id, std::uint32_t step_id) {
  slurm::kill_step(job_id, step_id);
}

void LibSlurm::signal_step(std::uint32_t job_id, std::uint32_t step_id, int signal) {
  slurm::signal_step(job_id, step_id, signal);
}

std::optional<bool> LibSlurm::step_daemons_left(std::uint32_t job_id, std::uint32_t step_id,
                                                const std::string& nodelist) {
  return slurm::step_daemons_left(job_id, step_id, nodelist);
}

void LibSlurm::requeue(std::uint32_t job_id) { slurm::requeue(job_id); }

void LibSlurm::set_admin_comment(std::uint32_t job_id, const std::string& text) {
  slurm::set_admin_comment(job_id, text);
}

void LibSlurm::reconfigure() { slurm::reconfigure(); }

bool LibSlurm::ping() { return slurm::ping(); }

std::uint32_t LibSlurm::submit_expand_helper(const JobInfo& job, const std::string& node,
                                             const std::string& name) {
  if (submit_program_.empty())
    return allocate_expand_helper(expand_request(job, node, name), job.uid, job.gid);
  const auto id = run_submit_program(submit_program_, job, node, name, kSubmitTimeout);
  // The program runs as the user, who may have taken it over: root merges
  // only a job of that user's that bears the helper's name.
  const auto helper = slurm::load_job(id);
  if (!helper || helper->uid != job.uid || helper->name != name)
    throw std::runtime_error(submit_program_.string() + " (as uid " + std::to_string(job.uid) +
                             ", for job " + std::to_string(job.job_id) + ") printed job " +
                             std::to_string(id) + ", which is no job of uid " +
                             std::to_string(job.uid) + " named " + name);
  return id;
}

void LibSlurm::merge_expand_helper(std::uint32_t helper_id, std::uint32_t job_id) {
  slurm::merge_expand_helper(helper_id, job_id);
}

std::vector<std::uint32_t> LibSlurm::live_jobs_named(const std::string& name, uid_t owner) {
  return slurm::live_jobs_named(name, owner);
}

void LibSlurm::cancel_job(std::uint32_t job_id) { slurm::cancel_job(job_id); }

}  // namespace ar::slurm
