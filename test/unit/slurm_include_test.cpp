#include "provision/slurm_include.hpp"

#include <catch2/catch.hpp>

#include "hostlist.hpp"
#include "provision/groups.hpp"

using Catch::Matchers::Contains;
namespace inc = ar::include;

namespace {

ar::GroupSpec group(const std::string& name, const std::string& text) {
  return ar::parse_group(name, text, name + ".conf");
}

std::vector<std::string> expand(const std::string& list) {
  return ar::slurm::expand_hostlist(list);
}

const inc::Compress compress = ar::slurm::compress_hostlist;

// An admin's slurm.conf with its own nodes, partition and settings.
constexpr const char* kAdmin =
    "ClusterName=lab\n"
    "SlurmctldParameters=enable_configless,power_save_interval=1\n"
    "GresTypes=gpu\n"
    "NodeName=DEFAULT CPUs=2\n"
    "NodeName=node[1-4] RealMemory=1000   # the static nodes\n"
    "PartitionName=DEFAULT MaxTime=INFINITE\n"
    "PartitionName=debug Nodes=node[1-4] Default=YES\n"
    "NodeSet=statics Nodes=node[1-4]\n"
    "include /etc/slurm/auto-resume-nodes.conf\n";

inc::AdminConf admin() {
  inc::AdminConf conf;
  inc::scan_slurm_conf(kAdmin, conf);
  return conf;
}

}  // namespace

TEST_CASE("slurm.conf: the admin's names and settings are read", "[include]") {
  const auto conf = admin();
  CHECK(conf.node_lists == std::vector<std::string>{"node[1-4]"});
  CHECK(conf.partitions == std::set<std::string>{"debug"});
  CHECK(conf.nodesets == std::set<std::string>{"statics"});
  CHECK(conf.gres_types == std::set<std::string>{"gpu"});
  CHECK(conf.includes == std::vector<std::string>{"/etc/slurm/auto-resume-nodes.conf"});
  CHECK(conf.configless);
  CHECK_FALSE(conf.topology_tree);
  CHECK(inc::gres_conf_nodes("# gres\nNodeName=gpu-[1-8] Name=gpu File=/dev/nvidia[0-7]\n"
                             "AutoDetect=nvml\n") == std::vector<std::string>{"gpu-[1-8]", ""});
  CHECK(inc::topology_nodes("SwitchName=s1 Nodes=gpu-[1-4]\nSwitchName=top Switches=s1\n") ==
        std::vector<std::string>{"gpu-[1-4]"});
}

TEST_CASE("an include outside slurm.conf's folder is a risk for the other hosts", "[include]") {
  auto conf = admin();
  CHECK(conf.controllers == 0);
  CHECK(inc::sharing_risk(conf, "/etc/slurm/slurm.conf", "/etc/slurm/nodes.conf").empty());
  CHECK_THAT(inc::sharing_risk(conf, "/etc/slurm/slurm.conf", "/srv/nodes.conf"),
             Contains("/srv/nodes.conf is outside slurm.conf's folder /etc/slurm: configless") &&
                 !Contains("backup"));
  inc::AdminConf plain;
  inc::scan_slurm_conf("SlurmctldHost=a\nSlurmctldHost=b(10.0.0.2)\n", plain);
  CHECK(plain.controllers == 2);
  CHECK_FALSE(plain.configless);
  CHECK_THAT(inc::sharing_risk(plain, "/etc/slurm/slurm.conf", "/srv/nodes.conf"),
             Contains("configless mode is off: every slurmd host must read it at that path, and "
                      "so must the backup slurmctld"));
}

TEST_CASE("the include declares each group's slots, its NodeSet and its partitions", "[include]") {
  const auto gpu = group("gpu", "count=2\nmax_count=4\npartitions=train,debug\nnode_conf=CPUs=8\n");
  const auto login = group("login", "type=service\ncount=1\n");
  const auto text = inc::render({{gpu, 4}, {login, 0}}, admin(), compress);
  CHECK(text.starts_with(inc::kHeader));
  CHECK(text.substr(inc::kHeader.size(), 1) == "\n");
  CHECK_THAT(text, Contains("\nNodeName=gpu-[1-4] CPUs=8 State=CLOUD\n"));
  CHECK_THAT(text, Contains("\nNodeSet=gpu Nodes=gpu-[1-4]\n"));
  // debug is the admin's: left alone; train is the include's.
  CHECK_THAT(text, Contains("\nPartitionName=train Nodes=gpu SuspendTime=INFINITE State=UP\n"));
  CHECK(text.find("PartitionName=debug") == std::string::npos);
  CHECK(text.find("login") == std::string::npos);  // a service group runs no slurmd
}

TEST_CASE("slots join the NodeSet only once drained, with a port per slot", "[include]") {
  const auto gpu = group("gpu", "count=2\nmax_count=3\npartitions=train\nslot_port_base=7000\n");
  const auto fresh = inc::render({{gpu, 0}}, admin(), compress);
  CHECK_THAT(fresh, Contains("NodeName=gpu-1 Port=7000 State=CLOUD\n"));
  CHECK_THAT(fresh, Contains("NodeName=gpu-3 Port=7002 State=CLOUD\n"));
  CHECK(fresh.find("NodeSet=") == std::string::npos);
  CHECK_THAT(fresh, Contains("PartitionName=train SuspendTime=INFINITE State=UP\n"));
  const auto two = inc::render({{gpu, 2}}, admin(), compress);
  CHECK_THAT(two, Contains("NodeSet=gpu Nodes=gpu-[1-2]\n"));
  CHECK(inc::classify(fresh, two) == inc::Change::reconfigure);
}

TEST_CASE("a change is classified: NodeName lines restart, the rest reconfigures", "[include]") {
  const auto spec = [](const std::string& text) { return group("gpu", text); };
  const auto a = admin();
  const auto base =
      inc::render({{spec("count=2\nmax_count=4\npartitions=train\n"), 4}}, a, compress);
  const auto count =
      inc::render({{spec("count=3\nmax_count=4\npartitions=train\n"), 4}}, a, compress);
  const auto bigger =
      inc::render({{spec("count=3\nmax_count=8\npartitions=train\n"), 4}}, a, compress);
  const auto moved =
      inc::render({{spec("count=2\nmax_count=4\npartitions=train2\n"), 4}}, a, compress);
  CHECK(inc::classify(base, count) == inc::Change::none);
  CHECK(inc::classify(base, bigger) == inc::Change::restart);
  CHECK(inc::classify(base, moved) == inc::Change::reconfigure);
  CHECK(inc::classify("", base) == inc::Change::restart);
  CHECK(inc::classify(base, "# only a comment\n" + base) == inc::Change::none);
  CHECK(inc::diff(base, count).empty());
  CHECK(inc::diff(base, bigger) == std::vector<std::string>{"-NodeName=gpu-[1-4] State=CLOUD",
                                                            "+NodeName=gpu-[1-8] State=CLOUD"});
  CHECK(inc::to_string(inc::Change::restart) == "restart");
}

TEST_CASE("the include refuses names the admin already uses and unknown GRES", "[include]") {
  const auto a = admin();
  CHECK(inc::check({{group("gpu", "count=1\npartitions=train\n"), 0}}, a, expand).empty());
  CHECK_THAT(
      inc::check({{group("gpu", "count=1\npartitions=train\nnode_prefix=node\n"), 0}}, a, expand),
      Contains("node 'node1' of group 'gpu' is declared in slurm.conf already") &&
          Contains("NodeName=node[1-4]"));
  CHECK_THAT(inc::check({{group("statics", "count=1\npartitions=train\n"), 0}}, a, expand),
             Contains("slurm.conf already has NodeSet=statics"));
  CHECK_THAT(inc::check({{group("debug", "count=1\npartitions=train\n"), 0}}, a, expand),
             Contains("a partition of that name"));
  const auto nic = group("gpu", "count=1\npartitions=train\nnode_conf=Gres=gpu:8,nic:1\n");
  CHECK_THAT(inc::check({{nic, 0}}, a, expand),
             Contains("Gres type 'nic' is not in slurm.conf's GresTypes (gpu)"));
  const auto gpu = group("gpu", "count=1\nmax_count=4\npartitions=train\nnode_conf=Gres=gpu:8\n");
  CHECK_THAT(inc::check({{gpu, 0}}, a, expand),
             Contains("gres.conf has no line for node 'gpu-1'") && Contains("INVAL"));
  auto with_gres = a;
  with_gres.gres_lines = inc::gres_conf_nodes("NodeName=gpu-[1-4] Name=gpu Count=8\n");
  CHECK(inc::check({{gpu, 0}}, with_gres, expand).empty());
  with_gres.gres_lines = inc::gres_conf_nodes("NodeName=gpu-[1-2] Name=gpu Count=8\n");
  CHECK_THAT(inc::check({{gpu, 0}}, with_gres, expand), Contains("node 'gpu-4'"));
  auto tree = a;
  tree.topology_tree = true;
  tree.gres_lines = {""};  // a gres.conf line for every node
  CHECK_THAT(inc::check({{gpu, 0}}, tree, expand),
             Contains("topology.conf") && Contains("'gpu-1'"));
  tree.switch_nodes = {"gpu-[1-4]"};
  CHECK(inc::check({{gpu, 0}}, tree, expand).empty());
}
