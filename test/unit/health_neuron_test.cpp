#include "autoresume/health_neuron.hpp"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "fixture.hpp"

namespace fs = std::filesystem;
using ar::health::Status;

namespace {

// A temporary Neuron sysfs tree built from a fixture's "path:content"
// lines; removed at the end of the test.
class Tree {
 public:
  explicit Tree(const std::string& name) {
    std::string pattern = (fs::temp_directory_path() / "ar-neuron.XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    root_ = pattern;
    if (name.empty()) return;
    std::istringstream lines(fixture("neuron", name));
    for (std::string line; std::getline(lines, line);) {
      const auto colon = line.find(':');
      REQUIRE(colon != std::string::npos);
      const auto path = root_ / line.substr(0, colon);
      fs::create_directories(path.parent_path());
      std::ofstream(path) << line.substr(colon + 1) << "\n";
    }
  }
  ~Tree() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  Tree(const Tree&) = delete;
  Tree& operator=(const Tree&) = delete;
  const fs::path& root() const { return root_; }

 private:
  fs::path root_;
};

std::string check(const std::string& name, unsigned expected = 2) {
  const Tree tree(name);
  const auto r = ar::health::check_neuron_sysfs(tree.root(), expected);
  CHECK(r.check == "neuron");
  CHECK(r.status == Status::fail);
  // The tree's temporary root, as "ROOT", so that the text can be compared.
  auto detail = r.detail;
  for (auto at = detail.find(tree.root().string()); at != std::string::npos;
       at = detail.find(tree.root().string()))
    detail.replace(at, tree.root().string().size(), "ROOT");
  return detail;
}

}  // namespace

TEST_CASE("healthy Neuron devices pass, counting devices and NeuronCores", "[health]") {
  const Tree tree("healthy.txt");
  auto r = ar::health::check_neuron_sysfs(tree.root(), 2);
  CHECK(r.status == Status::pass);
  CHECK(r.detail == "2 Neuron devices healthy (4 NeuronCores)");
  // An older driver without the hardware counters: what is there is read.
  const Tree older("older-driver.txt");
  r = ar::health::check_neuron_sysfs(older.root(), 1);
  CHECK(r.status == Status::pass);
  CHECK(r.detail == "1 Neuron devices healthy (2 NeuronCores)");
}

TEST_CASE("each Neuron hardware error fails, naming device, core, counter and count", "[health]") {
  CHECK(check("sram-ecc.txt") == "neuron1 sram_ecc_uncorrected=1");
  CHECK(check("hbm-ecc.txt") ==
        "neuron0 mem_ecc_uncorrected=2; neuron0 mem_ecc_repairable_uncorrected=1");
  CHECK(check("hw-error.txt") ==
        "neuron0/neuron_core1 hw_nc_ue_error=1; neuron1/neuron_core0 hw_error=4");
  CHECK(check("reset-fail.txt") == "neuron0/neuron_core1 reset_fail_count=1");
  CHECK(check("unreadable.txt") ==
        "no count in ROOT/neuron0/stats/hardware/sram_ecc_uncorrected: 'N/A'");
}

TEST_CASE("missing Neuron devices or driver fail, and none configured is n/a", "[health]") {
  CHECK(check("healthy.txt", 3) == "2 Neuron devices in ROOT, 3 configured");
  CHECK(check("", 1) == "0 Neuron devices in ROOT, 1 configured");

  auto r = ar::health::check_neuron_sysfs("/nonexistent/neuron_device", 16);
  CHECK(r.status == Status::fail);
  CHECK(r.detail == "no Neuron driver tree at /nonexistent/neuron_device (driver not loaded?)");

  r = ar::health::check_neuron_sysfs("/nonexistent/neuron_device", 0);
  CHECK(r.status == Status::not_applicable);
  CHECK(r.detail == "no Neuron devices configured for this node");
}

TEST_CASE("only neuron<N> directories count as Neuron devices", "[health]") {
  const Tree tree("healthy.txt");
  fs::create_directories(tree.root() / "neuronX");
  fs::create_directories(tree.root() / "neuron_core0");
  fs::create_directories(tree.root() / "neuron-1");
  const auto r = ar::health::check_neuron_sysfs(tree.root(), 3);
  CHECK(r.status == Status::fail);
  CHECK(r.detail.starts_with("2 Neuron devices in "));
}

// Found by fuzz/neuron.cpp: a counter that could be opened but not read
// (here a "total" that is a directory; on a node, a device whose driver
// answers EIO) threw out of the check instead of failing it.
TEST_CASE("a Neuron counter that cannot be read fails the check naming it", "[health]") {
  const Tree tree("healthy.txt");
  const auto total = tree.root() / "neuron1/neuron_core0/stats/status/hw_error/total";
  fs::remove(total);
  fs::create_directories(total);
  const auto r = ar::health::check_neuron_sysfs(tree.root(), 2);
  CHECK(r.status == Status::fail);
  CHECK(r.detail == "cannot read " + total.string() + ": Is a directory");
}
