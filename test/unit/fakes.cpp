#include "fakes.hpp"

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "hostlist.hpp"

namespace ar::test {

ManualClock::ManualClock()
    : now_(Steady::time_point{} + std::chrono::hours{1}),
      unix_ms_(system_clock().unix_now() * 1000) {}

Clock::Steady::time_point ManualClock::now() const {
  std::lock_guard lock(mutex_);
  return now_;
}

std::int64_t ManualClock::unix_now() const {
  std::lock_guard lock(mutex_);
  return unix_ms_ / 1000;
}

std::int64_t ManualClock::boot_ms() const {
  std::lock_guard lock(mutex_);
  return boot_ms_;
}

std::string ManualClock::boot_id() const {
  std::lock_guard lock(mutex_);
  return "fake-boot-" + std::to_string(boots_);
}

void ManualClock::advance(std::chrono::milliseconds by) {
  std::lock_guard lock(mutex_);
  now_ += by;
  unix_ms_ += by.count();
  boot_ms_ += by.count();
}

void ManualClock::step_wall(std::chrono::milliseconds by) {
  std::lock_guard lock(mutex_);
  unix_ms_ += by.count();
}

void ManualClock::reboot(std::chrono::milliseconds down) {
  std::lock_guard lock(mutex_);
  ++boots_;
  boot_ms_ = 1000;
  unix_ms_ += down.count();
  now_ += down;
}

std::unique_lock<std::recursive_mutex> FakeSlurm::check_reachable() const {
  looks.note();
  std::unique_lock lock(calls_mutex_);
  if (!reachable) throw slurm::SlurmUnreachable("Unable to contact slurm controller (fake)", 1);
  return lock;
}

void Hold::set(bool hold) {
  {
    std::lock_guard lock(mutex_);
    held_ = hold;
  }
  changed_.notify_all();
}

bool Hold::waiting() const {
  std::lock_guard lock(mutex_);
  return waiting_ > 0;
}

int Hold::waiters() const {
  std::lock_guard lock(mutex_);
  return waiting_;
}

int Hold::most_waiters() const {
  std::lock_guard lock(mutex_);
  return most_;
}

bool Hold::wait_for_waiter(std::chrono::milliseconds limit) const {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, limit, [this] { return waiting_ > 0; });
}

void Hold::pass() {
  std::unique_lock lock(mutex_);
  most_ = std::max(most_, ++waiting_);
  changed_.notify_all();
  changed_.wait_for(lock, std::chrono::seconds{10}, [this] { return !held_; });
  --waiting_;
}

slurm::NodeInfo& FakeSlurm::node(const std::string& name) {
  const auto it = nodes.find(name);
  if (it == nodes.end()) throw slurm::SlurmError("Invalid node name specified: " + name, 2);
  return it->second;
}

slurm::JobInfo& FakeSlurm::job(std::uint32_t id) {
  const auto it = jobs.find(id);
  if (it == jobs.end())
    throw slurm::SlurmError("Invalid job id specified: " + std::to_string(id), 3);
  return it->second;
}

void FakeSlurm::add_nodes(int count, const std::string& partition) {
  for (int i = 1; i <= count; ++i) {
    slurm::NodeInfo n;
    n.name = "node" + std::to_string(i);
    if (nodes.contains(n.name)) continue;
    n.address = "127.0.0." + std::to_string(10 + i);
    n.port = static_cast<std::uint16_t>(7000 + i);
    n.idle = true;
    n.slurmd_start_time = 1000 + i;
    nodes[n.name] = n;
    partition_nodes[partition].push_back(n.name);
  }
}

slurm::JobInfo& FakeSlurm::add_job(std::uint32_t id, uid_t uid,
                                   const std::vector<std::string>& hosts,
                                   const std::string& partition) {
  slurm::JobInfo j;
  j.job_id = id;
  j.uid = uid;
  j.state = "RUNNING";
  j.running = true;
  j.hosts = hosts;
  j.nodes = slurm::compress_hostlist(hosts);
  j.batch = true;
  j.batch_host = hosts.empty() ? "" : hosts.front();
  j.name = "train";
  j.partition = partition;
  j.requeue = true;
  j.num_nodes = static_cast<std::uint32_t>(hosts.size());
  j.cpus_per_node = 1;
  return jobs[id] = j;
}

void FakeSlurm::add_step(std::uint32_t job_id, std::uint32_t step, const std::string& nodelist) {
  steps[{job_id, step}] = nodelist;
}

void FakeSlurm::start_job(std::uint32_t id) {
  auto& j = job(id);
  j.pending = false;
  j.running = true;
  j.state = "RUNNING";
  j.reason.clear();
}

bool FakeSlurm::updated(const std::string& prefix) const {
  return std::any_of(updates.begin(), updates.end(),
                     [&](const std::string& u) { return u.starts_with(prefix); });
}

std::optional<slurm::JobInfo> FakeSlurm::load_job(std::uint32_t job_id) {
  const auto held = check_reachable();
  const auto it = jobs.find(job_id);
  if (it == jobs.end()) return std::nullopt;
  return it->second;
}

std::map<std::uint32_t, slurm::JobInfo> FakeSlurm::load_jobs(const std::set<std::uint32_t>& ids,
                                                             uid_t /*owner*/) {
  ++job_reads;
  const auto held = check_reachable();
  std::map<std::uint32_t, slurm::JobInfo> out;
  for (const auto id : ids)
    if (const auto it = jobs.find(id); it != jobs.end()) out.emplace(id, it->second);
  return out;
}

uid_t FakeSlurm::slurm_user_uid() {
  const auto held = check_reachable();
  return slurm_user;
}

std::chrono::seconds FakeSlurm::message_timeout() {
  const auto held = check_reachable();
  return msg_timeout;
}

const std::vector<slurm::NodeInfo>& FakeSlurm::load_nodes() {
  node_lists.pass();  // a slurmctld stopped
  ++node_reads;
  const auto held = check_reachable();
  listed_.clear();
  // The running jobs' nodes once, not once a node (bench/steps.sh lists
  // thousands of both).
  std::set<std::string> allocated;
  for (const auto& [id, j] : jobs)
    if (j.running) allocated.insert(j.hosts.begin(), j.hosts.end());
  for (const auto& [name, n] : nodes) {
    if (n.cloud && n.powered_down) continue;  // hidden, as Slurm hides it
    listed_.push_back(with_allocation(n, allocated.contains(name)));
  }
  return listed_;
}

slurm::NodeInfo FakeSlurm::as_listed(const std::string& name, slurm::NodeInfo n) const {
  const bool allocated = std::any_of(jobs.begin(), jobs.end(), [&](const auto& entry) {
    const auto& j = entry.second;
    return j.running && std::find(j.hosts.begin(), j.hosts.end(), name) != j.hosts.end();
  });
  return with_allocation(std::move(n), allocated);
}

slurm::NodeInfo FakeSlurm::with_allocation(slurm::NodeInfo n, bool allocated) {
  n.allocated = allocated;
  n.idle = !n.down && !n.allocated;
  return n;
}

std::optional<slurm::NodeInfo> FakeSlurm::load_node(const std::string& name) {
  const auto held = check_reachable();
  const auto it = nodes.find(name);
  if (it == nodes.end()) return std::nullopt;
  return as_listed(name, it->second);
}

std::map<std::string, std::vector<std::string>> FakeSlurm::partitions() {
  const auto held = check_reachable();
  return partition_nodes;
}

std::map<std::string, std::vector<std::string>> FakeSlurm::reservations() {
  const auto held = check_reachable();
  return reservation_nodes;
}

void FakeSlurm::set_node_fail(const std::string& name, const std::string& reason) {
  if (name == fail_marks_of) fail_marks.pass();
  const auto held = check_reachable();
  if (marks_unreachable.contains(name)) {
    ++unreachable_marks;
    throw slurm::SlurmUnreachable("slurmctld went away (fake)", 1);
  }
  auto& n = node(name);
  n.fail = true;
  n.reason = reason;
  updates.push_back("fail " + name + " " + reason);
}

void FakeSlurm::set_node_down(const std::string& name, const std::string& reason) {
  const auto held = check_reachable();
  auto& n = node(name);
  n.down = true;
  n.reason = reason;
  updates.push_back("down " + name + " " + reason);
}

void FakeSlurm::set_node_drain(const std::string& name, const std::string& reason) {
  if (name == node_writes_of || node_writes_of == "*") node_writes.pass();
  const auto held = check_reachable();
  auto& n = node(name);
  n.drain = true;
  n.reason = reason;
  updates.push_back("drain " + name + " " + reason);
}

void FakeSlurm::resume_node(const std::string& name) {
  if (name == node_writes_of || node_writes_of == "*") node_writes.pass();
  const auto held = check_reachable();
  if (refuse_resumes > 0) {
    --refuse_resumes;
    throw slurm::SlurmError("Socket timed out on send/recv operation (fake)", 5004);
  }
  auto& n = node(name);
  n.fail = n.down = n.drain = false;
  n.reason.clear();
  updates.push_back("resume " + name);
}

void FakeSlurm::undrain_node(const std::string& name) {
  const auto held = check_reachable();
  auto& n = node(name);
  n.drain = false;
  n.reason.clear();
  updates.push_back("undrain " + name);
}

// As measured on Slurm 22.05: POWER_UP keeps a drain but drops its Reason.
void FakeSlurm::power_up(const std::string& name) {
  if (name == node_writes_of || node_writes_of == "*") node_writes.pass();
  const auto held = check_reachable();
  auto& n = node(name);
  n.powered_down = false;
  n.powering_up = true;
  n.reason.clear();
  updates.push_back("power_up " + name);
}

// The slot starts powering down at once, which clears any drain (as Slurm
// does); finish_power_down ends it.
void FakeSlurm::power_down(const std::string& name, const std::string& how) {
  if (name == node_writes_of || node_writes_of == "*") node_writes.pass();
  const auto held = check_reachable();
  auto& n = node(name);
  n.powering_down = true;
  n.powering_up = false;
  n.drain = false;
  n.reason.clear();
  updates.push_back(how + " " + name);
}

// As measured on Slurm 22.05: POWER_DOWN_ASAP leaves a node that is still
// powering up (its slurmd has not registered) as it is; only _FORCE acts.
void FakeSlurm::power_down_asap(const std::string& name) {
  if (node(name).powering_up) {
    const auto held = check_reachable();
    updates.push_back("power_down_asap " + name + " (ignored: powering up)");
    return;
  }
  power_down(name, "power_down_asap");
}

void FakeSlurm::power_down_force(const std::string& name) { power_down(name, "power_down_force"); }

void FakeSlurm::finish_power_down(const std::string& name) {
  auto& n = node(name);
  n.powering_down = false;
  n.powered_down = true;
  n.slurmd_start_time = 0;
}

void FakeSlurm::set_node_address(const std::string& name, const std::string& address,
                                 const std::string& hostname) {
  if (name == node_writes_of || node_writes_of == "*") node_writes.pass();
  const auto held = check_reachable();
  auto& n = node(name);
  n.address = address;
  if (!hostname.empty()) n.hostname = hostname;
  updates.push_back("address " + name + " " + address);
}

void FakeSlurm::shrink_job(std::uint32_t job_id, const std::string& nodelist) {
  const auto held = check_reachable();
  auto& j = job(job_id);
  j.hosts = slurm::expand_hostlist(nodelist);
  j.nodes = nodelist;
  j.num_nodes = static_cast<std::uint32_t>(j.hosts.size());
  updates.push_back("shrink " + std::to_string(job_id) + " " + nodelist);
}

std::optional<std::string> FakeSlurm::step_nodes(std::uint32_t job_id, std::uint32_t step_id) {
  const auto held = check_reachable();
  const auto it = steps.find({job_id, step_id});
  if (it == steps.end()) return std::nullopt;
  return it->second;
}

bool FakeSlurm::step_exists(std::uint32_t job_id, std::uint32_t step_id) {
  if (job_id == later_calls_of && later_call == "step_exists") later_calls.pass();
  const auto held = check_reachable();
  return steps.contains({job_id, step_id});
}

std::set<std::pair<std::uint32_t, std::uint32_t>> FakeSlurm::listed_steps(
    const std::set<std::pair<std::uint32_t, std::uint32_t>>& asked) {
  ++step_reads;
  std::set<std::pair<std::uint32_t, std::uint32_t>> out;
  for (const auto& [job, step] : asked)
    if (step_exists(job, step)) out.emplace(job, step);
  return out;
}

void FakeSlurm::kill_step(std::uint32_t job_id, std::uint32_t step_id) {
  const auto held = check_reachable();
  if (refuse_kill_step) throw slurm::SlurmError("Access/permission denied (fake)", 2002);
  if (lingering_steps.erase({job_id, step_id}) == 0) steps.erase({job_id, step_id});
  updates.push_back("kill_step " + std::to_string(job_id) + "." + std::to_string(step_id));
}

void FakeSlurm::signal_step(std::uint32_t job_id, std::uint32_t step_id, int signal) {
  const auto held = check_reachable();
  updates.push_back("signal_step " + std::to_string(job_id) + "." + std::to_string(step_id) + " " +
                    std::to_string(signal));
}

std::optional<bool> FakeSlurm::step_daemons_left(std::uint32_t job_id, std::uint32_t step_id,
                                                 const std::string& nodelist) {
  const auto held = check_reachable();
  daemons_asked.push_back(std::to_string(job_id) + "." + std::to_string(step_id) + " " + nodelist);
  if (daemons_unknown) return std::nullopt;
  return step_daemons.contains({job_id, step_id});
}

void FakeSlurm::set_admin_comment(std::uint32_t job_id, const std::string& text) {
  admin_comments.pass();  // a slow slurmctld
  const auto held = check_reachable();
  job(job_id).admin_comment = text;
}

void FakeSlurm::requeue(std::uint32_t job_id) {
  if (job_id == later_calls_of && later_call == "requeue") later_calls.pass();
  const auto held = check_reachable();
  auto& j = job(job_id);
  j.running = false;
  j.pending = true;
  j.state = "PENDING";
  ++j.restart_count;
  updates.push_back("requeue " + std::to_string(job_id));
}

std::uint32_t FakeSlurm::submit_expand_helper(const slurm::JobInfo& of,
                                              const std::string& node_name,
                                              const std::string& name) {
  helper_submits.pass();  // the program stopped by its user
  const auto held = check_reachable();
  if (refuse_helpers.contains(node_name))
    throw slurm::SlurmError("Requested node configuration is not available (fake)", 4);
  const auto id = next_job_id_++;
  auto& helper = add_job(id, of.uid, {node_name}, of.partition);
  helper.name = name;
  helper.batch = false;
  if (!helpers_start) {
    helper.running = false;
    helper.pending = true;
    helper.state = "PENDING";
    helper.reason = "Resources";
  }
  updates.push_back("helper " + std::to_string(id) + " " + node_name + " for " +
                    std::to_string(of.job_id));
  return id;
}

void FakeSlurm::merge_expand_helper(std::uint32_t helper_id, std::uint32_t job_id) {
  if (job_id == later_calls_of && later_call == "merge") later_calls.pass();
  const auto held = check_reachable();
  if (unlinked_helpers.contains(helper_id))
    throw slurm::HelperUnlinked("cannot hand the nodes of job " + std::to_string(helper_id) +
                                    " to job " + std::to_string(job_id) +
                                    ": Node count specification invalid",
                                2000);
  auto& helper = job(helper_id);
  auto& target = job(job_id);
  for (const auto& host : helper.hosts) target.hosts.push_back(host);
  std::sort(target.hosts.begin(), target.hosts.end());  // Slurm keeps nodes in order
  target.nodes = slurm::compress_hostlist(target.hosts);
  target.num_nodes = static_cast<std::uint32_t>(target.hosts.size());
  jobs.erase(helper_id);
  updates.push_back("merge " + std::to_string(helper_id) + " into " + std::to_string(job_id));
}

std::vector<std::uint32_t> FakeSlurm::live_jobs_named(const std::string& name, uid_t owner) {
  const auto held = check_reachable();
  std::vector<std::uint32_t> out;
  for (const auto& [id, j] : jobs)
    if (j.name == name && j.uid == owner && (j.running || j.pending)) out.push_back(id);
  return out;
}

void FakeSlurm::cancel_job(std::uint32_t job_id) {
  const auto held = check_reachable();
  jobs.erase(job_id);
  updates.push_back("cancel " + std::to_string(job_id));
}

std::vector<ProbeResult> FakeProber::probe(const std::vector<ProbeTarget>& targets,
                                           std::chrono::milliseconds /*timeout*/,
                                           ProbeDepth /*depth*/) {
  looks.note();
  rounds.pass();
  std::vector<ProbeResult> out;
  for (const auto& t : targets) {
    ++probes;
    out.push_back(unknown.contains(t.address) ? ProbeResult::unknown
                  : dead.contains(t.address)  ? ProbeResult::silent
                                              : ProbeResult::answered);
  }
  return out;
}

CommandResult FakeRunner::run(const std::vector<std::string>& argv,
                              std::chrono::milliseconds timeout) {
  looks.note();
  std::unique_lock lock(mutex_);
  calls_.push_back(argv);
  if (hang_) {
    ++hung_;
    released_.wait(lock, [this] { return releases_ > 0 || cancelled_; });
    --hung_;
    if (releases_ > 0) --releases_;
    if (released_result_) {
      auto out = std::move(*released_result_);
      released_result_.reset();
      return out;
    }
    return {-1, "",
            argv.at(0) + " did not finish within " + std::to_string(timeout.count() / 1000) + " s"};
  }
  return result_;
}

CommandResult FakeRunner::run_with_env(const std::vector<std::string>& argv,
                                       std::chrono::milliseconds timeout,
                                       const std::vector<std::string>& environment) {
  std::vector<std::string> call{"env"};
  call.insert(call.end(), environment.begin(), environment.end());
  call.insert(call.end(), argv.begin(), argv.end());
  return run(call, timeout);
}

void FakeRunner::cancel_all() {
  {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
  }
  released_.notify_all();
}

void FakeRunner::set_result(CommandResult result) {
  std::lock_guard lock(mutex_);
  result_ = std::move(result);
}

void FakeRunner::set_hang(bool hang) {
  std::lock_guard lock(mutex_);
  hang_ = hang;
}

void FakeRunner::release() {
  {
    std::lock_guard lock(mutex_);
    if (hung_ == 0) return;  // nothing to release: the next hung run hangs
    ++releases_;
  }
  released_.notify_all();
}

void FakeRunner::release(CommandResult result) {
  {
    std::lock_guard lock(mutex_);
    if (hung_ == 0) return;
    released_result_ = std::move(result);
    ++releases_;
  }
  released_.notify_all();
}

std::vector<std::vector<std::string>> FakeRunner::calls() const {
  std::lock_guard lock(mutex_);
  return calls_;
}

TempDir::TempDir() {
  char pattern[] = "/tmp/ar-unit-test.XXXXXX";
  const char* made = mkdtemp(pattern);
  if (made == nullptr) throw std::runtime_error("mkdtemp failed");
  path = made;
}

TempDir::~TempDir() { std::filesystem::remove_all(path); }

}  // namespace ar::test
