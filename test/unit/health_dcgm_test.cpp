#include "autoresume/health_dcgm.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <utility>
#include <vector>

#include "fixture.hpp"

using ar::health::DcgmPolicyListener;
using ar::health::Result;
using ar::health::Status;
using ar::health::ToolRun;

namespace {

// Every Result the listener gives for `text`, fed line by line.
std::vector<Result> listen(DcgmPolicyListener& listener, const std::string& text) {
  std::vector<Result> results;
  std::size_t start = 0;
  while (start < text.size()) {
    const auto end = std::min(text.find('\n', start), text.size());
    if (auto r = listener.feed(std::string_view(text).substr(start, end - start)))
      results.push_back(std::move(*r));
    start = end + 1;
  }
  return results;
}

ToolRun ran(const std::string& output, int status = 0) { return {status, output, ""}; }

}  // namespace

TEST_CASE("the DCGM policy listener reports each kind of violation", "[health]") {
  DcgmPolicyListener listener;
  CHECK_FALSE(listener.listening());
  const auto results = listen(listener, fixture("dcgmi", "policy-violations.txt"));
  CHECK(listener.listening());
  const std::vector<std::pair<Status, std::string>> expected{
      {Status::pass, "XID 13: Graphics Engine Exception (an application's error, not the node's)"},
      {Status::fail, "XID 79: GPU has fallen off the bus"},
      {Status::fail, "double-bit ECC errors: count 2"},
      {Status::fail, "PCIe replays: count 120"},
      {Status::fail, "retired pages over the limit: 3 SBE, 61 DBE"},
      {Status::fail, "temperature over the limit: 95 C"},
      {Status::fail, "power over the limit: 710 W"},
      {Status::fail, "NVLink error counter 450 over the limit: value 12"},
      {Status::fail, "an unknown policy violation"},
      {Status::fail, "XID 154"},
  };
  REQUIRE(results.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO("result " << i);
    CHECK(results[i].check == "dcgm");
    CHECK(results[i].status == expected[i].first);
    CHECK(results[i].detail == expected[i].second);
  }
}

TEST_CASE("a violation is reported when its block is complete, and names the GPU", "[health]") {
  DcgmPolicyListener listener("3");
  CHECK_FALSE(listener.feed("Listening for violations.\r\n"));
  CHECK_FALSE(listener.feed("Timestamp: Tue Mar  4 12:03:00 2025"));
  CHECK_FALSE(
      listener.feed("The maximum number of retired pages has violated policy manager "
                    "values."));
  CHECK_FALSE(listener.feed("SBE page retirement count: 0"));
  const auto pages = listener.feed("DBE page retirement count: 64\r");
  REQUIRE(pages);
  CHECK(pages->detail == "retired pages over the limit on GPU 3: 0 SBE, 64 DBE");
  const auto xid = listener.feed("XID error 79 detected.");
  REQUIRE(xid);
  CHECK(ar::health::node_reason(*xid, ar::health::Action::replace) ==
        "Action:Replace dcgm: XID 79 on GPU 3: GPU has fallen off the bus");
}

TEST_CASE("a quiet listener reports nothing, and dcgmi's errors fail it", "[health]") {
  DcgmPolicyListener quiet;
  CHECK(listen(quiet, fixture("dcgmi", "policy-listening.txt")).empty());
  CHECK(quiet.listening());

  DcgmPolicyListener dead;
  const auto results = listen(dead, fixture("dcgmi", "policy-error.txt"));
  REQUIRE(results.size() == 1);
  CHECK(results[0].status == Status::fail);
  CHECK(results[0].detail ==
        "dcgmi policy: Error: Unable to connect to host engine. Host engine connection "
        "invalid/disconnected.");
  CHECK_FALSE(dead.listening());

  // A block cut short by the next one is dropped; stray values are not
  // taken for a block's.
  DcgmPolicyListener cut;
  CHECK_FALSE(cut.feed("A double-bit ECC error has violated policy manager values."));
  CHECK_FALSE(cut.feed("Timestamp: Tue Mar  4 12:01:00 2025"));
  CHECK_FALSE(cut.feed("DBE error count: 2"));
  CHECK_FALSE(cut.feed("Temperature: 95"));
  CHECK_FALSE(cut.feed("XID error many detected."));
}

TEST_CASE("the XID catalog names the common XIDs and the applications' own", "[health]") {
  CHECK(ar::health::xid_meaning(48) == "double-bit ECC error");
  CHECK(ar::health::xid_meaning(95) == "uncontained ECC error");
  CHECK(ar::health::xid_meaning(1).empty());
  CHECK(ar::health::xid_from_application(31));
  CHECK(ar::health::xid_from_application(43));
  CHECK_FALSE(ar::health::xid_from_application(79));
  CHECK_FALSE(ar::health::xid_from_application(94));
}

TEST_CASE("DCGM's health watches: healthy passes, a warning or failure fails", "[health]") {
  auto r = ar::health::check_dcgm_health(ran(fixture("dcgmi", "health-healthy.json")), 2);
  CHECK(r.check == "dcgm");
  CHECK(r.status == Status::pass);
  CHECK(r.detail == "DCGM health watches: Healthy");

  r = ar::health::check_dcgm_health(ran(fixture("dcgmi", "health-warning.json")), 2);
  CHECK(r.status == Status::fail);
  CHECK(r.detail ==
        "GPU 0 PCIe system: Warning: Detected more than 8 PCIe replays per minute for GPU 0 : 13");

  r = ar::health::check_dcgm_health(ran(fixture("dcgmi", "health-failure.json")), 2);
  CHECK(r.status == Status::fail);
  CHECK(r.detail ==
        "GPU 1 Memory system: Failure: Detected 2 volatile double-bit ECC error(s) in GPU 1.");
}

TEST_CASE("DCGM's health watches: a tool that cannot answer fails, no GPU is n/a", "[health]") {
  auto r = ar::health::check_dcgm_health(ran(fixture("dcgmi", "health-watches-off.txt"), 1), 2);
  CHECK(r.status == Status::fail);
  CHECK(r.detail ==
        "dcgmi health -c -j: Error: Health watches not enabled. Please enable watches.");
  r = ar::health::check_dcgm_health({-1, "", "cannot run dcgmi: No such file or directory"}, 2);
  CHECK(r.status == Status::fail);
  CHECK(r.detail == "cannot run dcgmi: No such file or directory");
  r = ar::health::check_dcgm_health(ran("segfault\n", 139), 2);
  CHECK(r.detail == "dcgmi health -c -j exited 139: segfault");
  r = ar::health::check_dcgm_health(ran("Health Monitor Report\n"), 2);
  CHECK(r.detail == "dcgmi health -c -j printed no JSON: Health Monitor Report");
  r = ar::health::check_dcgm_health(ran(R"({"body": {}})"), 2);
  CHECK(r.detail == "dcgmi health -c -j printed no Overall Health");
  r = ar::health::check_dcgm_health(ran(R"({"body": {"Overall Health": {"value": "Failure"}}})"),
                                    2);
  CHECK(r.detail == "DCGM's overall health is Failure");

  r = ar::health::check_dcgm_health({-1, "", "cannot run dcgmi: No such file or directory"}, 0);
  CHECK(r.status == Status::not_applicable);
  CHECK(r.detail == "no GPUs configured for this node");
}

TEST_CASE("DCGM's diagnostic passes on Pass and Skip", "[health]") {
  const auto r = ar::health::check_dcgm_diag(ran(fixture("dcgmi", "diag-pass.json")), 2);
  CHECK(r.check == "dcgm-diag");
  CHECK(r.status == Status::pass);
  CHECK(r.detail == "3 tests passed, 1 skipped (DCGM 4.2.3, driver 550.90.07)");
}

TEST_CASE("DCGM's diagnostic fails naming the test, the GPU and its warning", "[health]") {
  // dcgmi diag exits non-zero when a test fails; its JSON says which.
  auto r = ar::health::check_dcgm_diag(ran(fixture("dcgmi", "diag-fail.json"), 226), 2);
  CHECK(r.status == Status::fail);
  CHECK(r.detail ==
        "memory on GPU 1: CUDA APIs have indicated that a double-bit ECC error has occured on "
        "GPU 1.");

  r = ar::health::check_dcgm_diag(ran(fixture("dcgmi", "diag-v3-fail.json"), 226), 2);
  CHECK(r.status == Status::fail);
  CHECK(r.detail ==
        "Page Retirement/Row Remap on GPU 0: A pending retired page has been detected in GPU 0.; "
        "PCIe on GPU 1: Detected more than 8 PCIe replays per minute for GPU 1 : 13");

  r = ar::health::check_dcgm_diag(ran(fixture("dcgmi", "diag-runtime-error.json"), 1), 2);
  CHECK(r.status == Status::fail);
  CHECK(r.detail ==
        "dcgmi diag: Error: Diagnostic can only be performed on a homogeneous group of GPUs.");

  r = ar::health::check_dcgm_diag(ran(fixture("dcgmi", "diag-pass.json")), 4);
  CHECK(r.status == Status::fail);
  CHECK(r.detail == "2 GPUs diagnosed, 4 configured");

  // A failure the summary alone reports (no GPU's result names it).
  r = ar::health::check_dcgm_diag(ran(R"({"DCGM Diagnostic": {"test_categories": [{
        "category": "Hardware", "tests": [{"name": "memory",
          "results": [{"entity_group": "GPU", "entity_id": 0, "status": "Pass"}],
          "test_summary": {"status": "Fail", "warnings": [{"warning": "Test timed out."}]}}]}]}})"),
                                  1);
  CHECK(r.detail == "memory: Test timed out.");
}

TEST_CASE("DCGM's diagnostic: no result, no tool, no GPU", "[health]") {
  auto r = ar::health::check_dcgm_diag(ran("{}"), 1);
  CHECK(r.status == Status::fail);
  CHECK(r.detail == "dcgmi diag printed no \"DCGM Diagnostic\" result");
  r = ar::health::check_dcgm_diag(ran(R"({"DCGM Diagnostic": {"test_categories": []}})"), 1);
  CHECK(r.detail == "dcgmi diag ran no tests");
  r = ar::health::check_dcgm_diag({-1, "", "dcgmi did not finish within 900 s"}, 1);
  CHECK(r.detail == "dcgmi did not finish within 900 s");
  r = ar::health::check_dcgm_diag(
      ran("Error: unable to establish a connection to the specified host: localhost\n", 255), 1);
  CHECK(r.detail ==
        "dcgmi diag: Error: unable to establish a connection to the specified host: localhost");
  r = ar::health::check_dcgm_diag(ran(fixture("dcgmi", "diag-fail.json")), 0);
  CHECK(r.status == Status::not_applicable);
}
