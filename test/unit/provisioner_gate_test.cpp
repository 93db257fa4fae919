// The provisioner and the guard rails (docs/guard.md): while the controller
// holds back, nothing changes in Slurm nor at the provider.
#include <catch2/catch.hpp>
#include <fstream>

#include "fakes.hpp"
#include "gate.hpp"
#include "provision/provisioner.hpp"

namespace {

using ar::test::Fakes;

Fakes& setup(Fakes& f) {
  f.config.provision.mode = ar::Provisioning::continuous;
  f.config.provision.command = "/usr/local/sbin/provision";
  f.config.provision.groups_dir = f.dir.path / "groups";
  f.config.provision.lifecycle_log_dir = f.dir.path / "logs";
  std::filesystem::create_directories(f.config.provision.groups_dir);
  std::ofstream(f.config.provision.groups_dir / "a.conf") << "count=1\nmax_count=2\npartitions=p\n";
  for (const auto* name : {"a-1", "a-2"}) {
    ar::slurm::NodeInfo node;
    node.name = name;
    node.cloud = true;
    node.powered_down = true;
    f.slurm.nodes[name] = node;
  }
  return f;
}

ar::Provisioner::NodeMap look(ar::test::FakeSlurm& slurm) {
  ar::Provisioner::NodeMap nodes;
  for (const auto& node : slurm.load_nodes()) nodes[node.name] = &node;
  return nodes;
}

}  // namespace

TEST_CASE("held back (mode=observe), the provisioner says what it would do and does nothing",
          "[provisioner]") {
  Fakes f;
  setup(f);
  f.config.mode = ar::ActionMode::observe;
  ar::Store store(f.dir.path / "state", f.clock);
  ar::Gate gate(store, f.config, f.clock);
  ar::Provisioner provisioner(store, f.config, f.slurm, f.clock, f.runner, &gate);
  for (int i = 0; i < 3; ++i) provisioner.tick(look(f.slurm));
  CHECK(f.slurm.updates.empty());
  CHECK(f.runner.calls().empty());
  CHECK_FALSE(store.provision_state());  // nothing recorded either
  std::vector<std::string> would;
  for (const auto& e : store.events(std::nullopt, 0))
    if (e.kind == "would") would.push_back(e.node + ": " + e.detail);
  CHECK(would == std::vector<std::string>{
                     "a-1: observe: would create a-1 (group a)"});  // once, not per tick

  SECTION("and acts once it may") {
    ar::Provisioner acting(store, f.config, f.slurm, f.clock, f.runner, nullptr);
    acting.tick(look(f.slurm));           // the create recorded
    acting.tick(look(f.slurm));           // and started
    CHECK(f.slurm.updated("drain a-2"));  // every slot, before anything else
    CHECK(f.slurm.updated("power_up a-1"));
    CHECK_FALSE(store.provision_state()->at("groups").empty());
  }
}
