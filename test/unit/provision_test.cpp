#include "provision/provision.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "autoresume/keyvalue.hpp"

namespace pv = ar::provision;
using std::chrono::milliseconds;
using Strings = std::vector<std::string>;

namespace {

ar::GroupSpec spec(const std::string& name, unsigned count, unsigned max_count = 8,
                   ar::GroupType type = ar::GroupType::compute) {
  ar::GroupSpec out;
  out.name = name;
  out.type = type;
  out.count = count;
  out.max_count = max_count;
  out.node_prefix = name + "-";
  if (type == ar::GroupType::compute) out.partitions = {"p"};
  return out;
}

// The provisioner's state driven tick by tick, as the controller does:
// plan, record every action, then feed results back.
struct Sim {
  pv::Cluster cluster;
  pv::Settings settings;
  milliseconds now{1'000'000};
  std::vector<pv::Event> events;

  Sim() { cluster.slurmctld_up = true; }

  void add(const ar::GroupSpec& group_spec, unsigned min_count = 0) {
    cluster.groups.push_back(pv::new_group(group_spec));
    set(group_spec.name, group_spec.count, min_count);
  }
  void set(const std::string& name, unsigned count, unsigned min_count = 0) {
    events.push_back(pv::start_operation(cluster, group(name), count, min_count, now));
  }
  pv::Group& group(const std::string& name) {
    for (auto& g : cluster.groups)
      if (g.spec.name == name) return g;
    FAIL("no group " << name);
    throw std::logic_error("unreachable");
  }
  pv::Slot& slot(const std::string& name, unsigned index) {
    return group(name).slots.at(index - 1);
  }

  // One tick: the plan's actions as "KIND NODE [LEAVE]", recorded.
  Strings tick() {
    const auto plan = pv::plan(cluster, now, settings);
    Strings out;
    for (const auto& action : plan.actions) {
      pv::record(cluster, action, now);
      auto& g = group(action.group);
      std::string line(pv::to_string(action.kind));
      line += " " + (action.slot == 0 ? g.spec.name : g.spec.node(action.slot));
      if (action.kind == pv::ActionKind::drain)
        line += " " + std::string(pv::to_string(action.leave));
      out.push_back(line);
    }
    events.insert(events.end(), plan.events.begin(), plan.events.end());
    add_events(pv::update_status(cluster));
    return out;
  }
  void add_events(const std::vector<pv::Event>& more) {
    events.insert(events.end(), more.begin(), more.end());
  }
  void created(const std::string& name, unsigned index,
               pv::CreateOutcome outcome = pv::CreateOutcome::ok, const std::string& detail = "") {
    add_events(pv::on_created(cluster, name, index, outcome, detail, now, settings));
  }
  void registered(const std::string& name, unsigned index) {
    add_events(pv::on_registered(cluster, name, index, now));
  }
  void terminated(const std::string& name, unsigned index, bool ok = true) {
    add_events(pv::on_terminated(cluster, name, index, ok, now, settings));
  }
  // Every creating slot of `name` created and registered.
  void come_up(const std::string& name) {
    for (auto& s : group(name).slots)
      if (s.phase == pv::SlotPhase::creating) {
        created(name, s.index);
        if (group(name).spec.type == ar::GroupType::compute) registered(name, s.index);
      }
  }
  void terminate_all(const std::string& name) {
    for (auto& s : group(name).slots)
      if (s.phase == pv::SlotPhase::terminating) terminated(name, s.index);
  }
  void advance(milliseconds by) { now += by; }

  // The events of `kind` seen so far, as "GROUP NODE" (NODE may be empty).
  Strings seen(pv::EventKind kind) const {
    Strings out;
    for (const auto& e : events)
      if (e.kind == kind) out.push_back(e.group + (e.node.empty() ? "" : " " + e.node));
    return out;
  }
  std::string status(const std::string& name) {
    return std::string(pv::to_string(group(name).status));
  }
};

}  // namespace

TEST_CASE("create outcomes follow the provider's exit status (sysexits)", "[provision]") {
  struct Row {
    int status;
    bool killed;
    pv::CreateOutcome outcome;
  };
  const std::vector<Row> table = {
      {0, false, pv::CreateOutcome::ok},        {75, false, pv::CreateOutcome::retryable},
      {1, false, pv::CreateOutcome::retryable}, {0, true, pv::CreateOutcome::retryable},
      {69, false, pv::CreateOutcome::capacity}, {65, false, pv::CreateOutcome::bootstrap},
      {78, false, pv::CreateOutcome::config},   {255, false, pv::CreateOutcome::retryable},
  };
  for (const auto& row : table) {
    INFO("status " << row.status << " killed " << row.killed);
    CHECK(pv::create_outcome(row.status, row.killed) == row.outcome);
  }
}

TEST_CASE("a group is created up to its count, its nodes released once registered", "[provision]") {
  Sim sim;
  sim.add(spec("a", 3));
  CHECK(sim.tick() == Strings{"create a-1", "create a-2", "create a-3"});
  CHECK(sim.tick().empty());  // creates in flight are not repeated
  CHECK(pv::token(sim.group("a"), sim.slot("a", 2)) == "a:a-2:1");
  CHECK(sim.status("a") == "Creating");
  sim.created("a", 1);
  sim.created("a", 2);
  CHECK(sim.tick().empty());  // joining: not registered yet
  sim.registered("a", 1);
  CHECK(sim.tick() == Strings{"release a-1"});
  sim.registered("a", 2);
  sim.created("a", 3);
  sim.registered("a", 3);
  CHECK(sim.tick() == Strings{"release a-2", "release a-3"});
  CHECK(sim.status("a") == "InService");
  CHECK(sim.tick().empty());
}

TEST_CASE("creates are capped across groups and served round-robin", "[provision]") {
  Sim sim;
  sim.settings.max_parallel_creates = 3;
  sim.add(spec("a", 6));
  sim.add(spec("b", 2));
  sim.add(spec("c", 1));
  CHECK(sim.tick() == Strings{"create a-1", "create b-1", "create c-1"});
  sim.come_up("a");
  CHECK(sim.tick() == Strings{"release a-1", "create a-2"});  // c was served last: a comes next
  sim.come_up("b");
  sim.come_up("c");
  CHECK(sim.tick() == Strings{"release b-1", "release c-1", "create b-2", "create a-3"});
  sim.come_up("a");
  sim.come_up("b");
  CHECK(sim.tick() == Strings{"release a-2", "release a-3", "release b-2", "create a-4",
                              "create a-5", "create a-6"});
}

TEST_CASE("no create while slurmctld is unreachable", "[provision]") {
  Sim sim;
  sim.cluster.slurmctld_up = false;
  sim.add(spec("a", 2));
  CHECK(sim.tick().empty());
  sim.cluster.slurmctld_up = true;
  CHECK(sim.tick() == Strings{"create a-1", "create a-2"});
}

TEST_CASE("compute groups wait until every service group has an instance in service",
          "[provision]") {
  Sim sim;
  sim.add(spec("login", 1, 2, ar::GroupType::service));
  sim.add(spec("gpu", 2));
  CHECK(sim.tick() == Strings{"create login-1"});
  for (int i = 0; i < 2; ++i) {
    sim.created("login", 1, pv::CreateOutcome::retryable, "exit 75");
    CHECK(sim.tick().empty());  // backoff, and no compute create meanwhile
    sim.advance(milliseconds{sim.settings.max_retry_backoff});
    CHECK(sim.tick() == Strings{"create login-1"});
  }
  sim.created("login", 1);  // a service instance registers with no slurmd
  CHECK(sim.tick() == Strings{"release login-1", "create gpu-1", "create gpu-2"});
  CHECK(sim.seen(pv::EventKind::create_failed) == Strings{"login login-1", "login login-1"});
}

TEST_CASE("retryable failures back off, doubling up to the cap, and alert after N in a row",
          "[provision]") {
  Sim sim;
  sim.settings.retry_backoff = milliseconds{10'000};
  sim.settings.max_retry_backoff = milliseconds{35'000};
  sim.settings.alert_after = 3;
  sim.add(spec("a", 1));
  const std::vector<long> waits = {10'000, 20'000, 35'000, 35'000};
  for (const auto wait : waits) {
    CHECK(sim.tick() == Strings{"create a-1"});
    sim.created("a", 1, pv::CreateOutcome::retryable);
    sim.advance(milliseconds{wait - 1});
    CHECK(sim.tick().empty());  // the slot waits; no other slot takes its turn
    sim.advance(milliseconds{1});
  }
  CHECK(sim.seen(pv::EventKind::create_failing) == Strings{"a a-1"});
  CHECK(sim.status("a") == "Degraded");
  CHECK(sim.tick() == Strings{"create a-1"});
  CHECK(pv::token(sim.group("a"), sim.slot("a", 1)) == "a:a-1:5");
  sim.come_up("a");
  sim.tick();
  CHECK(sim.status("a") == "InService");
  CHECK(sim.slot("a", 1).failures == 0);
}

TEST_CASE("partial capacity is kept, and the group waits capacity_backoff for the rest",
          "[provision]") {
  Sim sim;
  sim.add(spec("a", 3));
  sim.add(spec("b", 1));
  CHECK(sim.tick() == Strings{"create a-1", "create b-1", "create a-2", "create a-3"});
  sim.created("a", 1);
  sim.created("a", 2);
  sim.created("a", 3, pv::CreateOutcome::capacity, "InsufficientCapacity");
  sim.registered("a", 1);
  sim.registered("a", 2);
  CHECK(sim.tick() == Strings{"release a-1", "release a-2"});
  CHECK(sim.status("a") == "Degraded");
  CHECK(sim.seen(pv::EventKind::capacity_unavailable) == Strings{"a a-3"});
  sim.come_up("b");  // another group is not held back
  CHECK(sim.tick() == Strings{"release b-1"});
  sim.advance(sim.settings.capacity_backoff - milliseconds{1});
  CHECK(sim.tick().empty());
  sim.advance(milliseconds{1});
  CHECK(sim.tick() == Strings{"create a-3"});
  sim.created("a", 3, pv::CreateOutcome::capacity);  // the same episode: no second event
  CHECK(sim.seen(pv::EventKind::capacity_unavailable).size() == 1);
  sim.advance(sim.settings.capacity_backoff);
  CHECK(sim.tick() == Strings{"create a-3"});
  sim.come_up("a");
  CHECK(sim.tick() == Strings{"release a-3"});
  CHECK(sim.status("a") == "InService");
}

TEST_CASE("MinCount holds new nodes until min_count are ready, then releases them together",
          "[provision]") {
  Sim sim;
  sim.add(spec("a", 4), 3);
  CHECK(sim.tick().size() == 4);
  sim.created("a", 1);
  sim.registered("a", 1);
  sim.created("a", 2);
  sim.registered("a", 2);
  CHECK(sim.tick().empty());  // two ready: held
  CHECK(sim.slot("a", 1).phase == pv::SlotPhase::waiting);
  sim.created("a", 3);
  sim.registered("a", 3);
  CHECK(sim.tick() == Strings{"release a-1", "release a-2", "release a-3"});
  CHECK(sim.seen(pv::EventKind::min_count_reached) == Strings{"a"});
  sim.created("a", 4);
  sim.registered("a", 4);
  CHECK(sim.tick() == Strings{"release a-4"});  // the rest are not held
  CHECK(sim.status("a") == "InService");
}

TEST_CASE("MinCount not reached in time rolls back to the previous count", "[provision]") {
  Sim sim;
  sim.settings.min_count_timeout = milliseconds{60'000};
  sim.add(spec("a", 2));
  sim.tick();
  sim.come_up("a");
  sim.tick();
  REQUIRE(sim.status("a") == "InService");
  sim.set("a", 5, 4);
  CHECK(sim.tick() == Strings{"create a-3", "create a-4", "create a-5"});
  sim.created("a", 3);
  sim.registered("a", 3);
  sim.created("a", 4, pv::CreateOutcome::capacity);
  CHECK(sim.tick().empty());  // 3 ready of min_count 4: held
  sim.advance(milliseconds{59'999});
  CHECK(sim.tick().empty());
  sim.advance(milliseconds{1});
  CHECK(sim.tick() == Strings{"rollback a", "drain a-3 rollback", "terminate a-3"});
  CHECK(sim.seen(pv::EventKind::rollback_started) == Strings{"a"});
  CHECK(sim.group("a").operation.count == 2);
  sim.terminated("a", 3);
  CHECK(sim.seen(pv::EventKind::rollback_completed).empty());  // a-5 is still being created
  sim.created("a", 5);
  CHECK(sim.tick() == Strings{"drain a-5 rollback", "terminate a-5"});
  sim.terminated("a", 5);
  sim.tick();
  CHECK(sim.seen(pv::EventKind::rollback_completed) == Strings{"a"});
  CHECK(sim.slot("a", 1).phase == pv::SlotPhase::in_service);  // what was there stays
  CHECK(sim.slot("a", 2).phase == pv::SlotPhase::in_service);
  CHECK(sim.status("a") == "InService");
}

TEST_CASE("an update restarts the MinCount deadline", "[provision]") {
  Sim sim;
  sim.settings.min_count_timeout = milliseconds{60'000};
  sim.add(spec("a", 3), 3);
  sim.tick();
  sim.created("a", 1);
  sim.registered("a", 1);
  sim.advance(milliseconds{50'000});
  sim.set("a", 3, 2);
  CHECK(sim.tick().empty());
  sim.advance(milliseconds{59'000});  // 109 s after the first: no rollback
  CHECK(sim.tick().empty());
  sim.advance(milliseconds{1'000});
  CHECK(sim.tick().front() == "rollback a");
}

TEST_CASE("scale-in takes the idle node at once and the busy one after its job", "[provision]") {
  Sim sim;
  sim.add(spec("a", 3));
  sim.tick();
  sim.come_up("a");
  sim.tick();
  sim.slot("a", 3).busy = true;
  sim.slot("a", 2).kept = true;  // an admin's drain: never taken
  sim.set("a", 1);
  CHECK(sim.tick() == Strings{"drain a-1 scale_in", "terminate a-1", "drain a-3 scale_in"});
  CHECK(sim.status("a") == "Updating");
  sim.terminated("a", 1);
  CHECK(sim.tick().empty());
  sim.slot("a", 3).busy = false;
  CHECK(sim.tick() == Strings{"terminate a-3"});
  sim.terminated("a", 3);
  sim.tick();
  CHECK(sim.status("a") == "InService");
  CHECK(sim.seen(pv::EventKind::instance_terminated) == Strings{"a a-1", "a a-3"});
}

TEST_CASE("scale-in order: unhealthy, not yet released, idle, busy, the highest index first",
          "[provision]") {
  Sim sim;
  sim.add(spec("a", 6), 0);
  sim.tick();
  sim.come_up("a");
  sim.tick();
  sim.slot("a", 1).busy = true;
  sim.slot("a", 2).unhealthy = true;
  sim.set("a", 3);
  CHECK(sim.tick() == Strings{"drain a-2 scale_in", "terminate a-2", "drain a-6 scale_in",
                              "terminate a-6", "drain a-5 scale_in", "terminate a-5"});
}

TEST_CASE("a terminate that fails is tried again after the backoff", "[provision]") {
  Sim sim;
  sim.add(spec("a", 1));
  sim.tick();
  sim.come_up("a");
  sim.tick();
  sim.set("a", 0);
  CHECK(sim.tick() == Strings{"drain a-1 scale_in", "terminate a-1"});
  sim.terminated("a", 1, false);
  CHECK(sim.seen(pv::EventKind::terminate_failed) == Strings{"a a-1"});
  CHECK(sim.tick().empty());
  sim.advance(sim.settings.retry_backoff);
  CHECK(sim.tick() == Strings{"terminate a-1"});
  sim.terminated("a", 1);
  sim.tick();
  CHECK(sim.status("a") == "InService");  // count 0, nothing left
}

TEST_CASE("Action:Replace on a group node brings the same node back as a new instance",
          "[provision]") {
  Sim sim;
  sim.add(spec("a", 2));
  sim.tick();
  sim.come_up("a");
  sim.tick();
  sim.slot("a", 2).replace = true;
  sim.slot("a", 2).busy = true;
  CHECK(sim.tick() == Strings{"drain a-2 replace"});
  CHECK(sim.tick().empty());  // its jobs finish first, and no other slot is created
  sim.slot("a", 2).busy = false;
  CHECK(sim.tick() == Strings{"terminate a-2"});
  sim.terminated("a", 2);
  CHECK(sim.tick() == Strings{"create a-2"});
  CHECK(pv::token(sim.group("a"), sim.slot("a", 2)) == "a:a-2:2");
  sim.come_up("a");
  CHECK(sim.tick() == Strings{"release a-2"});
  CHECK(sim.status("a") == "InService");
}

TEST_CASE("a roll replaces N at a time, idle nodes first, the busy one after its job",
          "[provision]") {
  Sim sim;
  sim.add(spec("a", 3));
  sim.tick();
  sim.come_up("a");
  sim.tick();
  sim.slot("a", 1).busy = true;
  pv::roll(sim.group("a"), 2);
  CHECK(sim.tick() ==
        Strings{"drain a-2 roll", "terminate a-2", "drain a-3 roll", "terminate a-3"});
  sim.terminate_all("a");
  CHECK(sim.tick() == Strings{"create a-2", "create a-3"});
  sim.come_up("a");
  CHECK(sim.tick() == Strings{"release a-2", "release a-3", "drain a-1 roll"});
  CHECK(sim.tick().empty());
  sim.slot("a", 1).busy = false;
  CHECK(sim.tick() == Strings{"terminate a-1"});
  sim.terminate_all("a");
  CHECK(sim.tick() == Strings{"create a-1"});
  sim.come_up("a");
  CHECK(sim.tick() == Strings{"release a-1"});
  CHECK(sim.group("a").roll_batch == 0);
  CHECK(sim.tick().empty());
  CHECK_THROWS_AS(pv::roll(sim.group("a"), 0), ar::ConfigError);
}

TEST_CASE("lifecycle failures terminate the instance, and enough in a row stop the group",
          "[provision]") {
  Sim sim;
  sim.settings.max_bootstrap_failures = 2;
  sim.add(spec("a", 1));
  CHECK(sim.tick() == Strings{"create a-1"});
  sim.created("a", 1, pv::CreateOutcome::bootstrap, "on_create.sh: exit 1");
  CHECK(sim.tick() == Strings{"drain a-1 bootstrap", "terminate a-1"});
  sim.terminated("a", 1);
  CHECK(sim.tick() == Strings{"create a-1"});
  sim.created("a", 1, pv::CreateOutcome::bootstrap, "on_create.sh: exit 1");
  CHECK(sim.seen(pv::EventKind::group_stopped) == Strings{"a"});
  CHECK(sim.tick() == Strings{"drain a-1 bootstrap", "terminate a-1"});
  sim.terminated("a", 1);
  CHECK(sim.tick().empty());
  CHECK(sim.status("a") == "Failed");
  CHECK(sim.seen(pv::EventKind::lifecycle_failed) == Strings{"a a-1", "a a-1"});
  pv::retry(sim.group("a"));
  CHECK(sim.tick() == Strings{"create a-1"});
  sim.come_up("a");
  sim.tick();
  CHECK(sim.status("a") == "InService");
}

TEST_CASE("a configuration error fails the group until its next operation", "[provision]") {
  Sim sim;
  sim.add(spec("a", 2));
  sim.tick();
  sim.created("a", 1, pv::CreateOutcome::config, "unknown instance type");
  sim.created("a", 2);
  sim.tick();
  CHECK(sim.status("a") == "Failed");
  CHECK(sim.seen(pv::EventKind::group_failed) == Strings{"a a-1"});
  CHECK(sim.tick().empty());
  sim.set("a", 2);
  CHECK(sim.tick() == Strings{"create a-1"});
}

TEST_CASE("a node that never registers is replaced after register_timeout", "[provision]") {
  Sim sim;
  sim.settings.register_timeout = milliseconds{30'000};
  sim.add(spec("a", 1));
  sim.tick();
  sim.created("a", 1);
  sim.advance(milliseconds{29'999});
  CHECK(sim.tick().empty());
  sim.advance(milliseconds{1});
  CHECK(sim.tick() == Strings{"drain a-1 register_timeout", "terminate a-1"});
  sim.terminated("a", 1);
  CHECK(sim.tick() == Strings{"create a-1"});
}

TEST_CASE("a count above max_count is refused: it needs a new slurm.conf", "[provision]") {
  Sim sim;
  sim.add(spec("a", 2, 4));
  CHECK_THROWS_WITH(sim.set("a", 5), Catch::Matchers::Contains("max_count 4") &&
                                         Catch::Matchers::Contains("restart"));
  CHECK_THROWS_WITH(sim.set("a", 2, 3), Catch::Matchers::Contains("min_count 3"));
  CHECK(sim.group("a").operation.count == 2);
}

TEST_CASE("group status: Creating, InService, Updating, Deleting", "[provision]") {
  Sim sim;
  sim.add(spec("a", 1));
  sim.tick();
  CHECK(sim.status("a") == "Creating");
  sim.come_up("a");
  sim.tick();
  CHECK(sim.status("a") == "InService");
  sim.set("a", 2);
  sim.tick();
  CHECK(sim.status("a") == "Updating");
  sim.come_up("a");
  sim.tick();
  sim.set("a", 0);
  sim.slot("a", 1).busy = true;
  sim.tick();
  CHECK(sim.status("a") == "Deleting");
  CHECK(sim.seen(pv::EventKind::group_status).size() == 4);
}

TEST_CASE("the provisioning state survives a round trip through its JSON", "[provision]") {
  Sim sim;
  sim.add(spec("a", 3), 2);
  sim.add(spec("login", 1, 2, ar::GroupType::service));
  CHECK(sim.tick() == Strings{"create login-1"});
  sim.created("login", 1);
  CHECK(sim.tick().size() == 4);  // login-1 released, a-1..3 created
  sim.created("a", 1);
  sim.created("a", 2, pv::CreateOutcome::retryable);
  sim.created("a", 3, pv::CreateOutcome::capacity);
  sim.tick();
  const auto json = pv::to_json(sim.cluster);
  const auto back = pv::cluster_from_json(json);
  CHECK(pv::to_json(back) == json);
  REQUIRE(back.groups.size() == 2);
  CHECK(back.groups[0].spec == sim.cluster.groups[0].spec);
  CHECK(back.groups[0].slots.size() == 8);
  CHECK(back.groups[0].slots[0].phase == pv::SlotPhase::joining);
  CHECK(back.groups[0].slots[1].failures == 1);
  CHECK(back.groups[0].capacity_episode);
  CHECK(back.next_operation == sim.cluster.next_operation);
  // The next plan from the copy is the same as from the original.
  CHECK(pv::plan(back, sim.now, sim.settings).actions ==
        pv::plan(sim.cluster, sim.now, sim.settings).actions);

  auto bad = json;
  bad["groups"][0]["slots"][0]["phase"] = 42;
  CHECK_THROWS_WITH(pv::cluster_from_json(bad), Catch::Matchers::Contains("bad phase 42"));
  bad = json;
  bad["groups"][0]["slots"][0]["index"] = 9;
  CHECK_THROWS_WITH(pv::cluster_from_json(bad), Catch::Matchers::Contains("no slot 9"));
  CHECK_THROWS_WITH(pv::cluster_from_json(nlohmann::json::object()),
                    Catch::Matchers::Contains("cannot be read"));
}

TEST_CASE("a create under way when capacity ran out does not end the episode", "[provision]") {
  Sim sim;
  sim.add(spec("a", 3));
  CHECK(sim.tick().size() == 3);
  sim.advance(milliseconds{1'000});
  sim.created("a", 3, pv::CreateOutcome::capacity);
  sim.advance(milliseconds{1'000});
  sim.created("a", 1);  // asked for before the capacity error
  sim.created("a", 2);
  sim.advance(sim.settings.capacity_backoff);
  CHECK(sim.tick() == Strings{"create a-3"});
  sim.created("a", 3, pv::CreateOutcome::capacity);
  CHECK(sim.seen(pv::EventKind::capacity_unavailable) == Strings{"a a-3"});  // one episode
  sim.advance(sim.settings.capacity_backoff);
  CHECK(sim.tick() == Strings{"create a-3"});
  sim.advance(milliseconds{1'000});
  sim.created("a", 3);  // asked for after it: capacity is back
  CHECK_FALSE(sim.group("a").capacity_episode);
}
