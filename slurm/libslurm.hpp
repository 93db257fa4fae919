#pragma once
// SlurmApi with libslurm: each call goes to the adapter's functions
// (slurm_adapter.hpp), but for the expand helper, which `submit_program`
// (auto-resume-submit) submits as the job's owner (expand_helper.hpp).
// Call slurm::init() once before using it.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <map>
#include <mutex>

#include "slurm_adapter.hpp"
#include "slurm_api.hpp"

namespace ar::slurm {

class LibSlurm final : public SlurmApi {
 public:
  // How long auto-resume-submit may take (slurmctld's answer included)
  // before it is killed.
  static constexpr std::chrono::seconds kSubmitTimeout{30};

  // Run as root, it submits expand helpers as their job's owner with
  // `submit_program`; run as anyone else (SlurmUser), it cannot take
  // another uid and submits them itself, for the owner (an empty path).
  explicit LibSlurm(std::filesystem::path submit_program)
      : submit_program_(std::move(submit_program)) {}
  std::optional<JobInfo> load_job(std::uint32_t job_id) override;
  std::map<std::uint32_t, JobInfo> load_jobs(const std::set<std::uint32_t>& ids,
                                             uid_t owner) override;
  uid_t slurm_user_uid() override;
  // Asked of slurmctld once; a change takes a restart of the controller.
  std::chrono::seconds message_timeout() override;
  const std::vector<NodeInfo>& load_nodes() override;
  std::optional<NodeInfo> load_node(const std::string& name) override;
  std::map<std::string, std::vector<std::string>> partitions() override;
  std::map<std::string, std::vector<std::string>> reservations() override;
  void set_node_fail(const std::string& node, const std::string& reason) override;
  void set_node_down(const std::string& node, const std::string& reason) override;
  void set_node_drain(const std::string& node, const std::string& reason) override;
  void resume_node(const std::string& node) override;
  void undrain_node(const std::string& node) override;
  void power_up(const std::string& node) override;
  void power_down_asap(const std::string& node) override;
  void power_down_force(const std::string& node) override;
  void set_node_address(const std::string& node, const std::string& address,
                        const std::string& hostname) override;
  void shrink_job(std::uint32_t job_id, const std::string& nodelist) override;
  std::optional<std::string> step_nodes(std::uint32_t job_id, std::uint32_t step_id) override;
  bool step_exists(std::uint32_t job_id, std::uint32_t step_id) override;
  std::set<std::pair<std::uint32_t, std::uint32_t>> listed_steps(
      const std::set<std::pair<std::uint32_t, std::uint32_t>>& asked) override;
  void kill_step(std::uint32_t job_id, std::uint32_t step_id) override;
  void signal_step(std::uint32_t job_id, std::uint32_t step_id, int signal) override;
  std::optional<bool> step_daemons_left(std::uint32_t job_id, std::uint32_t step_id,
                                        const std::string& nodelist) override;
  void requeue(std::uint32_t job_id) override;
  void set_admin_comment(std::uint32_t job_id, const std::string& text) override;
  void reconfigure() override;
  bool ping() override;
  std::uint32_t submit_expand_helper(const JobInfo& job, const std::string& node,
                                     const std::string& name) override;
  void merge_expand_helper(std::uint32_t helper_id, std::uint32_t job_id) override;
  std::vector<std::uint32_t> live_jobs_named(const std::string& name, uid_t owner) override;
  void cancel_job(std::uint32_t job_id) override;

 private:
  // Whether many jobs (steps) are read in one call (of the owner's jobs;
  // of every step) or one at a time. A read costs slurmctld a few
  // milliseconds whatever it packs (the credential, the locks), so one
  // call for many is cheaper, unless it packs far more than was asked (a
  // user with 50,000 array tasks): the last such list's length decides,
  // learned again every kRelearn rounds.
  class Bulk {
   public:
    bool wanted(std::size_t key, std::size_t asked);
    std::map<std::size_t, std::size_t> listed_;  // key -> records in its last list

   private:
    static constexpr std::size_t kOneByOne = 4;
    static constexpr std::size_t kPerAsked = 50;
    static constexpr std::size_t kRelearn = 120;
    std::size_t rounds_ = 0;
  };
  std::mutex bulk_mutex_;
  Bulk job_lists_;   // by owner
  Bulk step_lists_;  // key 0

  std::filesystem::path submit_program_;
  std::atomic<std::int64_t> message_timeout_{-1};  // seconds; -1: not asked yet
  NodeWatcher watcher_;                            // load_nodes' (the engine thread's)
};

}  // namespace ar::slurm
