// The controller's provisioner (continuous provisioning) through the fakes:
// a store in a temporary folder, a manual clock, FakeSlurm's CLOUD slots
// (hidden while powered down, as Slurm hides them) and a FakeRunner as the
// provider. Each test asserts on Slurm's updates, the provider's calls, the
// store and the provisioner's state.

#include "provision/provisioner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fakes.hpp"
#include "store/store.hpp"

namespace {

using namespace std::chrono_literals;
using ar::provision::SlotPhase;

const std::string kPrefix = "auto-resume provisioning: ";
const ar::CommandResult kCreated{0, "instance_id=i-1\nnode_addr=10.0.0.9\n", ""};

struct Rig {
  ar::test::TempDir dir;
  ar::test::ManualClock clock;
  ar::test::FakeSlurm slurm;
  ar::test::FakeRunner runner;
  ar::DaemonConfig config;
  std::unique_ptr<ar::Store> store;
  std::unique_ptr<ar::Provisioner> provisioner;  // destroyed first

  Rig() {
    auto& p = config.provision;
    p.mode = ar::Provisioning::continuous;
    p.command = dir.path / "provider";
    p.groups_dir = dir.path / "groups";
    p.lifecycle_log_dir = dir.path / "lifecycle";
    p.orphan_timeout = std::chrono::milliseconds{0};  // no `list` calls but in the orphans' tests
    config.state_dir = dir.path / "state";
    std::filesystem::create_directories(p.groups_dir);
    std::filesystem::create_directories(config.state_dir);
    store = std::make_unique<ar::Store>(config.state_dir, clock);
    runner.set_result(kCreated);
  }

  void write_group(const std::string& name, const std::string& text) const {
    std::ofstream(config.provision.groups_dir / (name + ".conf")) << text;
  }
  // CLOUD slots PREFIX1..PREFIXcount, powered down (hidden).
  void add_slots(const std::string& prefix, unsigned count) {
    for (unsigned i = 1; i <= count; ++i) {
      ar::slurm::NodeInfo node;
      node.name = prefix + std::to_string(i);
      node.cloud = true;
      node.powered_down = true;
      slurm.nodes[node.name] = node;
    }
  }
  void start() {
    provisioner = std::make_unique<ar::Provisioner>(*store, config, slurm, clock, runner);
  }
  void tick(ar::Provisioner& p) {
    ar::Provisioner::NodeMap nodes;
    const auto listed = [&] {
      const ar::test::RigCall rig_call;  // the engine's read, in the controller
      return slurm.load_nodes();
    }();
    for (const auto& node : listed) nodes[node.name] = &node;
    p.tick(nodes);
  }
  void tick() { tick(*provisioner); }
  // Ticks until `done` holds (a provider call runs on a thread of its own),
  // for at most 30 s (a loaded machine; done() holds within milliseconds).
  template <class Done>
  bool tick_until(Done done, ar::Provisioner* p = nullptr) {
    auto& on = p == nullptr ? *provisioner : *p;
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (true) {
      tick(on);
      if (done()) return true;
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(1ms);
    }
  }
  // Advances the clock a second at a time, each time once no provider call
  // is under way and a tick has taken what they returned, until `done`
  // holds: at most `seconds` steps. (Advanced while a call is under way,
  // the clock would move on before the provisioner takes its result.)
  template <class Done>
  bool step_until(Done done, int seconds) {
    for (int i = 0; i < seconds; ++i) {
      if (!tick_until([&] { return provisioner->provider_calls_running() == 0; })) return false;
      tick();
      if (done()) return true;
      clock.advance(1s);
    }
    return false;
  }
  ar::provision::Slot slot(unsigned index, const std::string& group = "a",
                           ar::Provisioner* p = nullptr) const {
    const auto state = (p == nullptr ? *provisioner : *p).state();
    for (const auto& g : state.groups)
      if (g.spec.name == group) return g.slots.at(index - 1);
    FAIL("no group " << group);
    return {};
  }
  bool phase_is(unsigned index, SlotPhase phase, ar::Provisioner* p = nullptr) const {
    return slot(index, "a", p).phase == phase;
  }
  std::vector<ar::Event> events(const std::string& kind) {
    auto all = store->events(std::nullopt, 0);
    std::erase_if(all, [&](const ar::Event& e) { return e.kind != kind; });
    return all;
  }
  std::vector<std::string> updates_from(std::size_t first) const {
    return {slurm.updates.begin() + static_cast<std::ptrdiff_t>(first), slurm.updates.end()};
  }
  // The provider's calls, each without its "env NAME=value..." head.
  std::vector<std::string> provider_calls() const {
    std::vector<std::string> out;
    for (const auto& call : runner.calls()) {
      auto it = std::ranges::find(call, config.provision.command.string());
      std::string line;
      for (; it != call.end(); ++it) line += (line.empty() ? "" : " ") + *it;
      out.push_back(line.substr(line.find(' ') + 1));
    }
    return out;
  }
  // The node's slurmd registers (the instance booted).
  void registers(const std::string& node) {
    auto& n = slurm.nodes.at(node);
    n.powering_up = false;
    n.not_responding = false;
    n.slurmd_start_time = 1000;
  }
};

const std::string kComputeGroup = "type=compute\ncount=1\nmax_count=2\npartitions=main\n";

// Group "a" (count 1, slots a-1 and a-2) with a-1 created, registered and
// released.
void bring_up(Rig& rig) {
  rig.write_group("a", kComputeGroup);
  rig.add_slots("a-", 2);
  rig.start();
  REQUIRE(rig.tick_until([&] { return rig.phase_is(1, SlotPhase::joining); }));
  rig.registers("a-1");
  REQUIRE(rig.tick_until([&] { return rig.phase_is(1, SlotPhase::in_service); }));
}

}  // namespace

TEST_CASE("provisioner creates a compute group's node through power saving", "[provisioner]") {
  Rig rig;
  rig.write_group("a", kComputeGroup);
  rig.add_slots("a-", 2);
  rig.start();

  rig.tick();  // the group is read: every slot drained, the create recorded
  CHECK(rig.slurm.updates == std::vector<std::string>{"drain a-1 " + kPrefix + "empty slot",
                                                      "drain a-2 " + kPrefix + "empty slot"});
  CHECK(rig.phase_is(1, SlotPhase::creating));
  CHECK(rig.phase_is(2, SlotPhase::empty));
  REQUIRE(rig.store->instance_records().size() == 1);
  CHECK(rig.store->instance_records()[0].token == "a:a-1:1");
  REQUIRE(rig.store->provision_state().has_value());

  rig.tick();  // drained and powered up; no provider call before POWERING_UP
  CHECK(rig.updates_from(2) ==
        std::vector<std::string>{"drain a-1 " + kPrefix + "provisioning", "power_up a-1"});
  CHECK(rig.runner.calls().empty());

  REQUIRE(rig.tick_until([&] { return rig.phase_is(1, SlotPhase::joining); }));
  const auto calls = rig.runner.calls();
  REQUIRE(calls.size() == 1);
  const auto log = (rig.config.provision.lifecycle_log_dir / "a" / "a-1.1.log").string();
  CHECK(calls[0] == std::vector<std::string>{"env", "AR_GROUP_TYPE=compute",
                                             "AR_LIFECYCLE_SCRIPT=", "AR_LIFECYCLE_LOG=" + log,
                                             "AR_NODE_CONF=", rig.config.provision.command.string(),
                                             "create", "a", "a-1", "a:a-1:1"});
  CHECK(rig.slurm.nodes.at("a-1").address == "10.0.0.9");

  rig.registers("a-1");
  REQUIRE(rig.tick_until([&] { return rig.phase_is(1, SlotPhase::in_service); }));
  CHECK(rig.updates_from(4) == std::vector<std::string>{
                                   "drain a-1 " + kPrefix + "provisioning",
                                   "address a-1 10.0.0.9",
                                   "drain a-1 " + kPrefix + "ready, held until released",
                                   "resume a-1",
                               });
  CHECK(rig.runner.calls().size() == 1);
  CHECK(rig.slot(1).instance_id == "i-1");
  const auto records = rig.store->instance_records();
  REQUIRE(records.size() == 1);
  CHECK(records[0].node == "a-1");
  CHECK(records[0].group == "a");
  CHECK(records[0].instance_id == "i-1");
  CHECK(records[0].started != 0);
  CHECK(records[0].in_service != 0);
  CHECK(records[0].terminated == 0);
  CHECK(rig.events("instance_created").size() == 1);
}

TEST_CASE("provisioner makes a slot's resume again until slurmctld takes it", "[provisioner]") {
  Rig rig;
  rig.write_group("a", "type=compute\ncount=2\nmax_count=2\npartitions=main\n");
  rig.add_slots("a-", 2);
  rig.start();
  REQUIRE(rig.tick_until(
      [&] { return rig.phase_is(1, SlotPhase::joining) && rig.phase_is(2, SlotPhase::joining); }));
  // More refusals in a row than the 3 tries a resume had: the slot stayed
  // drained for good, its group short of a node.
  rig.slurm.refuse_resumes = 6;
  rig.registers("a-1");
  REQUIRE(rig.tick_until([&] { return rig.slurm.updated("resume a-1"); }));
  CHECK(rig.slurm.refuse_resumes == 0);
  CHECK_FALSE(rig.slurm.nodes.at("a-1").drain);
  // Past kWriteRetryFor of refusals it is given up.
  rig.slurm.refuse_resumes = 1'000'000;
  rig.registers("a-2");
  for (int i = 0; i < 3; ++i) rig.tick();
  rig.clock.advance(ar::Provisioner::kWriteRetryFor + std::chrono::seconds{1});
  for (int i = 0; i < 3; ++i) rig.tick();
  const auto refused = rig.slurm.refuse_resumes;
  for (int i = 0; i < 3; ++i) rig.tick();
  CHECK(rig.slurm.refuse_resumes == refused);
  CHECK_FALSE(rig.slurm.updated("resume a-2"));
}

TEST_CASE("provisioner powers a failed create's slot down by force", "[provisioner]") {
  const auto [status, kind] = GENERATE(std::pair<int, std::string>{69, "capacity_unavailable"},
                                       std::pair<int, std::string>{75, "create_failed"});
  CAPTURE(status);
  Rig rig;
  rig.runner.set_result({status, "no luck\n", ""});
  rig.write_group("a", kComputeGroup);
  rig.add_slots("a-", 2);
  rig.start();
  REQUIRE(rig.tick_until([&] { return rig.slurm.updated("power_down_force a-1"); }));
  const auto before = static_cast<std::size_t>(
      std::ranges::find(rig.slurm.updates, "power_down_force a-1") - rig.slurm.updates.begin());
  CHECK(rig.phase_is(1, SlotPhase::empty));
  rig.tick();  // powering down: Slurm cleared the drain, set again
  rig.tick();
  CHECK(rig.updates_from(before) ==
        std::vector<std::string>{"power_down_force a-1", "drain a-1 " + kPrefix + "empty slot"});
  rig.slurm.finish_power_down("a-1");
  rig.tick();
  rig.tick();
  CHECK(rig.updates_from(before) ==
        std::vector<std::string>{"power_down_force a-1", "drain a-1 " + kPrefix + "empty slot",
                                 "drain a-1 " + kPrefix + "empty slot"});
  CHECK(rig.runner.calls().size() == 1);  // the backoff holds the next create
  const auto records = rig.store->instance_records();
  REQUIRE(records.size() == 1);
  CHECK(records[0].terminated != 0);
  CHECK(records[0].started == 0);
  CHECK(records[0].end_reason == kind);
  const auto events = rig.events(kind);
  REQUIRE(events.size() == 1);
  CHECK(events[0].level == "warning");
  CHECK(events[0].group == "a");
  CHECK(events[0].node == "a-1");
}

TEST_CASE("provisioner scales a group in: drain, terminate, power down", "[provisioner]") {
  Rig rig;
  bring_up(rig);
  const auto updates = rig.slurm.updates.size();
  const auto calls = rig.runner.calls().size();
  rig.runner.set_result({0, "", ""});
  rig.write_group("a", "type=compute\ncount=0\nmax_count=2\npartitions=main\n");
  REQUIRE(rig.tick_until([&] { return rig.slurm.updated("power_down_asap a-1"); }));
  CHECK(rig.updates_from(updates) ==
        std::vector<std::string>{"drain a-1 " + kPrefix + "scale_in", "power_down_asap a-1"});
  REQUIRE(rig.runner.calls().size() == calls + 1);
  CHECK(rig.provider_calls().back() == "terminate a a-1 i-1");
  CHECK(rig.phase_is(1, SlotPhase::terminating));

  rig.tick();  // powering down: the drain is set again
  CHECK(rig.updates_from(updates).back() == "drain a-1 " + kPrefix + "empty slot");
  CHECK(rig.slurm.nodes.at("a-1").drain);
  rig.slurm.finish_power_down("a-1");
  REQUIRE(rig.tick_until([&] { return rig.phase_is(1, SlotPhase::empty); }));
  rig.tick();
  CHECK(rig.runner.calls().size() == calls + 1);  // no new create
  const auto records = rig.store->instance_records();
  REQUIRE(records.size() == 1);
  CHECK(records[0].terminated != 0);
  CHECK(records[0].end_reason == "scale_in");
  CHECK(rig.events("instance_terminated").size() == 1);
}

TEST_CASE("provisioner replaces a node marked Action:Replace", "[provisioner]") {
  Rig rig;
  bring_up(rig);
  const auto updates = rig.slurm.updates.size();
  auto& node = rig.slurm.nodes.at("a-1");
  node.fail = true;
  node.reason = "Action:Replace";
  rig.runner.set_result({0, "", ""});
  REQUIRE(rig.tick_until([&] { return rig.slurm.updated("power_down_asap a-1"); }));
  CHECK(rig.updates_from(updates) ==
        std::vector<std::string>{"drain a-1 " + kPrefix + "replace", "power_down_asap a-1"});
  CHECK(rig.provider_calls().back() == "terminate a a-1 i-1");
  rig.tick();
  rig.slurm.finish_power_down("a-1");
  rig.slurm.nodes.at("a-1").fail = false;  // a powered-down node comes back clean
  rig.runner.set_result({0, "instance_id=i-2\nnode_addr=10.0.0.10\n", ""});
  REQUIRE(rig.tick_until([&] { return rig.phase_is(1, SlotPhase::joining); }));
  CHECK(rig.provider_calls().back() == "create a a-1 a:a-1:2");
  CHECK(rig.slurm.nodes.at("a-1").address == "10.0.0.10");
  const auto records = rig.store->instance_records();
  REQUIRE(records.size() == 2);
  CHECK(records[0].token == "a:a-1:1");
  CHECK(records[0].end_reason == "replace");
  CHECK(records[0].terminated != 0);
  CHECK(records[1].token == "a:a-1:2");
  CHECK(records[1].instance_id == "i-2");
  CHECK(records[1].terminated == 0);
}

TEST_CASE("provisioner owns its groups' slot names only", "[provisioner]") {
  Rig rig;
  rig.write_group("a", "type=compute\ncount=0\nmax_count=3\npartitions=main\n");
  rig.add_slots("a-", 3);
  rig.start();
  CHECK_FALSE(rig.provisioner->owns("a-1"));  // no group read yet
  rig.tick();
  for (const auto* name : {"a-1", "a-2", "a-3"}) CHECK(rig.provisioner->owns(name));
  for (const auto* name :
       {"node1", "a-0", "a-01", "a-4", "a-99", "a-x", "a-", "a", "a-1x", "a-123456", "b-1"})
    CHECK_FALSE(rig.provisioner->owns(name));
}

TEST_CASE("provisioner restarted keeps a slot in service as it is", "[provisioner]") {
  Rig rig;
  bring_up(rig);
  const auto updates = rig.slurm.updates.size();
  const auto calls = rig.runner.calls().size();
  rig.provisioner.reset();
  rig.start();
  rig.tick();
  rig.tick();
  CHECK(rig.phase_is(1, SlotPhase::in_service));
  CHECK(rig.slot(1).instance_id == "i-1");
  CHECK(rig.updates_from(updates).empty());
  CHECK(rig.runner.calls().size() == calls);
  CHECK(rig.store->instance_records().size() == 1);
}

TEST_CASE("provisioner restarted during a create calls it again with the same token",
          "[provisioner]") {
  Rig rig;
  rig.write_group("a", kComputeGroup);
  rig.add_slots("a-", 2);
  rig.runner.set_hang(true);
  rig.start();
  REQUIRE(rig.tick_until([&] { return rig.runner.calls().size() == 1; }));
  rig.provisioner.reset();  // the controller stops: its call is cancelled

  ar::test::FakeRunner runner;  // the restarted controller's
  runner.set_result(kCreated);
  ar::Provisioner second(*rig.store, rig.config, rig.slurm, rig.clock, runner);
  CHECK(rig.phase_is(1, SlotPhase::creating, &second));
  REQUIRE(rig.tick_until([&] { return rig.phase_is(1, SlotPhase::joining, &second); }, &second));
  const auto calls = runner.calls();
  REQUIRE(calls.size() == 1);
  CHECK(std::vector<std::string>(calls[0].end() - 4, calls[0].end()) ==
        std::vector<std::string>{"create", "a", "a-1", "a:a-1:1"});
  const auto records = rig.store->instance_records();
  REQUIRE(records.size() == 1);
  CHECK(records[0].token == "a:a-1:1");
  CHECK(records[0].instance_id == "i-1");
}

TEST_CASE("provisioner keeps its groups while a group file is bad, said once", "[provisioner]") {
  Rig rig;
  rig.write_group("a", "type=compute\ncount=0\nmax_count=2\npartitions=main\n");
  rig.add_slots("a-", 2);
  rig.start();
  rig.tick();
  rig.write_group("a", "type=compute\ncount=x\nmax_count=2\npartitions=main\n");
  for (int i = 0; i < 4; ++i) rig.tick();
  const auto state = rig.provisioner->state();
  REQUIRE(state.groups.size() == 1);
  CHECK(state.groups[0].spec.count == 0);
  CHECK(state.groups[0].operation.count == 0);
  const auto errors = rig.events("group_file_error");
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].level == "error");
  CHECK_THAT(errors[0].detail, Catch::Contains("count") && Catch::Contains("'x'"));
  CHECK(rig.runner.calls().empty());
}

TEST_CASE("provisioner reads no group file from a folder others may write to",
          "[provisioner][security]") {
  Rig rig;
  rig.write_group("a", kComputeGroup);
  rig.add_slots("a-", 2);
  std::filesystem::permissions(rig.config.provision.groups_dir,
                               static_cast<std::filesystem::perms>(0777),
                               std::filesystem::perm_options::replace);
  rig.start();
  for (int i = 0; i < 3; ++i) rig.tick();
  CHECK(rig.provisioner->state().groups.empty());
  const auto errors = rig.events("group_file_error");
  REQUIRE(errors.size() == 1);
  CHECK_THAT(errors[0].detail,
             Catch::Contains("groups_dir: the folder " + rig.config.provision.groups_dir.string() +
                             " may be written by others (mode 777)"));
  CHECK(rig.runner.calls().empty());
}

TEST_CASE("provisioner restarted while a failed create's slot powers down drains it again",
          "[provisioner]") {
  Rig rig;
  rig.runner.set_result({75, "", ""});
  rig.write_group("a", kComputeGroup);
  rig.add_slots("a-", 2);
  rig.start();
  REQUIRE(rig.tick_until([&] { return rig.slurm.updated("power_down_force a-1"); }));
  REQUIRE_FALSE(rig.slurm.nodes.at("a-1").drain);  // Slurm cleared it as it began powering down
  rig.provisioner.reset();                         // before the drain was set again

  rig.start();
  const auto updates = rig.slurm.updates.size();
  rig.tick();
  rig.tick();
  CHECK(rig.updates_from(updates) ==
        std::vector<std::string>{"drain a-1 " + kPrefix + "empty slot"});
  CHECK(rig.slurm.nodes.at("a-1").drain);
  rig.slurm.finish_power_down("a-1");
  rig.tick();
  rig.tick();
  CHECK(rig.slurm.nodes.at("a-1").drain);
  CHECK_FALSE(rig.slurm.updated("power_down_asap"));
  CHECK(rig.runner.calls().size() == 1);
}

namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE(
    "provisioner plans an operation on nodes read after it began (a list read before would take "
    "a busy slot for an idle one)",
    "[provisioner]") {
  Rig rig;
  bring_up(rig);
  REQUIRE(rig.tick_until([&] { return !rig.provisioner->busy(); }));
  const auto before = rig.clock.now();
  rig.clock.advance(1s);
  rig.provisioner->set_group("a", 2, std::nullopt, 0);
  CHECK(rig.provisioner->busy());  // the engine reads slurmctld at its next look
  ar::Provisioner::NodeMap nodes;
  for (const auto& node : rig.slurm.load_nodes()) nodes[node.name] = &node;
  for (int i = 0; i < 3; ++i) rig.provisioner->tick(nodes, false, before);
  CHECK(rig.phase_is(2, SlotPhase::empty));  // not planned on the read from before
  rig.provisioner->tick(nodes, false, rig.clock.now());
  CHECK_FALSE(rig.phase_is(2, SlotPhase::empty));
}

TEST_CASE("provisioner's group set writes the group's file and starts the operation at once",
          "[provisioner]") {
  Rig rig;
  bring_up(rig);
  const auto file = rig.config.provision.groups_dir / "a.conf";
  std::filesystem::permissions(file, std::filesystem::perms::owner_read |
                                         std::filesystem::perms::owner_write |
                                         std::filesystem::perms::group_read);
  const auto message = rig.provisioner->set_group("a", 2, std::nullopt, 0);
  // The file keeps its mode (0640).
  CHECK((std::filesystem::status(file).permissions() & std::filesystem::perms::mask) ==
        (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
         std::filesystem::perms::group_read));
  CHECK_THAT(message, Catch::Contains("count=2 written to " + file.string()));
  CHECK_THAT(message, Catch::Contains("; operation 2 (count 2, min_count 0)"));
  CHECK(read_file(file) == "type=compute\ncount=2\nmax_count=2\npartitions=main\n");
  CHECK(rig.provisioner->state().groups.at(0).operation.count == 2);
  const auto said = rig.events("group_set");
  REQUIRE(said.size() == 1);
  CHECK(said[0].detail == "count=2 set by uid 0 in " + file.string());
  REQUIRE(rig.tick_until([&] { return rig.phase_is(2, SlotPhase::joining); }));

  // Refused, the file as it was: beyond the declared slots, min_count above
  // count, an unknown group.
  CHECK_THROWS_WITH(rig.provisioner->set_group("a", 3, std::nullopt, 0),
                    Catch::Contains("count 3 is more than max_count 2"));
  CHECK_THROWS_WITH(rig.provisioner->set_group("a", std::nullopt, 5, 0),
                    Catch::Contains("min_count 5 is more than count 2"));
  CHECK_THROWS_WITH(rig.provisioner->set_group("b", 1, std::nullopt, 0),
                    Catch::Contains("no group 'b': cannot read " +
                                    (rig.config.provision.groups_dir / "b.conf").string()));
  CHECK(read_file(file) == "type=compute\ncount=2\nmax_count=2\npartitions=main\n");
  CHECK_FALSE(std::filesystem::exists(file.string() + ".auto-resume.tmp"));
  CHECK(rig.events("group_set").size() == 1);
}

TEST_CASE("provisioner holds only the group whose file is in error, and group set fails for it",
          "[provisioner]") {
  Rig rig;
  bring_up(rig);
  // Another group's file with an error: said as that group's, once.
  rig.write_group("b", "type=compute\ncount=x\nmax_count=2\npartitions=main\n");
  for (int i = 0; i < 3; ++i) rig.tick();
  auto errors = rig.events("group_file_error");
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].group == "b");
  CHECK_THAT(errors[0].detail, Catch::Contains("b.conf:2:") && Catch::Contains("'x'"));
  // Group a still changes, and its group set says what holds b.
  const auto message = rig.provisioner->set_group("a", 2, std::nullopt, 0);
  CHECK_THAT(message, Catch::Contains("; operation 2 (count 2, min_count 0)"));
  CHECK_THAT(message, Catch::Contains("other group files are in error (those groups keep their "
                                      "last good state): b: "));
  CHECK(rig.provisioner->state().groups.at(0).operation.count == 2);
  // A clash holds both groups; a group set of one of them fails, its file
  // left as it was.
  rig.write_group("b", "type=compute\ncount=0\nmax_count=2\npartitions=main\nnode_prefix=a-\n");
  rig.tick();
  const auto file = rig.config.provision.groups_dir / "a.conf";
  const auto before = read_file(file);
  CHECK_THROWS_WITH(rig.provisioner->set_group("a", 1, std::nullopt, 0),
                    Catch::Contains("group a: count=1 not applied (" + file.string() +
                                    " left as it was): node 'a-1' of group 'b' is already a name "
                                    "of group 'a'"));
  CHECK(read_file(file) == before);
  CHECK(rig.provisioner->state().groups.at(0).operation.count == 2);
  CHECK_THROWS_WITH(rig.provisioner->apply_groups(0),
                    Catch::Contains("group files in error (those groups keep their last good "
                                    "state): a: ") &&
                        Catch::Contains("; b: "));
}

TEST_CASE("provisioner keeps a group's default max_count when its count changes", "[provisioner]") {
  Rig rig;
  rig.write_group("a", "type=compute\ncount=1\npartitions=main\n");  // max_count 4 by default
  rig.add_slots("a-", 6);
  rig.start();
  rig.tick();
  REQUIRE(rig.provisioner->state().groups.at(0).spec.max_count == 4);
  rig.write_group("a", "type=compute\ncount=3\npartitions=main\n");  // 6 if read anew
  rig.tick();
  const auto group = rig.provisioner->state().groups.at(0);
  CHECK(group.spec.max_count == 4);
  CHECK(group.operation.count == 3);
  CHECK(rig.events("group_config").empty());
  // Beyond the slots it came with: said, not applied.
  rig.write_group("a", "type=compute\ncount=5\npartitions=main\n");
  rig.tick();
  CHECK(rig.provisioner->state().groups.at(0).operation.count == 3);
  const auto said = rig.events("group_config");
  REQUIRE(said.size() == 1);
  CHECK_THAT(said[0].detail, Catch::Contains("count 5 is more than max_count 4"));
}

TEST_CASE("provisioner's group retry lets a stopped group create again", "[provisioner]") {
  Rig rig;
  rig.config.provision.max_bootstrap_failures = 1;
  rig.runner.set_result({65, "lifecycle script failed\n", ""});
  rig.write_group("a", kComputeGroup);
  rig.add_slots("a-", 2);
  rig.start();
  REQUIRE(rig.tick_until([&] { return rig.provisioner->state().groups.at(0).stopped; }));
  CHECK_THROWS_WITH(rig.provisioner->retry_group("b", 0), Catch::Contains("no group 'b'"));
  const auto message = rig.provisioner->retry_group("a", 0);
  CHECK_THAT(message, Catch::Contains("group a creates again (it was stopped after 1 lifecycle "
                                      "failures"));
  CHECK_FALSE(rig.provisioner->state().groups.at(0).stopped);
  CHECK(rig.events("group_retry").size() == 1);
  CHECK_THAT(rig.provisioner->retry_group("a", 0),
             Catch::Contains("was neither stopped nor waiting: nothing to retry"));
}

TEST_CASE("provisioner's group roll marks the in-service instances", "[provisioner]") {
  Rig rig;
  bring_up(rig);
  CHECK_THROWS_WITH(rig.provisioner->roll_group("a", 0, 0), Catch::Contains("invalid batch 0"));
  CHECK_THROWS_WITH(rig.provisioner->roll_group("b", 1, 0), Catch::Contains("no group 'b'"));
  CHECK(rig.provisioner->roll_group("a", 1, 0) ==
        "group a: 1 instance(s) to replace, 1 at a time (idle first; each drained, its jobs end "
        "first)");
  CHECK(rig.slot(1).roll);
  CHECK(rig.provisioner->state().groups.at(0).roll_batch == 1);
  CHECK(rig.events("roll_started").size() == 1);
  // The roll replaces a-1: drained, terminated, created again.
  const auto calls = rig.runner.calls().size();
  rig.runner.set_result({0, "", ""});
  REQUIRE(rig.tick_until([&] { return rig.provider_calls().size() > calls; }));
  CHECK(rig.provider_calls().back() == "terminate a a-1 i-1");
}

TEST_CASE("provisioner names a node's last lifecycle log", "[provisioner]") {
  Rig rig;
  bring_up(rig);
  CHECK(rig.provisioner->lifecycle_log("a-1") ==
        (rig.config.provision.lifecycle_log_dir / "a" / "a-1.1.log").string());
  CHECK(rig.provisioner->lifecycle_log("a-2") == std::string());  // no create yet
  CHECK_FALSE(rig.provisioner->lifecycle_log("b-1").has_value());
}

TEST_CASE("provisioner powers down by force a slot whose lifecycle script failed",
          "[provisioner]") {
  Rig rig;
  rig.runner.set_result({65, "lifecycle script failed\n", ""});
  rig.write_group("a", kComputeGroup);
  rig.add_slots("a-", 2);
  rig.start();
  // The instance exists (65), its slurmd never starts: the slot stays
  // POWERING_UP, where Slurm ignores POWER_DOWN_ASAP.
  REQUIRE(rig.tick_until([&] { return !rig.phase_is(1, SlotPhase::creating); }));
  rig.runner.set_result({0, "", ""});
  REQUIRE(rig.tick_until([&] { return rig.slurm.updated("power_down_force a-1"); }));
  CHECK(rig.provider_calls().back() == "terminate a a-1 -");
  CHECK_FALSE(rig.slurm.updated("power_down_asap a-1 (ignored: powering up)"));
  rig.slurm.finish_power_down("a-1");
  // Terminated, metered, and created again (a lifecycle failure returns).
  REQUIRE(rig.tick_until([&] { return rig.slot(1).attempt == 2; }));
  const auto records = rig.store->instance_records();
  REQUIRE_FALSE(records.empty());
  CHECK(records[0].end_reason == "bootstrap");
  CHECK(records[0].terminated != 0);
}

TEST_CASE("provisioner terminates an instance the provider lists and it does not know",
          "[provisioner]") {
  Rig rig;
  rig.config.provision.orphan_timeout = std::chrono::seconds{10};
  // A group whose one instance the controller knows (a:a-1:1, i-1).
  bring_up(rig);
  rig.runner.set_result({0, "token=a:a-1:1 instance_id=i-1\ntoken=a:a-2:7 instance_id=i-9\n", ""});
  const auto lists = [&] {
    const auto calls = rig.provider_calls();
    return std::ranges::count(calls, std::string("list"));
  };
  const auto before = lists();
  const auto terminated = [&](const std::string& what) {
    return std::ranges::count(rig.provider_calls(), "terminate " + what);
  };
  // Listed first, then 5 s later (orphan_timeout / 2) while not yet known
  // for orphan_timeout: left alone; then 5 s later again, known for 10 s:
  // terminated, at the third list and not before. The known one never.
  REQUIRE(rig.step_until([&] { return terminated("a a-2 i-9") == 1; }, 30));
  CHECK(lists() == before + 3);
  REQUIRE(rig.tick_until([&] { return !rig.events("orphan_terminated").empty(); }));
  const auto said = rig.events("orphan_terminated");
  REQUIRE(said.size() == 1);
  CHECK(said[0].group == "a");
  CHECK(said[0].node == "a-2");
  CHECK(said[0].level == "warning");
  CHECK_THAT(said[0].detail, Catch::Contains("instance i-9 (token a:a-2:7)"));
  CHECK(terminated("a a-1 i-1") == 0);
}

TEST_CASE("provisioner says once that the provider's list fails, and looks again later",
          "[provisioner]") {
  Rig rig;
  rig.config.provision.orphan_timeout = std::chrono::seconds{10};
  rig.runner.set_result({2, "local-provider: unknown command 'list'\n", ""});
  rig.start();
  REQUIRE(rig.tick_until([&] { return !rig.events("group_config").empty(); }));
  rig.clock.advance(std::chrono::seconds{6});
  REQUIRE(rig.tick_until(
      [&] { return std::ranges::count(rig.provider_calls(), std::string("list")) == 2; }));
  rig.tick();
  const auto said = rig.events("group_config");
  REQUIRE(said.size() == 1);
  CHECK_THAT(said[0].detail, Catch::Contains("the provider's list failed (orphans are not "
                                             "looked for): exit 2"));
}

TEST_CASE(
    "a create hung past create_timeout is abandoned for another try, and what it makes is "
    "terminated once it returns",
    "[provisioner]") {
  Rig rig;
  rig.config.provision.create_timeout = 60s;
  rig.write_group("a", kComputeGroup);
  rig.add_slots("a-", 2);
  rig.runner.set_hang(true);
  rig.start();
  REQUIRE(rig.tick_until([&] { return rig.runner.calls().size() == 1; }));
  CHECK(rig.provider_calls().back() == "create a a-1 a:a-1:1");
  rig.runner.set_hang(false);  // the next calls answer; the first stays hung
  rig.clock.advance(59s);
  rig.tick();
  CHECK(rig.events("create_abandoned").empty());
  rig.clock.advance(1s);
  rig.tick();
  const auto abandoned = rig.events("create_abandoned");
  REQUIRE(abandoned.size() == 1);
  CHECK(abandoned[0].detail ==
        "create (token a:a-1:1): no answer within create_timeout=60 s: abandoned for another try "
        "(the call goes on until provision_timeout; an instance it makes is terminated)");
  // The slot goes down and tries again after create_backoff (10 s), with a
  // new token, while the first call still hangs.
  rig.tick();
  rig.slurm.finish_power_down("a-1");
  rig.clock.advance(10s);
  REQUIRE(rig.tick_until([&] { return rig.runner.calls().size() == 2; }));
  CHECK(rig.provider_calls().back() == "create a a-1 a:a-1:2");
  REQUIRE(rig.tick_until([&] { return rig.phase_is(1, SlotPhase::joining); }));
  // The hung call returns after all, with an instance: it is terminated.
  rig.runner.release({0, "instance_id=i-hung\n", ""});
  REQUIRE(rig.tick_until([&] {
    const auto calls = rig.provider_calls();
    return std::ranges::find(calls, "terminate a a-1 i-hung") != calls.end();
  }));
  REQUIRE(rig.tick_until([&] { return rig.events("orphan_terminated").size() == 1; }));
  CHECK(rig.events("orphan_terminated")[0].detail ==
        "instance i-hung (token a:a-1:1), made by an abandoned create: terminated");
  CHECK(rig.events("create_abandoned").back().detail ==
        "the abandoned create (token a:a-1:1) returned instance i-hung after 70 s: terminating it");
  CHECK(rig.phase_is(1, SlotPhase::joining));
  CHECK(rig.slot(1).instance_id == "i-1");  // the new try's instance stays
}

TEST_CASE(
    "provisioner: a slurmctld slow to take one slot's write holds up no tick, and only that "
    "slot waits for it",
    "[provisioner]") {
  Rig rig;
  rig.write_group("a", "type=compute\ncount=2\nmax_count=2\npartitions=main\n");
  rig.add_slots("a-", 2);
  rig.start();
  rig.provisioner->start_calls();  // the writes on threads of their own, as in the controller
  // The calls to slurmctld and to the provider's command made by a tick
  // itself (there must be none) are counted.
  rig.slurm.looks.thread = rig.runner.looks.thread = std::this_thread::get_id();
  rig.slurm.node_writes_of = "a-1";
  rig.slurm.node_writes.set(true);
  rig.tick();  // the group is read: both slots' write-ahead drains start
  REQUIRE(rig.slurm.node_writes.wait_for_waiter(5s));
  // a-2 is drained, powered up, created and joins while a-1's drain waits
  // (were a tick to wait for it, the hold would end after 10 s first).
  REQUIRE(rig.tick_until([&] { return rig.phase_is(2, SlotPhase::joining); }));
  CHECK(rig.slurm.node_writes.waiting());
  CHECK(rig.provider_calls() == std::vector<std::string>{"create a a-2 a:a-2:1"});
  CHECK_FALSE(rig.slurm.updated("drain a-1"));
  CHECK(rig.phase_is(1, SlotPhase::creating));
  // Once slurmctld takes it, a-1 goes through its stages, each write in
  // before the next.
  const auto before = rig.slurm.updates.size();
  rig.slurm.node_writes.set(false);
  REQUIRE(rig.tick_until([&] { return rig.phase_is(1, SlotPhase::joining); }));
  REQUIRE(rig.provisioner->calls_settled(5s));
  std::vector<std::string> of_a1;
  for (const auto& update : rig.updates_from(before))
    if (update.find(" a-1 ") != std::string::npos || update.ends_with(" a-1"))
      of_a1.push_back(update);
  CHECK(of_a1 == std::vector<std::string>{
                     "drain a-1 " + kPrefix + "empty slot",
                     "drain a-1 " + kPrefix + "provisioning",
                     "power_up a-1",
                     "drain a-1 " + kPrefix + "provisioning",
                     "address a-1 10.0.0.9",
                 });
  CHECK(rig.provider_calls() ==
        std::vector<std::string>{"create a a-2 a:a-2:1", "create a a-1 a:a-1:1"});
  CHECK(rig.slurm.looks.count + rig.runner.looks.count == 0);
}

TEST_CASE("provisioner: a new group of many slots has at most 16 writes to slurmctld under way",
          "[provisioner]") {
  Rig rig;
  rig.write_group("a", "type=compute\ncount=0\nmax_count=40\npartitions=main\n");
  rig.add_slots("a-", 40);
  rig.start();
  rig.provisioner->start_calls();
  rig.slurm.node_writes_of = "*";
  rig.slurm.node_writes.set(true);
  rig.tick();  // the group is read: its 40 write-ahead drains are queued
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (rig.slurm.node_writes.waiters() < 16 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  REQUIRE(rig.slurm.node_writes.waiters() == 16);
  for (int i = 0; i < 5; ++i) rig.tick();
  rig.slurm.node_writes.set(false);
  REQUIRE(rig.tick_until([&] {
    return std::ranges::count_if(rig.slurm.updates, [](const std::string& u) {
             return u.starts_with("drain a-");
           }) == 40;
  }));
  CHECK(rig.slurm.node_writes.most_waiters() == 16);
}

TEST_CASE("provisioner: merge mode reads slurm.conf again only once it changed", "[provisioner]") {
  Rig rig;
  auto& p = rig.config.provision;
  p.slurm_conf = rig.dir.path / "slurm.conf";
  p.slurm_conf_include = rig.dir.path / "nodes.conf";
  const auto write_conf = [&](const std::string& node) {
    std::ofstream(p.slurm_conf) << "Include nodes.conf\nNodeName=" << node << " CPUs=1\n";
  };
  write_conf("h-1");
  rig.write_group("g", "count=1\nmax_count=1\npartitions=pg\nnode_conf=CPUs=2\n");
  rig.start();
  rig.tick();  // no restart command: the group's lines are staged
  REQUIRE(rig.events("restart_required").size() == 1);
  CHECK(rig.events("group_config").empty());
  // The admin now declares g-1 too, in a file of the same size and time:
  // the last read stands.
  const auto time = std::filesystem::last_write_time(p.slurm_conf);
  write_conf("g-1");
  std::filesystem::last_write_time(p.slurm_conf, time);
  for (int i = 0; i < 3; ++i) rig.tick();
  CHECK(rig.events("group_config").empty());
  // Its new time: read again, and the clash is said.
  std::filesystem::last_write_time(p.slurm_conf, time + 1s);
  rig.tick();
  const auto errors = rig.events("group_config");
  REQUIRE(errors.size() == 1);
  CHECK_THAT(errors[0].detail, Catch::Contains("g-1"));
}
