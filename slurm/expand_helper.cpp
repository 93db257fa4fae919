#include "expand_helper.hpp"

extern "C" {
#include <slurm/slurm.h>
}
#include <sys/stat.h>

#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace ar::slurm {

namespace {

using nlohmann::json;

const char* const kStringFields[] = {"name",    "dependency", "req_nodes",   "partition", "qos",
                                     "account", "features",   "reservation", "licenses",  "wckey"};

std::string* string_field(ExpandRequest& r, const std::string& key) {
  if (key == "name") return &r.name;
  if (key == "dependency") return &r.dependency;
  if (key == "req_nodes") return &r.req_nodes;
  if (key == "partition") return &r.partition;
  if (key == "qos") return &r.qos;
  if (key == "account") return &r.account;
  if (key == "features") return &r.features;
  if (key == "reservation") return &r.reservation;
  if (key == "licenses") return &r.licenses;
  if (key == "wckey") return &r.wckey;
  return nullptr;
}

template <typename T>
T number(const json& value, const std::string& key) {
  if (!value.is_number_unsigned() || value.get<std::uint64_t>() > std::numeric_limits<T>::max())
    throw std::invalid_argument("expand request: '" + key + "' is not a number from 0 to " +
                                std::to_string(std::numeric_limits<T>::max()) + ": " +
                                value.dump());
  return static_cast<T>(value.get<std::uint64_t>());
}

void read_field(ExpandRequest& r, const std::string& key, const json& value) {
  if (auto* field = string_field(r, key)) {
    if (!value.is_string())
      throw std::invalid_argument("expand request: '" + key + "' is not a string: " + value.dump());
    *field = value.get<std::string>();
  } else if (key == "min_nodes") {
    r.min_nodes = number<std::uint32_t>(value, key);
  } else if (key == "max_nodes") {
    r.max_nodes = number<std::uint32_t>(value, key);
  } else if (key == "min_cpus") {
    r.min_cpus = number<std::uint32_t>(value, key);
  } else if (key == "pn_min_memory") {
    r.pn_min_memory = number<std::uint64_t>(value, key);
  } else if (key == "exclusive") {
    if (!value.is_boolean())
      throw std::invalid_argument("expand request: 'exclusive' is not true or false: " +
                                  value.dump());
    r.exclusive = value.get<bool>();
  } else {
    throw std::invalid_argument("expand request: unknown field '" + key + "'");
  }
}

std::string trimmed(std::string text) {
  const auto end = text.find_last_not_of(" \t\r\n");
  text.erase(end == std::string::npos ? 0 : end + 1);
  const auto begin = text.find_first_not_of(" \t\r\n");
  return begin == std::string::npos ? std::string() : text.substr(begin);
}

}  // namespace

ExpandRequest expand_request(const JobInfo& job, const std::string& node, const std::string& name) {
  ExpandRequest r;
  r.name = name;
  r.dependency = "expand:" + std::to_string(job.job_id);
  r.req_nodes = node;
  // The replacement must hold what each node of the job holds, so that the
  // relaunched step's tasks fit (e.g. --ntasks-per-node=2).
  r.min_cpus = job.cpus_per_node;
  if (job.memory_per_node != NO_VAL64) r.pn_min_memory = job.memory_per_node;
  r.partition = job.partition;
  r.qos = job.qos;
  r.account = job.account;
  r.features = job.features;
  // The job's reservation, licenses and wckey: the helper is charged and
  // placed as the job is (a node outside the job's reservation stays out).
  r.reservation = job.reservation;
  r.licenses = job.licenses;
  r.wckey = job.wckey;
  r.exclusive = job.exclusive;
  return r;
}

std::string to_json(const ExpandRequest& request) {
  auto r = request;  // string_field hands out pointers into a request
  json out = json::object();
  for (const char* key : kStringFields) out[key] = *string_field(r, key);
  out["min_nodes"] = r.min_nodes;
  out["max_nodes"] = r.max_nodes;
  out["min_cpus"] = r.min_cpus;
  out["pn_min_memory"] = r.pn_min_memory;
  out["exclusive"] = r.exclusive;
  return out.dump();
}

ExpandRequest parse_expand_request(const std::string& text) {
  json in;
  try {
    in = json::parse(text);
  } catch (const json::parse_error& e) {
    throw std::invalid_argument(std::string("expand request: not JSON: ") + e.what());
  }
  if (!in.is_object()) throw std::invalid_argument("expand request: not a JSON object");
  ExpandRequest r;
  for (const auto& [key, value] : in.items()) read_field(r, key, value);
  for (const char* key : {"name", "dependency", "req_nodes"})
    if (!in.contains(key) || string_field(r, key)->empty())
      throw std::invalid_argument(std::string("expand request: no '") + key + "'");
  return r;
}

std::filesystem::path default_submit_program() {
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) throw std::runtime_error("cannot find the running program: " + error.message());
  return self.parent_path() / "auto-resume-submit";
}

void check_submit_program(const std::filesystem::path& program) {
  struct stat st {};
  if (stat(program.c_str(), &st) != 0)
    throw std::runtime_error("the expand helper " + program.string() +
                             " is missing: install auto-resume-submit next to auto-resumed");
  if (!S_ISREG(st.st_mode) || (st.st_mode & (S_IXUSR | S_IXGRP | S_IXOTH)) == 0)
    throw std::runtime_error("the expand helper " + program.string() +
                             " is not an executable file");
}

std::uint32_t helper_job_id(const CommandResult& result, const std::filesystem::path& program,
                            const JobInfo& job, const std::string& node) {
  const auto said = trimmed(result.output);
  const auto what = program.string() + " (as uid " + std::to_string(job.uid) + ", allocating " +
                    node + " for job " + std::to_string(job.job_id) + ")";
  if (!result.error.empty())
    throw std::runtime_error(what + ": " + result.error + (said.empty() ? "" : ": " + said));
  if (result.status == kSubmitRefused) throw SlurmError(what + ": " + said, 0);
  if (result.status != 0)
    throw std::runtime_error(what + " exited with status " + std::to_string(result.status) +
                             (said.empty() ? "" : ": " + said));
  if (said.empty() || said.size() > 10 || said.find_first_not_of("0123456789") != std::string::npos)
    throw std::runtime_error(what + " printed no job id: '" + said + "'");
  const auto id = std::stoull(said);
  if (id == 0 || id > std::numeric_limits<std::uint32_t>::max())
    throw std::runtime_error(what + " printed no job id: '" + said + "'");
  return static_cast<std::uint32_t>(id);
}

std::uint32_t run_submit_program(const std::filesystem::path& program, const JobInfo& job,
                                 const std::string& node, const std::string& name,
                                 std::chrono::milliseconds timeout) {
  CommandOptions options;
  options.user = RunAs{job.uid, job.gid};
  // A clean environment: the program finds slurm.conf (and through it
  // munged's socket) as the controller does.
  std::vector<std::string> environment{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
  if (const char* conf = std::getenv("SLURM_CONF"))
    environment.push_back(std::string("SLURM_CONF=") + conf);
  options.environment = std::move(environment);
  options.input = to_json(expand_request(job, node, name));
  const auto result = run_command({program.string()}, timeout, options);
  return helper_job_id(result, program, job, node);
}

}  // namespace ar::slurm
