#include "autoresume/daemon_config.hpp"

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "autoresume/keyvalue.hpp"
#include "autoresume/plugin_config.hpp"

using Catch::Matchers::Contains;

TEST_CASE("a daemon config file parses with comments, blanks and any key case", "[daemon_config]") {
  const auto config = ar::parse_daemon_config(
      "# controller\n"
      "Listen = 0.0.0.0:7000   # all interfaces\n"
      "\n"
      "STATE_DIR=/srv/ar\r\n"
      "provider=local\n"
      "max_attempts=5\n"
      "munge_socket=/m/munge.sock",
      "f.conf");
  CHECK(config.munge_socket == "/m/munge.sock");
  CHECK(config.listen == ar::Endpoint{"0.0.0.0", 7000});
  CHECK(config.state_dir == "/srv/ar");
  CHECK(config.provider == ar::ProviderKind::local);
  CHECK(config.max_attempts == 5);
}

TEST_CASE("defaults apply to keys the file leaves out", "[daemon_config]") {
  const auto config = ar::parse_daemon_config("provider=local\n", "f.conf");
  CHECK(config.listen == ar::Endpoint{"127.0.0.1", ar::kDefaultPort});
  CHECK(config.max_attempts == 3);
}

TEST_CASE("render writes a file that parses back to the same settings", "[daemon_config]") {
  const auto config =
      ar::parse_daemon_config("listen=[::1]:9\nprovider=local\nmax_attempts=0\n", "a");
  const auto again = ar::parse_daemon_config(ar::render(config), "b");
  CHECK(again.listen == config.listen);
  CHECK(again.state_dir == config.state_dir);
  CHECK(again.max_attempts == config.max_attempts);
}

TEST_CASE("daemon config errors name the file, the line and the value", "[daemon_config]") {
  CHECK_THROWS_WITH(ar::parse_daemon_config("provider=local\nbogus=1\n", "f.conf"),
                    Contains("f.conf:2:") && Contains("unknown key 'bogus'"));
  CHECK_THROWS_WITH(ar::parse_daemon_config("provider=local\nmax_attempts=many\n", "f.conf"),
                    Contains("f.conf:2:") && Contains("'many'"));
  CHECK_THROWS_WITH(ar::parse_daemon_config("provider=cloud\n", "f.conf"),
                    Contains("f.conf:1:") && Contains("'cloud'"));
  CHECK_THROWS_WITH(ar::parse_daemon_config("provider=local\nstate_dir=rel/dir\n", "f.conf"),
                    Contains("'rel/dir'") && Contains("absolute"));
  CHECK_THROWS_WITH(ar::parse_daemon_config("provider=local\nmunge_socket=\n", "f.conf"),
                    Contains("f.conf:2:") && Contains("munge_socket") && Contains("absolute"));
  CHECK_THROWS_WITH(ar::parse_daemon_config("provider=local\nPROVIDER=local\n", "f.conf"),
                    Contains("f.conf:2:") && Contains("twice"));
  CHECK_THROWS_WITH(ar::parse_daemon_config("listen 1.2.3.4:5\n", "f.conf"),
                    Contains("f.conf:1:") && Contains("key=value"));
}

TEST_CASE("the provider must be named explicitly", "[daemon_config]") {
  CHECK_THROWS_WITH(ar::parse_daemon_config("listen=127.0.0.1:1\n", "f.conf"),
                    Contains("provider is not set"));
}

TEST_CASE("load_daemon_config reads a file and names a missing one", "[daemon_config]") {
  const auto dir = std::filesystem::temp_directory_path() / "ar-daemon-config-test";
  std::filesystem::create_directories(dir);
  const auto file = dir / "auto-resumed.conf";
  std::ofstream(file) << "provider=local\nmax_attempts=7\n";
  CHECK(ar::load_daemon_config(file).max_attempts == 7);
  std::filesystem::remove_all(dir);
  CHECK_THROWS_WITH(ar::load_daemon_config(file), Contains(file.string()));
}

TEST_CASE("resume settings parse, with their defaults and limits", "[daemon_config]") {
  using namespace std::chrono_literals;
  const auto defaults = ar::parse_daemon_config("provider=local\n", "f");
  CHECK(defaults.backoff == 10s);
  CHECK(defaults.probe_interval == 1s);
  CHECK(defaults.probe_failures == 3);
  CHECK(defaults.end_window == 3s);
  CHECK(defaults.repair_timeout == 1800s);
  CHECK(defaults.min_time_left == 120s);
  CHECK(defaults.local_restart_command.empty());

  const auto config = ar::parse_daemon_config(
      "provider=local\nbackoff=0\nprobe_interval=0.25\nprobe_failures=0\nend_window=1.5\n"
      "repair_timeout=60\nmin_time_left=0\n"
      "local_restart_command=/opt/cluster restart-node  /tmp/c {node} --wait\n",
      "f");
  CHECK(config.backoff == 0ms);
  CHECK(config.probe_interval == 250ms);
  CHECK(config.probe_failures == 0);
  CHECK(config.end_window == 1500ms);
  CHECK(config.repair_timeout == 60s);
  CHECK(config.min_time_left == 0ms);
  CHECK(config.local_restart_command ==
        std::vector<std::string>{"/opt/cluster", "restart-node", "/tmp/c", "{node}", "--wait"});

  const auto again = ar::parse_daemon_config(ar::render(config), "r");
  CHECK(again.probe_interval == config.probe_interval);
  CHECK(again.end_window == config.end_window);
  CHECK(again.local_restart_command == config.local_restart_command);
}

TEST_CASE("bad resume settings name the line and the value", "[daemon_config]") {
  auto fails = [](const char* line, const char* expected) {
    const std::string text = std::string("provider=local\n") + line + "\n";
    CHECK_THROWS_WITH(ar::parse_daemon_config(text, "f.conf"), Contains(expected));
  };
  fails("probe_interval=0", "f.conf:2: invalid value '0' for probe_interval");
  fails("backoff=-1", "invalid value '-1' for backoff");
  fails("probe_failures=101", "probe_failures");
  fails("repair_timeout=soon", "invalid value 'soon' for repair_timeout");
  fails("local_restart_command=restart {node}", "local_restart_command");
  fails("local_restart_command=/bin/restart node1", "does not name the node ({node})");
  fails("local_restart_command=", "f.conf:2");
  fails("probe_interval=1\nprobe_interval=2", "f.conf:3: key 'probe_interval' is set twice");
}

TEST_CASE("durations have a lower bound that keeps the engine from spinning", "[daemon_config]") {
  auto fails = [](const char* line, const char* expected) {
    const std::string text = std::string("provider=local\n") + line + "\n";
    CHECK_THROWS_WITH(ar::parse_daemon_config(text, "f.conf"), Contains(expected));
  };
  fails("probe_interval=0.0000001",
        "f.conf:2: invalid value '0.0000001' for probe_interval: expected seconds from 0.1 to 60");
  fails("end_window=0.05", "invalid value '0.05' for end_window: expected seconds from 0.1 to 600");
  fails("repair_timeout=0.5",
        "invalid value '0.5' for repair_timeout: expected seconds from 1 to 86400");
  fails("heartbeat_timeout=0.5",
        "invalid value '0.5' for heartbeat_timeout: expected seconds from 1 to 3600");
  fails("provider_timeout=0.2", "expected seconds from 1 to 86400");
  fails("register_timeout=0.2", "expected seconds from 1 to 86400");
  const auto config = ar::parse_daemon_config(
      "provider=local\nprobe_interval=0.1\nheartbeat_timeout=0\nrepair_timeout=1\n", "f.conf");
  CHECK(config.probe_interval == std::chrono::milliseconds{100});
  CHECK(config.heartbeat_timeout == std::chrono::milliseconds{0});
  CHECK(config.repair_timeout == std::chrono::seconds{1});
}

TEST_CASE("a # inside a value is part of it and one after a blank starts a comment",
          "[daemon_config]") {
  const auto config = ar::parse_daemon_config(
      "provider=command\nprovider_command=/opt/x#y/replace   # the site's script\n"
      "max_attempts=2\t# tab before the comment\n",
      "f.conf");
  CHECK(config.provider_command == "/opt/x#y/replace");
  CHECK(config.max_attempts == 2);
}

TEST_CASE("provider and heartbeat settings parse, with their defaults", "[daemon_config]") {
  using namespace std::chrono_literals;
  const auto defaults = ar::parse_daemon_config("provider=local\n", "f");
  CHECK(defaults.provider_timeout == 600s);
  CHECK(defaults.provider_retries == 3);
  CHECK(defaults.provider_backoff == 10s);
  CHECK(defaults.register_timeout == 900s);
  CHECK(defaults.heartbeat_timeout == 10s);
  CHECK(defaults.heartbeat_max_silent_percent == 50);

  const auto config = ar::parse_daemon_config(
      "provider=command\nprovider_command=/opt/site/replace-node\nprovider_timeout=2.5\n"
      "provider_retries=5\nprovider_backoff=0\nheartbeat_timeout=0\nregister_timeout=30\n"
      "heartbeat_max_silent_percent=30\n",
      "f");
  CHECK(config.provider == ar::ProviderKind::command);
  CHECK(config.provider_command == "/opt/site/replace-node");
  CHECK(config.provider_timeout == 2500ms);
  CHECK(config.provider_retries == 5);
  CHECK(config.provider_backoff == 0ms);
  CHECK(config.register_timeout == 30s);
  CHECK(config.heartbeat_timeout == 0ms);
  CHECK(config.heartbeat_max_silent_percent == 30);
  const auto again = ar::parse_daemon_config(ar::render(config), "r");
  CHECK(again.provider == config.provider);
  CHECK(again.provider_command == config.provider_command);
  CHECK(again.provider_timeout == config.provider_timeout);
  CHECK(again.heartbeat_timeout == config.heartbeat_timeout);
  CHECK(again.register_timeout == config.register_timeout);
  CHECK(again.heartbeat_max_silent_percent == 30);

  const auto spares = ar::parse_daemon_config(
      "provider=spares\nspares=2\nprovider_command=/opt/site/replace-node\n", "f");
  CHECK(spares.provider == ar::ProviderKind::spares);
  CHECK(spares.spares == 2);
  const auto spares_again = ar::parse_daemon_config(ar::render(spares), "r");
  CHECK(spares_again.spares == 2);
  CHECK(spares_again.provider_command == "/opt/site/replace-node");
  CHECK(ar::parse_daemon_config("provider=spares\n", "f").spares == 1);
}

TEST_CASE("bad provider and heartbeat settings name the value", "[daemon_config]") {
  auto fails = [](const char* text, const char* expected) {
    CHECK_THROWS_WITH(ar::parse_daemon_config(text, "f.conf"), Contains(expected));
  };
  fails("provider=cloud\n",
        "f.conf:1: unknown provider 'cloud' (available: local, command, spares)");
  fails("provider=command\n", "f.conf: provider=command needs provider_command");
  fails("provider=local\nprovider_command=/bin/x\n",
        "provider_command is set but provider is local, not command or spares");
  fails("provider=local\nspares=2\n", "spares is set but provider is local, not spares");
  fails("provider=spares\nspares=0\n", "f.conf:2: invalid value '0' for spares");
  fails("provider=command\nprovider_command=replace.sh\n", "provider_command");
  fails("provider=local\nprovider_retries=0\n", "f.conf:2: invalid value '0' for provider_retries");
  fails("provider=local\nheartbeat_timeout=-3\n", "invalid value '-3' for heartbeat_timeout");
  fails("provider=local\nheartbeat_max_silent_percent=101\n", "heartbeat_max_silent_percent");
}

// The config files of the three providers, each with the command it needs
// (and `more` lines), so that a step's repair can wait for a replacement.
namespace {
std::vector<std::string> warnings_of(const std::string& text) {
  return ar::config_warnings(ar::parse_daemon_config(text, "f.conf"));
}
const std::string kCommand = "provider=command\nprovider_command=/opt/site/replace-node\n";
const std::string kSpares = "provider=spares\nprovider_command=/opt/site/replace-node\n";
const std::string kLocal = "provider=local\nlocal_restart_command=/opt/restart {node}\n";
}  // namespace

TEST_CASE("the default settings leave a repair time for one whole replacement, and srun for it",
          "[daemon_config][config_warnings]") {
  const ar::DaemonConfig defaults;
  // With no idle node a repair waits for the provider: one call, the new
  // instance's registration and the node joining the job fit in it.
  CHECK(defaults.repair_timeout >=
        defaults.provider_timeout + defaults.register_timeout + ar::DaemonConfig::kJoinAllowance);
  // srun waits (verdict_timeout) for as long as the controller may take.
  CHECK(ar::PluginConfig{}.verdict_timeout >=
        defaults.end_window + defaults.repair_timeout + ar::DaemonConfig::kMaxBackoff);
  for (const auto& text : {kCommand, kSpares, kLocal, std::string("provider=local\n"),
                           std::string("provider=spares\n")}) {
    INFO(text);
    CHECK(warnings_of(text).empty());
  }
}

TEST_CASE("a repair_timeout shorter than a replacement is warned about, per provider",
          "[daemon_config][config_warnings]") {
  const auto short_repair = "repair_timeout=300\n";
  const auto expected =
      "repair_timeout=300 s is shorter than provider_timeout + register_timeout + 60 s (the node "
      "joining the job) = 1560 s: with no idle node in the job's partition, a step waits for its "
      "failed node to be replaced and is given up (srun exits 75) after 300 s, while the "
      "replacement may take up to 1560 s; raise repair_timeout to 1560 or more, or lower "
      "provider_timeout or register_timeout to what a replacement takes";
  CHECK(warnings_of(kCommand + short_repair) == std::vector<std::string>{expected});
  CHECK(warnings_of(kLocal + short_repair) == std::vector<std::string>{expected});
  // spares: a spare is taken at once; only with the pool empty does a step wait.
  const auto spares = warnings_of(kSpares + short_repair);
  REQUIRE(spares.size() == 1);
  CHECK_THAT(spares[0], Contains("1560 s: with no spare and no idle node in the job's partition"));
  // Fitting provider settings, or a repair_timeout as long as the wait: none.
  CHECK(
      warnings_of(kCommand + short_repair + "provider_timeout=60\nregister_timeout=180\n").empty());
  CHECK(warnings_of(kCommand + "repair_timeout=1560\n").empty());
  CHECK(warnings_of(kCommand + "repair_timeout=1559.5\n").size() == 1);
  // No command: nothing is replaced, a repair waits only for an idle node.
  CHECK(warnings_of("provider=local\nrepair_timeout=1\n").empty());
  CHECK(warnings_of("provider=spares\nrepair_timeout=1\n").empty());
}

TEST_CASE("a verdict that may take longer than srun's default verdict_timeout is warned about",
          "[daemon_config][config_warnings]") {
  const auto warnings = warnings_of(kCommand + "repair_timeout=3600\nend_window=1.5\n");
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] ==
        "srun may wait end_window + repair_timeout + 600 s (the longest backoff) = 4201.5 s for a "
        "verdict, more than the plugin's default verdict_timeout=2700 s: unless the plugstack "
        "line sets verdict_timeout=4201.5 or more, srun stops waiting first, cancels the repair "
        "and keeps the step's status; or lower repair_timeout or end_window");
  // The edge: 3 + 2097 + 600 s is the default verdict_timeout itself.
  CHECK(warnings_of(kCommand + "repair_timeout=2097\n").empty());
  CHECK(warnings_of(kCommand + "repair_timeout=2097.5\n").size() == 1);
  // Both contradictions at once: each is said.
  CHECK(warnings_of(kLocal + "repair_timeout=2400\nregister_timeout=3600\n").size() == 2);
}

TEST_CASE("heartbeat_bind: node lists with addresses or networks, rendered back",
          "[daemon_config][origin]") {
  CHECK(ar::DaemonConfig{}.heartbeat_bind.empty());
  const auto config = ar::parse_daemon_config(
      "provider=local\nheartbeat_bind = gpu[1-8]=10.1.0.0/24  login1=10.2.0.5\tn9=fd00::9/64\n",
      "f.conf");
  const std::vector<ar::HeartbeatBind> expected{{"gpu[1-8]", "10.1.0.0", 24, false},
                                                {"login1", "10.2.0.5", 32, false},
                                                {"n9", "fd00::9", 64, true}};
  CHECK(config.heartbeat_bind == expected);
  CHECK_THAT(ar::render(config),
             Contains("heartbeat_bind=gpu[1-8]=10.1.0.0/24 login1=10.2.0.5 n9=fd00::9/64\n"));
  CHECK(ar::parse_daemon_config(ar::render(config), "r").heartbeat_bind == expected);
}

TEST_CASE("bad heartbeat_bind entries are named", "[daemon_config][origin]") {
  auto fails = [](const std::string& value, const char* expected) {
    CHECK_THROWS_WITH(
        ar::parse_daemon_config("provider=local\nheartbeat_bind=" + value + "\n", "f.conf"),
        Contains(expected));
  };
  fails("node1", "f.conf:2: heartbeat_bind entry 'node1' is not NODES=ADDRESS (write");
  fails("=10.0.0.1", "heartbeat_bind entry '=10.0.0.1' is not NODES=ADDRESS");
  fails("node1=", "heartbeat_bind entry 'node1=' is not NODES=ADDRESS");
  fails("node1=login1",
        "heartbeat_bind entry 'node1=login1' has no numeric IPv4 or IPv6 "
        "address 'login1'");
  fails("node1=10.0.0.0/33",
        "heartbeat_bind entry 'node1=10.0.0.0/33' has a bad prefix: "
        "invalid value '33' for heartbeat_bind prefix");
  fails("node1=fd00::/129", "invalid value '129' for heartbeat_bind prefix");
  fails("node1=10.0.0.0/x", "invalid value 'x'");
}

TEST_CASE("connection limits: defaults, settings, bounds named in errors", "[daemon_config]") {
  const auto defaults = ar::parse_daemon_config("provider=local\n", "f.conf");
  CHECK(defaults.auth_timeout == std::chrono::seconds{5});
  CHECK(defaults.max_unauthenticated == 128);
  CHECK(defaults.max_user_connections == 1024);
  CHECK(defaults.reserved_fds == 128);
  CHECK(defaults.privileged_connections == 128);
  const auto config = ar::parse_daemon_config(
      "provider=local\nauth_timeout=2.5\nmax_unauthenticated=10\nmax_user_connections=3\n"
      "reserved_fds=50\nprivileged_connections=20\n",
      "f.conf");
  CHECK(config.auth_timeout == std::chrono::milliseconds{2500});
  CHECK(config.max_unauthenticated == 10);
  CHECK(config.max_user_connections == 3);
  CHECK(config.reserved_fds == 50);
  CHECK(config.privileged_connections == 20);
  const auto again = ar::parse_daemon_config(ar::render(config), "b");
  CHECK(again.auth_timeout == config.auth_timeout);
  CHECK(again.max_user_connections == config.max_user_connections);
  CHECK(again.privileged_connections == config.privileged_connections);
  CHECK_THROWS_WITH(ar::parse_daemon_config("provider=local\nauth_timeout=0.2\n", "f.conf"),
                    Contains("auth_timeout") && Contains("0.2"));
  CHECK_THROWS_WITH(ar::parse_daemon_config("provider=local\nmax_user_connections=0\n", "f.conf"),
                    Contains("max_user_connections") && Contains("'0'"));
}

TEST_CASE("mode and the breaker's limits parse as a count or a percent and render back",
          "[daemon_config][guard]") {
  const auto defaults = ar::parse_daemon_config("provider=local\n", "f.conf");
  CHECK(defaults.mode == ar::ActionMode::act);
  CHECK(defaults.max_marks_per_hour == ar::ActionLimit{5, true});
  CHECK(defaults.max_replacements_per_hour == ar::ActionLimit{5, true});
  const auto config = ar::parse_daemon_config(
      "provider=local\nmode=observe\nmax_marks_per_hour=12\nmax_replacements_per_hour=10%\n", "f");
  CHECK(config.mode == ar::ActionMode::observe);
  CHECK(config.max_marks_per_hour == ar::ActionLimit{12, false});
  CHECK(config.max_marks_per_hour.of(1000) == 12);
  CHECK(config.max_replacements_per_hour == ar::ActionLimit{10, true});
  CHECK(config.max_replacements_per_hour.of(95) == 10);
  const auto again = ar::parse_daemon_config(ar::render(config), "r");
  CHECK(again.mode == config.mode);
  CHECK(again.max_marks_per_hour == config.max_marks_per_hour);
  CHECK(again.max_replacements_per_hour == config.max_replacements_per_hour);
  for (const auto* bad : {"0", "0%", "101%", "5 %", "%", "lots", "-1", "1000001"})
    CHECK_THROWS_WITH(
        ar::parse_daemon_config(std::string("provider=local\nmax_marks_per_hour=") + bad, "f.conf"),
        Contains("f.conf:2:") && Contains("'" + std::string(bad) + "'") &&
            Contains("a count (1 to 1000000) or a percent of the nodes (1% to 100%)"));
  CHECK_THROWS_WITH(ar::parse_daemon_config("provider=local\nmode=watch\n", "f.conf"),
                    Contains("f.conf:2:") && Contains("'watch'") && Contains("act or observe"));
}

TEST_CASE("the relaunch budget: attempt_window and healthy_after parse, with their defaults",
          "[daemon_config]") {
  using namespace std::chrono_literals;
  const auto defaults = ar::parse_daemon_config("provider=local\n", "f");
  CHECK(defaults.max_attempts == 3);
  CHECK(defaults.attempt_window == 24h);
  CHECK(defaults.healthy_after == 30min);
  const auto config =
      ar::parse_daemon_config("provider=local\nattempt_window=3600\nhealthy_after=0\n", "f");
  CHECK(config.attempt_window == 1h);
  CHECK(config.healthy_after == 0ms);
  const auto again = ar::parse_daemon_config(ar::render(config), "r");
  CHECK(again.attempt_window == 1h);
  CHECK(again.healthy_after == 0ms);
  auto fails = [](const char* line, const char* expected) {
    const std::string text = std::string("provider=local\n") + line + "\n";
    CHECK_THROWS_WITH(ar::parse_daemon_config(text, "f.conf"), Contains(expected));
  };
  fails("attempt_window=0", "f.conf:2: invalid value '0' for attempt_window");
  fails("attempt_window=0.5", "invalid value '0.5' for attempt_window: expected seconds from 1");
  fails("healthy_after=-5", "f.conf:2: invalid value '-5' for healthy_after");
  fails("healthy_after=half an hour", "invalid value 'half an hour' for healthy_after");
}

TEST_CASE("a relaunch budget that cannot run out, or outlives retention, is warned about",
          "[daemon_config][config_warnings]") {
  const auto warnings = warnings_of(kCommand + "attempt_window=3600\nhealthy_after=1800\n");
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] ==
        "attempt_window=3600 s is shorter than max_attempts x healthy_after = 5400 s: a run "
        "that fails just before healthy_after=1800 s every time never has max_attempts=3 "
        "relaunches within the window and is relaunched forever; raise attempt_window to 5400 "
        "or more, or lower healthy_after");
  // The edge, and healthy_after=0 (no reset: the window alone counts).
  CHECK(warnings_of(kCommand + "attempt_window=5400\nhealthy_after=1800\n").empty());
  CHECK(warnings_of(kCommand + "attempt_window=60\nhealthy_after=0\n").empty());
  // healthy_after longer than the window: a run failing every 59 min is
  // relaunched forever; with no relaunches at all nothing loops.
  CHECK(warnings_of(kCommand + "attempt_window=3600\nhealthy_after=7200\n").size() == 1);
  CHECK(
      warnings_of(kCommand + "attempt_window=3600\nhealthy_after=7200\nmax_attempts=0\n").empty());
  const auto retention = warnings_of(kCommand + "attempt_window=86400\nretention=3600\n");
  REQUIRE(retention.size() == 1);
  CHECK_THAT(retention[0], Contains("attempt_window=86400 s is longer than retention=3600 s"));
}

TEST_CASE("continuous provisioning: off by default, its keys checked and rendered",
          "[daemon_config]") {
  CHECK(ar::parse_daemon_config("provider=local\n", "f").provision.mode == ar::Provisioning::off);
  const auto config = ar::parse_daemon_config(
      "provider=local\n"
      "node_provisioning=continuous\n"
      "provision_command=/usr/local/sbin/provision\n"
      "groups_dir=/srv/groups\n"
      "max_parallel_creates=4\n"
      "create_backoff=2\n"
      "capacity_backoff=30\n"
      "min_count_timeout=60\n"
      "orphan_timeout=0\n",
      "f.conf");
  const auto& p = config.provision;
  CHECK(p.mode == ar::Provisioning::continuous);
  CHECK(p.command == "/usr/local/sbin/provision");
  CHECK(p.groups_dir == "/srv/groups");
  CHECK(p.max_parallel_creates == 4);
  CHECK(p.create_backoff == std::chrono::seconds{2});
  CHECK(p.capacity_backoff == std::chrono::seconds{30});
  CHECK(p.min_count_timeout == std::chrono::seconds{60});
  CHECK(p.max_bootstrap_failures == 3);
  const auto again = ar::parse_daemon_config(ar::render(config), "r");
  CHECK(again.provision.command == p.command);
  CHECK(again.provision.min_count_timeout == p.min_count_timeout);
  CHECK(again.provision.lifecycle_log_dir == p.lifecycle_log_dir);
  CHECK(p.orphan_timeout == std::chrono::seconds{0});
  CHECK(again.provision.orphan_timeout == p.orphan_timeout);
  CHECK(ar::parse_daemon_config("provider=local\n", "f").provision.orphan_timeout ==
        std::chrono::minutes{30});
  CHECK_THROWS_WITH(ar::parse_daemon_config("provider=local\nnode_provisioning=continuous\n"
                                            "provision_command=/p\norphan_timeout=-1\n",
                                            "f.conf"),
                    Catch::Contains("'-1' for orphan_timeout"));

  // Merge mode's keys.
  const auto merge = ar::parse_daemon_config(
      "provider=local\nnode_provisioning=continuous\nprovision_command=/p\n"
      "slurm_conf_include=/etc/slurm/nodes.conf\n"
      "slurmctld_restart_command=/usr/bin/systemctl restart slurmctld\n"
      "slurmctld_restart_timeout=30\n",
      "f.conf");
  CHECK(merge.provision.slurm_conf_include == "/etc/slurm/nodes.conf");
  CHECK(merge.provision.slurmctld_restart_command ==
        std::vector<std::string>{"/usr/bin/systemctl", "restart", "slurmctld"});
  CHECK(merge.provision.slurmctld_restart_timeout == std::chrono::seconds{30});
  const auto merge_again = ar::parse_daemon_config(ar::render(merge), "r").provision;
  CHECK(merge_again.slurmctld_restart_command == merge.provision.slurmctld_restart_command);
  CHECK(merge_again.slurm_conf_include == merge.provision.slurm_conf_include);
  CHECK(p.slurm_conf_include.empty());
  CHECK_THROWS_WITH(ar::parse_daemon_config("provider=local\nnode_provisioning=continuous\n"
                                            "provision_command=/p\n"
                                            "slurmctld_restart_command=/bin/true\n",
                                            "f.conf"),
                    Contains("slurmctld_restart_command is set but slurm_conf_include is not"));
  CHECK_THROWS_WITH(ar::parse_daemon_config("provider=local\nnode_provisioning=continuous\n"
                                            "provision_command=/p\n"
                                            "slurm_conf_include=nodes.conf\n",
                                            "f.conf"),
                    Contains("'nodes.conf'") && Contains("slurm_conf_include"));

  CHECK_THROWS_WITH(ar::parse_daemon_config("provider=local\nnode_provisioning=on\n", "f.conf"),
                    Contains("f.conf:2:") && Contains("'on'") && Contains("continuous"));
  CHECK_THROWS_WITH(
      ar::parse_daemon_config("provider=local\nnode_provisioning=continuous\n", "f.conf"),
      Contains("f.conf:") && Contains("needs provision_command"));
  CHECK_THROWS_WITH(ar::parse_daemon_config("provider=local\ngroups_dir=/g\n", "f.conf"),
                    Contains("groups_dir is set but node_provisioning is off"));
  CHECK_THROWS_WITH(ar::parse_daemon_config("provider=local\nnode_provisioning=continuous\n"
                                            "provision_command=/p\nmax_parallel_creates=0\n",
                                            "f.conf"),
                    Contains("f.conf:4:") && Contains("'0'"));
}

namespace {

// A file with every feature on: the spares provider with both commands,
// heartbeat_bind, notify_command, munge_socket, and provisioning in merge
// mode with its optional keys.
constexpr const char* kEverythingOn =
    "provider=spares\n"
    "provider_command=/usr/local/sbin/replace-node\n"
    "local_restart_command=/usr/local/sbin/restart-node {node}\n"
    "notify_command=/usr/bin/mail\n"
    "munge_socket=/run/munge/munge.socket.2\n"
    "heartbeat_bind=gpu[1-8]=10.1.0.0/24\n"
    "node_provisioning=continuous\n"
    "provision_command=/usr/local/sbin/provision\n"
    "slurm_conf_include=/etc/slurm/nodes.conf\n"
    "slurm_conf=/etc/slurm/slurm.conf\n"
    "slurmctld_restart_command=/usr/bin/systemctl restart slurmctld\n";

// How often each key starts a line of `rendered`.
std::map<std::string, int> printed_keys(const std::string& rendered) {
  std::map<std::string, int> keys;
  std::istringstream lines(rendered);
  for (std::string line; std::getline(lines, line);) ++keys[line.substr(0, line.find('='))];
  return keys;
}

}  // namespace

TEST_CASE("the settings table: keys once each, every one printed once its feature is on",
          "[daemon_config]") {
  const auto settings = ar::daemon_settings();
  std::set<std::string> keys;
  for (const auto& setting : settings) {
    INFO(setting.key);
    CHECK(keys.insert(setting.key).second);
    CHECK(!setting.doc.empty());
    CHECK(!setting.values.empty());
    CHECK(!setting.default_value.empty());
  }
  CHECK(keys.size() > 60);
  // A file with every feature on prints every key of the table, once.
  const auto everything = printed_keys(ar::render(ar::parse_daemon_config(kEverythingOn, "f")));
  for (const auto& key : keys) {
    INFO(key);
    CHECK(everything.contains(key));
  }
  for (const auto& [key, times] : everything) {
    INFO(key);
    CHECK(keys.contains(key));
    CHECK(times == 1);
  }
  // A file with none prints no key whose feature is off.
  const auto minimal = printed_keys(ar::render(ar::parse_daemon_config("provider=local\n", "f")));
  for (const auto* off :
       {"spares", "provider_command", "local_restart_command", "notify_command", "munge_socket",
        "heartbeat_bind", "node_provisioning", "groups_dir", "provision_command", "orphan_timeout",
        "slurm_conf_include", "slurm_conf", "slurmctld_restart_timeout"}) {
    INFO(off);
    CHECK(!minimal.contains(off));
  }
  CHECK(minimal.size() == 40);
  // The unknown-key error lists the table's keys.
  try {
    ar::parse_daemon_config("provider=local\nno_such_key=1\n", "f");
    FAIL("no_such_key was taken");
  } catch (const ar::ConfigError& e) {
    for (const auto& key : keys) CHECK_THAT(e.what(), Contains(key));
  }
}

TEST_CASE("each setting's default is a value its own parser takes and prints back the same",
          "[daemon_config]") {
  const auto base = ar::parse_daemon_config(kEverythingOn, "f");
  const auto set_in_base = printed_keys(kEverythingOn);
  for (const auto& setting : ar::daemon_settings()) {
    // provider has none; node_provisioning's (off) turns the keys after it off.
    if (setting.default_value == "unset" || setting.key == "provider" ||
        setting.key == "node_provisioning")
      continue;
    INFO(setting.key << "=" << setting.default_value);
    // The key set to its default, in a file where its feature is on.
    std::string text = kEverythingOn;
    if (set_in_base.contains(setting.key)) {
      const auto at = text.find(setting.key + "=");
      text.erase(at, text.find('\n', at) + 1 - at);
    }
    text += setting.key + "=" + setting.default_value + "\n";
    const auto rendered = ar::render(ar::parse_daemon_config(text, "f"));
    CHECK_THAT("\n" + rendered, Contains("\n" + setting.key + "=" + setting.default_value + "\n"));
    // And leaving it out gives the same.
    CHECK(rendered == ar::render(base));
  }
}

TEST_CASE("the settings described: each key with its default, the values it takes and a doc line",
          "[daemon_config]") {
  const auto text = ar::describe_settings();
  CHECK_THAT(text, Contains("max_attempts\n    default 3; takes 0 to 100\n    relaunches"));
  CHECK_THAT(text, Contains("backoff\n    default 10; takes 0, or 0.1 s to 600 s\n"));
  CHECK_THAT(text, Contains("retention\n    default 2592000; takes 1 h to 3650 days\n"));
  CHECK_THAT(text, Contains("provider\n    default none: the file must name it; takes local, "
                            "command or spares\n"));
  CHECK_THAT(text, Contains("munge_socket\n    default unset; takes an absolute path\n"));
  CHECK_THAT(text, Contains("groups_dir\n    default /etc/auto-resume/groups;"));
}
