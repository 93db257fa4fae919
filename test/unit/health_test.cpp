#include "autoresume/health.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "autoresume/resume.hpp"
#include "fakes.hpp"  // TempDir
#include "fixture.hpp"

using ar::health::Status;
using Catch::Matchers::Contains;

TEST_CASE("healthy GPUs pass, naming model and driver", "[health]") {
  const auto r = ar::health::check_nvidia_smi(fixture("nvidia-smi", "healthy-2.xml"), 2);
  CHECK(r.status == Status::pass);
  CHECK(r.check == "gpu");
  CHECK(r.detail == "2 GPUs healthy (NVIDIA H100 80GB HBM3, driver 535.183.01)");
}

TEST_CASE("each GPU failure fails with its reason", "[health]") {
  auto fails = [](const char* file, unsigned expected, const char* reason) {
    const auto r = ar::health::check_nvidia_smi(fixture("nvidia-smi", file), expected);
    CHECK(r.status == Status::fail);
    CHECK(r.detail == reason);
  };
  fails("lost-gpu.xml", 2, "GPU 00000000:2A:00.0 is not readable (fallen off the bus?)");
  fails("pending-retirement.xml", 1,
        "GPU 00000000:18:00.0 has a page retirement pending (reset it)");
  fails("remap-failure.xml", 2,
        "GPU 00000000:18:00.0 failed to remap a row; GPU 00000000:2A:00.0 has a row remapping "
        "pending (reset it)");
  fails("ecc.xml", 1, "GPU 00000000:18:00.0 has 2 uncorrectable ECC errors");
  fails("healthy-2.xml", 8, "2 GPUs visible, 8 configured");
}

TEST_CASE("no GPUs configured: not applicable, and garbage output: a failure", "[health]") {
  CHECK(ar::health::check_nvidia_smi("", 0).status == Status::not_applicable);
  CHECK(ar::health::check_nvidia_smi(fixture("nvidia-smi", "healthy-2.xml"), 0).status ==
        Status::not_applicable);
  const auto garbage = ar::health::check_nvidia_smi("NVIDIA-SMI has failed", 1);
  CHECK(garbage.status == Status::fail);
  CHECK_THAT(garbage.detail, Contains("not XML"));
  const auto other = ar::health::check_nvidia_smi("<other/>", 1);
  CHECK(other.detail == "nvidia-smi printed no <nvidia_smi_log>");
}

TEST_CASE("a failed check's node reason is what the controller acts on", "[health]") {
  const ar::health::Result r{"gpu", Status::fail, "GPU 0 has 2 uncorrectable ECC errors"};
  CHECK(ar::health::node_reason(r, ar::health::Action::replace) ==
        "Action:Replace gpu: GPU 0 has 2 uncorrectable ECC errors");
  CHECK(ar::health::node_reason(r, ar::health::Action::drain) ==
        "Action:Drain gpu: GPU 0 has 2 uncorrectable ECC errors");
  const ar::health::Result longer{"gpu", Status::fail, std::string(500, 'x')};
  const auto cut = ar::health::node_reason(longer, ar::health::Action::replace);
  CHECK(cut.size() == ar::health::kMaxReason);
  CHECK(cut.ends_with("..."));
}

TEST_CASE("the resume controller takes a replace mark as a fault, a drain mark not", "[health]") {
  const ar::health::Result r{"gpu", Status::fail, "GPU 0 is not readable"};
  ar::NodeHealth node;
  node.fail = true;
  node.reason = ar::health::node_reason(r, ar::health::Action::replace);
  CHECK(ar::look_at(node).fault.has_value());
  node.fail = false;  // a drain-only check sets DRAIN, not FAIL
  node.reason = ar::health::node_reason(r, ar::health::Action::drain);
  CHECK_FALSE(ar::look_at(node).fault.has_value());
}

TEST_CASE("the configured GPU count comes from the node's GRES", "[health]") {
  CHECK(ar::health::gpu_count_from_gres("") == 0);
  CHECK(ar::health::gpu_count_from_gres("(null)") == 0);
  CHECK(ar::health::gpu_count_from_gres("gpu:8") == 8);
  CHECK(ar::health::gpu_count_from_gres("gpu:h100:4(S:0-1),gpu:a100:2") == 6);
  CHECK(ar::health::gpu_count_from_gres("gpu:h100:4(S:0,1),foo:2") == 4);
  CHECK(ar::health::gpu_count_from_gres("foo:2,gpumem:10G") == 0);
  CHECK(ar::health::gpu_count_from_gres("gpu") == 1);
  CHECK_THROWS_WITH(ar::health::gpu_count_from_gres("gpu:h100:many"),
                    "cannot read the GPU count of GRES entry 'gpu:h100:many'");
}

TEST_CASE("the CPU stress check reads stress-ng's cpu throughput", "[health]") {
  const auto healthy = fixture("stress-ng", "healthy.txt");
  CHECK(ar::health::cpu_ops_per_second(healthy) == Approx(2753.37));
  CHECK_FALSE(ar::health::cpu_ops_per_second("stress-ng: info: nothing"));

  auto r = ar::health::check_cpu_stress(healthy, 0, std::nullopt, 0.5);
  CHECK(r.status == Status::pass);
  CHECK(r.check == "cpu");
  CHECK(r.detail == "cpu 2753 bogo ops/s (no baseline recorded)");
  r = ar::health::check_cpu_stress(healthy, 0, 3000.0, 0.5);
  CHECK(r.status == Status::pass);
  CHECK(r.detail == "cpu 2753 bogo ops/s (baseline 3000)");
}

// Found by fuzz/stress_ng.cpp: a rate of "nan" compared false against the
// baseline and passed the check.
TEST_CASE("a cpu throughput that is not a finite number of ops is no metric", "[health]") {
  for (const auto* rate : {"nan", "-nan", "inf", "-2753.37"}) {
    const auto output = std::string("stress-ng: metrc: [14990] cpu  2756  1.00  1.34  0.17  ") +
                        rate + "  1826.68\n";
    CAPTURE(rate);
    CHECK_FALSE(ar::health::cpu_ops_per_second(output));
    const auto r = ar::health::check_cpu_stress(output, 0, 3000.0, 0.5);
    CHECK(r.status == Status::fail);
    CHECK(r.detail == "no cpu metrics in stress-ng's output");
  }
}

TEST_CASE("the CPU stress check fails on errors and on a slow CPU", "[health]") {
  auto r = ar::health::check_cpu_stress(fixture("stress-ng", "verify-failure.txt"), 2, std::nullopt,
                                        0.5);
  CHECK(r.status == Status::fail);
  CHECK(r.detail ==
        "stress-ng reported: stress-ng: fail:  [2207] cpu: matrixprod: verification failed: "
        "computation 1 result differs");
  r = ar::health::check_cpu_stress(fixture("stress-ng", "healthy.txt"), 0, 6000.0, 0.5);
  CHECK(r.status == Status::fail);
  CHECK(r.detail == "cpu throughput 2753 bogo ops/s is below 50% of this node's baseline 6000");
  r = ar::health::check_cpu_stress("stress-ng: unrecognized option", 1, std::nullopt, 0.5);
  CHECK(r.detail == "stress-ng exited 1");
  r = ar::health::check_cpu_stress("stress-ng: info: [1] done\n", 0, std::nullopt, 0.5);
  CHECK(r.detail == "no cpu metrics in stress-ng's output");
}

TEST_CASE("disk: paths that take a write pass, and a missing, full or unwritable one fails, named",
          "[health]") {
  ar::test::TempDir a;
  ar::test::TempDir b;
  auto r = ar::health::check_disk({a.path, b.path}, 0, std::chrono::seconds{30});
  CHECK(r.check == "disk");
  CHECK(r.status == Status::pass);
  CHECK(r.detail == a.path.string() + ", " + b.path.string() + " take a write");
  CHECK(std::filesystem::is_empty(a.path));  // the test file is removed
  r = ar::health::check_disk({a.path, a.path / "gone"}, 0, std::chrono::seconds{30});
  CHECK(r.status == Status::fail);
  CHECK(r.detail == (a.path / "gone").string() + ": cannot look at it: No such file or directory");
  // More free space asked for than any disk has.
  r = ar::health::check_disk({a.path}, 1ULL << 62, std::chrono::seconds{30});
  CHECK(r.status == Status::fail);
  CHECK(r.detail.find(" MiB free, under disk_min_free_mb=") != std::string::npos);
  // A path the test file cannot be created in (a file, not a folder).
  std::ofstream(a.path / "plain") << "x";
  r = ar::health::check_disk({a.path / "plain"}, 0, std::chrono::seconds{30});
  CHECK(r.status == Status::fail);
  CHECK(r.detail == (a.path / "plain").string() + ": cannot create a test file: Not a directory");
  // /proc takes no file: named as such, not taken for a hang.
  r = ar::health::check_disk({"/proc"}, 0, std::chrono::seconds{30});
  CHECK(r.status == Status::fail);
  CHECK(r.detail.starts_with("/proc: "));
  CHECK(ar::health::not_applicable("disk", 0) == std::nullopt);
}
