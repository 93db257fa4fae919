#include "autoresume/health_config.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "autoresume/keyvalue.hpp"

using ar::health::HealthConfig;
using ar::health::parse_health_config;
using namespace std::chrono_literals;

TEST_CASE("an empty health check configuration is the defaults", "[health]") {
  const auto c = parse_health_config("# nothing\n\n", "hc.conf");
  CHECK(c.checks == std::vector<std::string>{"gpu"});
  CHECK(c.drain_only.empty());
  CHECK_FALSE(c.gpus);
  CHECK(c.neuron_devices == 0);
  CHECK(c.efa_devices == 0);
  CHECK(c.nvidia_smi == "nvidia-smi");
  CHECK(c.dcgmi == "dcgmi");
  CHECK(c.fi_info == "fi_info");
  CHECK(c.fi_pingpong == "fi_pingpong");
  CHECK(c.stress_ng == "stress-ng");
  CHECK(c.neuron_sysfs == "/sys/devices/virtual/neuron_device");
  CHECK(c.timeout == 30s);
  CHECK(c.stress_seconds == 60);
  CHECK(c.baseline_file == "/var/lib/auto-resume/cpu-baseline");
  CHECK(c.min_fraction == Approx(0.5));
  CHECK(c.diag_level == 2);
  CHECK(c.diag_timeout == 900s);
}

TEST_CASE("a health check configuration sets every key", "[health]") {
  const auto c = parse_health_config(R"(# a Trainium node with EFA
Checks = neuron, efa ,CPU,dcgm-diag   # lists are comma-separated
drain_only=efa,cpu
gpus=0
neuron_devices=16
efa_devices=8
nvidia_smi=/usr/bin/nvidia-smi
dcgmi=/usr/bin/dcgmi
fi_info=/opt/amazon/efa/bin/fi_info
fi_pingpong=/opt/amazon/efa/bin/fi_pingpong
stress_ng=/usr/local/bin/stress-ng
neuron_sysfs=/tmp/neuron
timeout=12.5
stress_seconds=5
baseline_file=/var/tmp/baseline
min_fraction=0.75
diag_level=3
diag_timeout=3600
disk_paths=/tmp, /var/tmp
disk_min_free_mb=0
)",
                                     "hc.conf");
  CHECK(c.checks == std::vector<std::string>{"neuron", "efa", "cpu", "dcgm-diag"});
  CHECK(c.drain_only == std::vector<std::string>{"efa", "cpu"});
  CHECK(c.gpus == 0U);
  CHECK(c.neuron_devices == 16);
  CHECK(c.efa_devices == 8);
  CHECK(c.nvidia_smi == "/usr/bin/nvidia-smi");
  CHECK(c.dcgmi == "/usr/bin/dcgmi");
  CHECK(c.fi_info == "/opt/amazon/efa/bin/fi_info");
  CHECK(c.fi_pingpong == "/opt/amazon/efa/bin/fi_pingpong");
  CHECK(c.stress_ng == "/usr/local/bin/stress-ng");
  CHECK(c.neuron_sysfs == "/tmp/neuron");
  CHECK(c.timeout == 12500ms);
  CHECK(c.stress_seconds == 5);
  CHECK(c.baseline_file == "/var/tmp/baseline");
  CHECK(c.min_fraction == Approx(0.75));
  CHECK(c.diag_level == 3);
  CHECK(c.diag_timeout == 3600s);
  CHECK(c.disk_paths == std::vector<std::filesystem::path>{"/tmp", "/var/tmp"});
  CHECK(c.disk_min_free_mb == 0);
  CHECK(ar::health::action_for(c, "efa") == ar::health::Action::drain);
  CHECK(ar::health::action_for(c, "neuron") == ar::health::Action::replace);
}

TEST_CASE("a bad health check configuration names file, line, key and value", "[health]") {
  auto fails = [](const std::string& text, const std::string& message) {
    INFO(text);
    CHECK_THROWS_MATCHES(parse_health_config(text, "hc.conf"), ar::ConfigError,
                         Catch::Matchers::Message(message));
  };
  fails("# first\nbogus=1\n",
        "hc.conf:2: unknown key 'bogus' (known: checks, drain_only, gpus, neuron_devices, "
        "efa_devices, nvidia_smi, dcgmi, fi_info, fi_pingpong, stress_ng, neuron_sysfs, timeout, "
        "stress_seconds, baseline_file, min_fraction, diag_level, diag_timeout, disk_paths, "
        "disk_min_free_mb)");
  fails("checks=gpu,banana",
        "hc.conf:1: invalid value 'gpu,banana' for checks: unknown check 'banana' (known: gpu, "
        "dcgm, neuron, efa, disk, cpu, dcgm-diag)");
  fails("checks=gpu,gpu",
        "hc.conf:1: invalid value 'gpu,gpu' for checks: check 'gpu' is named "
        "twice");
  fails("checks=", "hc.conf:1: invalid value '' for checks: expected at least one check");
  fails("checks=gpu,", "hc.conf:1: invalid value 'gpu,' for checks: an empty entry in the list");
  fails("drain_only=gpu;cpu",
        "hc.conf:1: invalid value 'gpu;cpu' for drain_only: unknown check 'gpu;cpu' (known: gpu, "
        "dcgm, neuron, efa, disk, cpu, dcgm-diag)");
  fails("gpus=-1", "hc.conf:1: invalid value '-1' for gpus: expected an integer from 0 to 1024");
  fails("neuron_devices=many",
        "hc.conf:1: invalid value 'many' for neuron_devices: expected an integer from 0 to 1024");
  fails("efa_devices=2x",
        "hc.conf:1: invalid value '2x' for efa_devices: expected an integer from 0 to 1024");
  fails("dcgmi=bin/dcgmi",
        "hc.conf:1: invalid value 'bin/dcgmi' for dcgmi: expected a program name (looked up in "
        "PATH) or an absolute path");
  fails("fi_info=fi info",
        "hc.conf:1: invalid value 'fi info' for fi_info: expected a program "
        "name (looked up in PATH) or an absolute path");
  fails("neuron_sysfs=sys/neuron",
        "hc.conf:1: invalid value 'sys/neuron' for neuron_sysfs: expected an absolute path");
  fails("timeout=0", "hc.conf:1: invalid value '0' for timeout: expected seconds from 0.1 to 600");
  fails("stress_seconds=0",
        "hc.conf:1: invalid value '0' for stress_seconds: expected an integer from 1 to 3600");
  fails("min_fraction=2",
        "hc.conf:1: invalid value '2' for min_fraction: expected a fraction from 0.01 to 1");
  fails("diag_level=5",
        "hc.conf:1: invalid value '5' for diag_level: expected an integer from 1 to 4");
  fails("disk_paths=/tmp,scratch",
        "hc.conf:1: invalid value 'scratch' for disk_paths: expected an absolute path");
  fails("disk_paths=/tmp,,/var",
        "hc.conf:1: invalid value '/tmp,,/var' for disk_paths: an empty entry in the list");
  fails("disk_min_free_mb=lots",
        "hc.conf:1: invalid value 'lots' for disk_min_free_mb: expected an integer from 0 to "
        "1099511627776");
  fails("timeout=5\nTIMEOUT=6", "hc.conf:2: key 'timeout' is set twice");
  fails("gpu", "hc.conf:1: expected key=value, got 'gpu'");
}

TEST_CASE("settings given later override the file's (as the command line does)", "[health]") {
  auto c = parse_health_config("checks=gpu,dcgm\ntimeout=10\n", "hc.conf");
  ar::health::apply_health_setting(c, "checks", "cpu");
  ar::health::apply_health_setting(c, "drain_only", "cpu");
  CHECK(c.checks == std::vector<std::string>{"cpu"});
  CHECK(c.timeout == 10s);
  CHECK(ar::health::action_for(c, "cpu") == ar::health::Action::drain);
  CHECK_THROWS_WITH(ar::health::apply_health_setting(c, "gpus", "lots"),
                    "invalid value 'lots' for gpus: expected an integer from 0 to 1024");
}

TEST_CASE("a missing configuration file is an error naming it", "[health]") {
  CHECK_THROWS_WITH(ar::health::load_health_config("/nonexistent/healthcheck.conf"),
                    "cannot read configuration file '/nonexistent/healthcheck.conf'");
}

TEST_CASE("the active checks are cpu and dcgm-diag", "[health]") {
  for (const auto check : ar::health::kChecks)
    CHECK(ar::health::is_active_check(check) == (check == "cpu" || check == "dcgm-diag"));
}

TEST_CASE("a run marks for its first replace failure, else its first drain failure", "[health]") {
  using ar::health::Result;
  using ar::health::Status;
  const auto c = parse_health_config("drain_only=efa,neuron\n", "hc.conf");
  const std::vector<Result> drains_first{{"gpu", Status::pass, "ok"},
                                         {"efa", Status::fail, "pingpong"},
                                         {"neuron", Status::fail, "ecc"},
                                         {"dcgm", Status::fail, "XID 79"},
                                         {"cpu", Status::fail, "slow"}};
  const auto* mark = ar::health::result_to_mark(drains_first, c);
  REQUIRE(mark != nullptr);
  CHECK(mark->check == "dcgm");
  const std::vector<Result> drains_only{{"efa", Status::not_applicable, "none"},
                                        {"neuron", Status::fail, "ecc"},
                                        {"efa", Status::fail, "pingpong"}};
  mark = ar::health::result_to_mark(drains_only, c);
  REQUIRE(mark != nullptr);
  CHECK(mark->detail == "ecc");
  CHECK(ar::health::result_to_mark({{"gpu", Status::pass, ""}}, c) == nullptr);
  CHECK(ar::health::result_to_mark({}, c) == nullptr);
}
