#include "expand_helper.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>

#include "fakes.hpp"

using ar::CommandResult;
using ar::slurm::ExpandRequest;
using ar::slurm::helper_job_id;
using ar::slurm::parse_expand_request;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;

namespace {

ar::slurm::JobInfo job_of_user() {
  ar::slurm::JobInfo job;
  job.job_id = 42;
  job.uid = 65534;
  job.gid = 65534;
  job.partition = "gpu";
  job.qos = "high";
  job.account = "physics";
  job.features = "a100";
  job.reservation = "maint";
  job.licenses = "fluent:2";
  job.wckey = "exp7";
  job.exclusive = true;
  job.cpus_per_node = 8;
  job.memory_per_node = 4096;
  return job;
}

}  // namespace

TEST_CASE("the expand request carries what the job asked for, and reads back the same",
          "[expand_helper]") {
  const auto request = ar::slurm::expand_request(job_of_user(), "node9", "auto-resume-expand-42");
  CHECK(request.name == "auto-resume-expand-42");
  CHECK(request.dependency == "expand:42");
  CHECK(request.req_nodes == "node9");
  CHECK(request.min_nodes == 1);
  CHECK(request.max_nodes == 1);
  CHECK(request.min_cpus == 8);
  CHECK(request.pn_min_memory == 4096);
  CHECK(request.partition == "gpu");
  CHECK(request.qos == "high");
  CHECK(request.account == "physics");
  CHECK(request.features == "a100");
  CHECK(request.reservation == "maint");
  CHECK(request.licenses == "fluent:2");
  CHECK(request.wckey == "exp7");
  CHECK(request.exclusive);

  const auto back = parse_expand_request(ar::slurm::to_json(request));
  CHECK(ar::slurm::to_json(back) == ar::slurm::to_json(request));
  CHECK(back.wckey == "exp7");
  CHECK(back.pn_min_memory == 4096);

  // Slurm's "not set" memory is not asked for.
  auto job = job_of_user();
  job.memory_per_node = std::numeric_limits<std::uint64_t>::max() - 1;  // NO_VAL64
  CHECK(ar::slurm::expand_request(job, "node9", "n").pn_min_memory == 0);
}

TEST_CASE("auto-resume-submit refuses a request it cannot read, naming the field",
          "[expand_helper]") {
  const std::string base = R"("name":"x","dependency":"expand:1","req_nodes":"n1")";
  CHECK(parse_expand_request("{" + base + "}").min_nodes == 1);
  CHECK_THROWS_WITH(parse_expand_request("{" + base + R"(,"user_id":0})"),
                    Contains("unknown field 'user_id'"));
  CHECK_THROWS_WITH(parse_expand_request("{" + base + R"(,"min_cpus":"8"})"),
                    Contains("'min_cpus' is not a number"));
  CHECK_THROWS_WITH(parse_expand_request("{" + base + R"(,"max_nodes":4294967296})"),
                    Contains("'max_nodes' is not a number from 0 to 4294967295"));
  CHECK_THROWS_WITH(parse_expand_request("{" + base + R"(,"partition":7})"),
                    Contains("'partition' is not a string"));
  CHECK_THROWS_WITH(parse_expand_request("{" + base + R"(,"exclusive":1})"),
                    Contains("'exclusive' is not true or false"));
  CHECK_THROWS_WITH(parse_expand_request(R"({"name":"x","dependency":"expand:1"})"),
                    Contains("no 'req_nodes'"));
  CHECK_THROWS_WITH(parse_expand_request("[1]"), Contains("not a JSON object"));
  CHECK_THROWS_WITH(parse_expand_request("{"), Contains("not JSON"));
}

TEST_CASE("the helper's job id is read from its output, and a failure names job, node and uid",
          "[expand_helper]") {
  const auto job = job_of_user();
  const std::filesystem::path program = "/usr/sbin/auto-resume-submit";
  CHECK(helper_job_id({0, "5012\n", ""}, program, job, "node9") == 5012);

  const CommandResult refused{
      ar::slurm::kSubmitRefused,
      "auto-resume-submit: cannot allocate node9 (expand:42): Invalid account or "
      "account/partition combination specified\n",
      ""};
  CHECK_THROWS_AS(helper_job_id(refused, program, job, "node9"), ar::slurm::SlurmError);
  CHECK_THROWS_WITH(helper_job_id(refused, program, job, "node9"),
                    Contains("/usr/sbin/auto-resume-submit (as uid 65534, allocating node9 for "
                             "job 42): auto-resume-submit: cannot allocate node9") &&
                        Contains("Invalid account"));

  // Not Slurm's refusal: the program did not run to its end, or said
  // something else; retried, not another node chosen.
  auto not_slurm = [&](const CommandResult& result, const std::string& says) {
    try {
      helper_job_id(result, program, job, "node9");
      FAIL("no error for: " + result.output + result.error);
    } catch (const ar::slurm::SlurmError& e) {
      FAIL(std::string("taken for Slurm's refusal: ") + e.what());
    } catch (const std::runtime_error& e) {
      CHECK_THAT(e.what(), Contains("for job 42") && Contains(says));
    }
  };
  not_slurm({-1, "", "/usr/sbin/auto-resume-submit did not finish within 30 s"},
            "did not finish within 30 s");
  not_slurm({-1, "",
             "cannot run /usr/sbin/auto-resume-submit as uid 65534 gid 65534: exec: No "
             "such file or directory"},
            "No such file or directory");
  not_slurm({ar::slurm::kSubmitBadInput, "auto-resume-submit: expand request: no 'name'\n", ""},
            "exited with status 2: auto-resume-submit: expand request: no 'name'");
  not_slurm({0, "warning: something\n5012\n", ""}, "printed no job id");
  not_slurm({0, "0\n", ""}, "printed no job id: '0'");
  not_slurm({0, "99999999999\n", ""}, "printed no job id");
}

TEST_CASE("the submit program runs as the job's user with the request on stdin",
          "[expand_helper]") {
  if (geteuid() != 0) {
    WARN("not root: cannot run the program as another user");
    return;
  }
  ar::test::TempDir dir;
  chmod(dir.path.c_str(), 0755);
  const auto program = dir.path / "auto-resume-submit";
  // It prints its uid as the job id when the request and environment are
  // the controller's.
  std::ofstream(program) << R"SH(#!/bin/sh
read -r request
case "$request" in *'"dependency":"expand:42"'*'"req_nodes":"node9"'*) ;; *) echo "bad: $request"; exit 2 ;; esac
[ "$(env | grep -v '^PWD=' | sort | tr '\n' ' ')" = "PATH=/usr/sbin:/usr/bin:/sbin:/bin SLURM_CONF=/etc/x/slurm.conf " ] || { env; exit 2; }
id -u
)SH";
  chmod(program.c_str(), 0755);
  setenv("SLURM_CONF", "/etc/x/slurm.conf", 1);
  const auto id = ar::slurm::run_submit_program(program, job_of_user(), "node9", "n", 10s);
  unsetenv("SLURM_CONF");
  CHECK(id == 65534);
}

TEST_CASE("a missing submit program is named", "[expand_helper]") {
  ar::test::TempDir dir;
  CHECK_THROWS_WITH(
      ar::slurm::check_submit_program(dir.path / "auto-resume-submit"),
      Contains("the expand helper " + (dir.path / "auto-resume-submit").string() + " is missing"));
  CHECK_THROWS_WITH(ar::slurm::check_submit_program(dir.path),
                    Contains("is not an executable file"));
  CHECK(ar::slurm::default_submit_program().filename() == "auto-resume-submit");
}
