#pragma once
// SlurmApi with libslurm: each call goes to the adapter's functions
// (slurm_adapter.hpp), but for the expand helper, which `submit_program`
// (auto-resume-submit) submits as the job's owner (expand_helper.hpp).
// Call slurm::init() once before using it.

#include <chrono>
#include <filesystem>

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
  uid_t slurm_user_uid() override;
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
  std::filesystem::path submit_program_;
  NodeWatcher watcher_;  // load_nodes' (the engine thread's)
};

}  // namespace ar::slurm
