#pragma once
// The expand helper: the allocation of a replacement node that a job
// absorbs (`--dependency=expand:JOB`). The controller runs as root, but the
// helper must reach slurmctld as the job's owner (job_submit plugins, limits
// and accounting see the submitter): the controller runs the program
// auto-resume-submit as that user and hands it the job description as JSON
// on stdin; the program calls slurm_allocate_resources and prints the new
// job id.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>

#include "autoresume/process.hpp"
#include "slurm_api.hpp"

namespace ar::slurm {

// What the helper asks slurmctld for: the fields of Slurm's job_desc_msg_t
// it sets (0 or empty: Slurm's default). The user and group are those the
// program runs as.
struct ExpandRequest {
  std::string name;
  std::string dependency;  // expand:JOB
  std::string req_nodes;
  std::uint32_t min_nodes = 1;
  std::uint32_t max_nodes = 1;
  std::uint32_t min_cpus = 0;
  std::uint64_t pn_min_memory = 0;  // MiB per node, as Slurm's field
  std::string partition;
  std::string qos;
  std::string account;
  std::string features;
  std::string reservation;
  std::string licenses;
  std::string wckey;
  bool exclusive = false;
};

// The helper that allocates `node` for `job` to absorb, named `name`: in the
// job's partition, QOS, account, reservation, licenses and wckey, with its
// features, exclusivity and CPUs and memory per node.
ExpandRequest expand_request(const JobInfo& job, const std::string& node, const std::string& name);

// The request as one JSON object, and back. parse_expand_request throws
// std::invalid_argument naming a field that is unknown, missing (name,
// dependency, req_nodes) or of the wrong type, or text that is no JSON
// object.
std::string to_json(const ExpandRequest& request);
ExpandRequest parse_expand_request(const std::string& text);

// The program next to the running one (auto-resumed's folder), and a check
// that it is there: throws std::runtime_error naming the path otherwise.
std::filesystem::path default_submit_program();
void check_submit_program(const std::filesystem::path& program);

// How auto-resume-submit ends: 0 with the job id on stdout; kRefused when
// slurmctld refused the allocation (its message on stderr); kBadInput for a
// request it cannot read.
constexpr int kSubmitRefused = 1;
constexpr int kSubmitBadInput = 2;

// The job id in a successful run's output, checked against what the
// controller asked for; throws SlurmError when slurmctld refused the
// helper (the message names the job, the node, the uid and what the
// program said) and std::runtime_error for a program that did not run to
// its end or printed no job id.
std::uint32_t helper_job_id(const CommandResult& result, const std::filesystem::path& program,
                            const JobInfo& job, const std::string& node);

// Runs `program` as the job's user (its uid, gid and groups; a clean
// environment with the controller's SLURM_CONF, if set) with the request
// on stdin, killed after `timeout`; returns the helper's job id (it may
// still be pending). Errors as helper_job_id.
std::uint32_t run_submit_program(const std::filesystem::path& program, const JobInfo& job,
                                 const std::string& node, const std::string& name,
                                 std::chrono::milliseconds timeout);

}  // namespace ar::slurm
