#include "autoresume/resume.hpp"

#include <catch2/catch.hpp>

using ar::NodeHealth;
using ar::Verdict;
using std::chrono::seconds;

TEST_CASE("verdicts round-trip through their names", "[resume]") {
  for (auto v : {Verdict::none, Verdict::wait, Verdict::relaunch, Verdict::requeued,
                 Verdict::give_up, Verdict::cancelled, Verdict::no_fault})
    CHECK(ar::parse_verdict(ar::to_string(v)) == v);
  CHECK_FALSE(ar::parse_verdict("relaunched"));
  CHECK_FALSE(ar::parse_verdict(""));
}

TEST_CASE("final verdicts have documented exit statuses", "[resume]") {
  CHECK_FALSE(ar::is_final(Verdict::none));
  CHECK_FALSE(ar::is_final(Verdict::wait));
  CHECK(ar::is_final(Verdict::relaunch));
  CHECK(ar::is_final(Verdict::no_fault));
  CHECK(ar::verdict_exit_status(Verdict::give_up) == 75);
  CHECK(ar::verdict_exit_status(Verdict::requeued) == 143);
  CHECK(ar::verdict_exit_status(Verdict::cancelled) == 130);
  CHECK_FALSE(ar::verdict_exit_status(Verdict::no_fault));
  CHECK_FALSE(ar::verdict_exit_status(Verdict::relaunch));
}

namespace {
std::optional<std::string> fault(const NodeHealth& node) { return ar::look_at(node).fault; }
std::optional<std::string> suspect(const NodeHealth& node) { return ar::look_at(node).suspect; }
}  // namespace

TEST_CASE("evidence takes a node: slurmctld forgot it, Slurm's DOWN, a check's mark", "[resume]") {
  NodeHealth healthy;
  CHECK_FALSE(fault(healthy));
  CHECK_FALSE(suspect(healthy));

  auto node = healthy;
  node.known = false;
  CHECK(fault(node).value() == "it is no longer known to slurmctld");
  node = healthy;
  node.in_job = false;  // released by the job's user: healthy, no fault
  CHECK_FALSE(fault(node));
  node.down = true;  // dropped by Slurm (--no-kill)
  node.reason = "Not responding";
  node.agent = ar::AgentView::beating;  // Slurm's DOWN is evidence: its agent does not save it
  CHECK(fault(node).value() == "it left the job's allocation and is DOWN (Not responding)");
  node.down = false;
  node.fail = true;
  node.reason = "admin";
  CHECK(fault(node).value() == "it left the job's allocation and is FAIL (admin)");
  node = healthy;
  node.down = true;
  node.reason = "Not responding";
  node.agent = ar::AgentView::beating;
  CHECK(fault(node).value() == "it is DOWN (Not responding)");
  node.crowd = true;  // the crowd guard holds back suspicion, not evidence
  CHECK(fault(node).value() == "it is DOWN (Not responding)");
}

TEST_CASE("suspicion takes a node only once its own agent is silent too, or none runs there",
          "[resume]") {
  NodeHealth node;
  node.not_responding = true;
  // No agent on it: Slurm's word stands alone (docs/resume.md says what it costs).
  CHECK(fault(node).value() == "its slurmd is not responding");
  node.agent = ar::AgentView::beating;
  node.agent_age = 0.84;
  CHECK_FALSE(fault(node));
  CHECK(suspect(node).value() ==
        "its slurmd is not responding, but its own agent's last heartbeat came 0.8 s ago: watched, "
        "not taken");
  node.agent = ar::AgentView::silent;
  node.agent_age = 3.25;
  CHECK(fault(node).value() ==
        "its slurmd is not responding; its own agent has been silent for 3.2 s");
  CHECK_FALSE(suspect(node));

  node = NodeHealth{};
  node.probes_silent = "its slurmd did not answer 3 probes in a row";
  CHECK(fault(node).value() == "its slurmd did not answer 3 probes in a row");
  node.agent = ar::AgentView::beating;
  CHECK_FALSE(fault(node));
  node.not_responding = true;
  CHECK(suspect(node).value().starts_with(
      "its slurmd is not responding; its slurmd did not answer 3 probes in a row, but its own "
      "agent's last heartbeat came"));
  node.agent = ar::AgentView::silent;
  CHECK(fault(node).value().starts_with(
      "its slurmd is not responding; its slurmd did not answer 3 probes in a row; its own agent "
      "has been silent for"));

  // A node that left the job: suspected as one in it, with that said.
  node = NodeHealth{};
  node.in_job = false;
  node.not_responding = true;
  CHECK(fault(node).value() == "it left the job's allocation and its slurmd is not responding");
  node.agent = ar::AgentView::beating;
  CHECK_FALSE(fault(node));
  CHECK(suspect(node).value().starts_with(
      "it left the job's allocation and its slurmd is not responding, but its own agent's"));
}

TEST_CASE("while a crowd is suspected, suspicion alone takes none", "[resume]") {
  NodeHealth node;
  node.not_responding = true;
  node.crowd = true;
  for (const auto agent : {ar::AgentView::none, ar::AgentView::silent, ar::AgentView::beating}) {
    node.agent = agent;
    CHECK_FALSE(fault(node));
    CHECK(suspect(node).value() ==
          "its slurmd is not responding, but too many nodes are suspected at once: not taken "
          "for that alone");
  }
  node.probes_silent = "its slurmd did not answer 3 probes in a row";
  CHECK_FALSE(fault(node));
  CHECK(ar::silent_crowd(3, 4, 50));
  CHECK_FALSE(ar::silent_crowd(2, 4, 50));
  CHECK_FALSE(ar::silent_crowd(1, 1, 50));  // one node is never a crowd
}

TEST_CASE("only a health check's FAIL mark interrupts a step", "[resume]") {
  NodeHealth node;
  node.fail = true;
  node.reason = "Action:Replace";
  CHECK_FALSE(fault(node));  // the admin's mark: jobs finish first
  node.reason = "maintenance";
  CHECK_FALSE(fault(node));
  node.reason = "Action:Replace gpu: XID 79 on GPU 3";
  node.agent = ar::AgentView::beating;  // a check's mark is evidence
  CHECK(fault(node).value() == "a health check failed: Action:Replace gpu: XID 79 on GPU 3");
  node.fail = false;
  CHECK_FALSE(fault(node));
}

TEST_CASE("backoff: none before the first relaunch, then doubling up to the cap", "[resume]") {
  CHECK(ar::relaunch_backoff(1, seconds{5}, seconds{60}) == seconds{0});
  CHECK(ar::relaunch_backoff(2, seconds{5}, seconds{60}) == seconds{5});
  CHECK(ar::relaunch_backoff(3, seconds{5}, seconds{60}) == seconds{10});
  CHECK(ar::relaunch_backoff(4, seconds{5}, seconds{60}) == seconds{20});
  CHECK(ar::relaunch_backoff(6, seconds{5}, seconds{60}) == seconds{60});
  CHECK(ar::relaunch_backoff(4000000000U, seconds{5}, seconds{60}) == seconds{60});
  CHECK(ar::relaunch_backoff(3, seconds{0}, seconds{60}) == seconds{0});
}

TEST_CASE("the relaunch marker round-trips and refuses garbage", "[resume]") {
  const ar::RelaunchMarker marker{"12.0-deadbeef", 2, true};
  CHECK(marker.encode() == "12.0-deadbeef 2 1");
  const auto back = ar::RelaunchMarker::decode(marker.encode());
  REQUIRE(back);
  CHECK(back->run_id == "12.0-deadbeef");
  CHECK(back->attempt == 2);
  CHECK(back->own_master_port);
  CHECK(ar::RelaunchMarker::decode("12.0-x 0 0").value().own_master_port == false);
  for (const auto* bad : {"", "12.0-x", "12.0-x 1", " 1 1", "12.0-x one 1", "12.0-x 1 2",
                          "12.0-x -1 1", "12.0-x 1 1 extra", "12.0-x 99999999999 1"})
    CHECK_FALSE(ar::RelaunchMarker::decode(bad));
}

TEST_CASE("a relaunch appends to output files and overlaps the killed step, once", "[resume]") {
  using V = std::vector<std::string>;
  CHECK(ar::relaunch_argv({"srun", "-o", "out", "train.sh"}, 4) ==
        V{"srun", "--open-mode=append", "--overlap", "-o", "out", "train.sh"});
  const V again{"srun", "--open-mode=append", "--overlap", "x"};
  CHECK(ar::relaunch_argv(again, 4) == again);
  CHECK(ar::relaunch_argv({}, 4).empty());
  // The user's own mode would truncate the earlier attempts' output.
  CHECK(ar::relaunch_argv({"srun", "--open-mode=truncate", "-lo", "out", "x"}, 4) ==
        V{"srun", "--open-mode=append", "--overlap", "-lo", "out", "x"});
  // The program's own --overlap is its argument, not srun's option.
  CHECK(ar::relaunch_argv({"srun", "python", "t.py", "--overlap"}, 4) ==
        V{"srun", "--open-mode=append", "--overlap", "python", "t.py", "--overlap"});
}

TEST_CASE("a relaunch drops the node options that name the old allocation", "[resume]") {
  using V = std::vector<std::string>;
  const V ours{"srun", "--open-mode=append", "--overlap", "--nodes=2"};
  for (const auto& form :
       {V{"-w", "node[1-2]"}, V{"-wnode1,node2"}, V{"--nodelist", "node1,node2"},
        V{"--nodelist=node[1-2]"}, V{"-F", "hosts"}, V{"--nodefile=hosts"}, V{"-x", "node3"},
        V{"--exclude", "node[3-4]"}, V{"-w", "node1", "-x", "node3"}}) {
    V argv{"srun"};
    argv.insert(argv.end(), form.begin(), form.end());
    argv.insert(argv.end(), {"python", "train.py"});
    CAPTURE(argv);
    auto want = ours;
    want.insert(want.end(), {"python", "train.py"});
    CHECK(ar::relaunch_argv(argv, 2) == want);
  }
  // Of a shared word, only -w goes.
  CHECK(ar::relaunch_argv({"srun", "-lw", "node[1-2]", "x"}, 2) ==
        V{"srun", "--open-mode=append", "--overlap", "--nodes=2", "-l", "x"});
  // Relaunched again: as the first relaunch.
  const V relaunched{"srun", "--open-mode=append", "--overlap", "--nodes=2", "-l", "x"};
  CHECK(ar::relaunch_argv(relaunched, 2) == relaunched);
}

TEST_CASE("the dropped node options are named for srun's message", "[resume]") {
  using V = std::vector<std::string>;
  CHECK(ar::dropped_node_options({"srun", "-lw", "node[1-2]", "--nodel", "n3", "--exclude=n4",
                                  "-Fhosts", "-N2", "x", "-w", "n5"}) ==
        V{"-w node[1-2]", "--nodelist=n3", "--exclude=n4", "-F hosts"});
  CHECK(ar::dropped_node_options({"srun", "-N2", "x", "-w", "n5"}).empty());
  CHECK(ar::dropped_node_options({}).empty());
}

TEST_CASE("a relaunch keeps -N and -n, which the repair keeps true", "[resume]") {
  using V = std::vector<std::string>;
  CHECK(ar::relaunch_argv({"srun", "-N4", "-n", "8", "python", "train.py"}, 4) ==
        V{"srun", "--open-mode=append", "--overlap", "-N4", "-n", "8", "python", "train.py"});
  // With -N the step's size is the user's: no --nodes of ours.
  CHECK(ar::relaunch_argv({"srun", "--nodes", "3", "-w", "node1", "x"}, 3) ==
        V{"srun", "--open-mode=append", "--overlap", "--nodes", "3", "x"});
  // Slurm did not say how many nodes the step had: -w still goes.
  CHECK(ar::relaunch_argv({"srun", "-w", "node1", "x"}, 0) ==
        V{"srun", "--open-mode=append", "--overlap", "x"});
}

TEST_CASE("a relaunch never touches the program's arguments", "[resume]") {
  using V = std::vector<std::string>;
  const V program{"python", "train.py", "-w", "3", "-N", "2", "--nodelist=node2", "-x", "y"};
  V argv{"srun", "-N4", "-J", "-w"};
  argv.insert(argv.end(), program.begin(), program.end());
  V want{"srun", "--open-mode=append", "--overlap", "-N4", "-J", "-w"};
  want.insert(want.end(), program.begin(), program.end());
  CHECK(ar::relaunch_argv(argv, 4) == want);
  CHECK(ar::relaunch_argv({"srun", "-w", "node2", "--", "-w", "node2"}, 1) ==
        V{"srun", "--open-mode=append", "--overlap", "--nodes=1", "--", "-w", "node2"});
}

TEST_CASE("many nodes silent at once are the controller's problem, a few are theirs", "[resume]") {
  CHECK_FALSE(ar::silent_crowd(0, 5, 50));
  CHECK_FALSE(ar::silent_crowd(1, 1, 50));  // one node of one: it is that node
  CHECK_FALSE(ar::silent_crowd(1, 2, 50));
  CHECK(ar::silent_crowd(2, 2, 50));
  CHECK_FALSE(ar::silent_crowd(2, 5, 50));     // 40 %
  CHECK(ar::silent_crowd(3, 5, 50));           // 60 %
  CHECK_FALSE(ar::silent_crowd(50, 100, 50));  // exactly the limit: still marked
  CHECK(ar::silent_crowd(51, 100, 50));
  CHECK(ar::silent_crowd(2, 100, 1));
  CHECK_FALSE(ar::silent_crowd(100, 100, 100));
}

namespace {

using std::chrono::hours;
using std::chrono::minutes;

// Attempts 0..n-1 of a run, attempt i started `starts[i]` ago and ran `ran[i]`.
std::vector<ar::AttemptTimes> attempts(const std::vector<minutes>& starts,
                                       const std::vector<minutes>& ran) {
  std::vector<ar::AttemptTimes> out;
  for (std::size_t i = 0; i < starts.size(); ++i)
    out.push_back({static_cast<std::uint32_t>(i), starts[i], ran[i]});
  return out;
}

}  // namespace

TEST_CASE("relaunch budget: the first fault of a run is relaunched at once", "[resume]") {
  const auto budget =
      ar::relaunch_budget(attempts({minutes{5}}, {minutes{5}}), hours{24}, minutes{30});
  CHECK(budget.in_window == 0);
  CHECK(budget.streak == 1);
}

TEST_CASE("relaunch budget: quick faults count within the window and grow the backoff",
          "[resume]") {
  // Attempts 1-3 each failed a minute after their relaunch.
  const auto budget =
      ar::relaunch_budget(attempts({minutes{10}, minutes{8}, minutes{5}, minutes{1}},
                                   {minutes{2}, minutes{1}, minutes{1}, minutes{1}}),
                          hours{24}, minutes{30});
  CHECK(budget.in_window == 3);
  CHECK(budget.streak == 4);
}

TEST_CASE("relaunch budget: relaunches older than the window do not count", "[resume]") {
  // Attempts 1 and 2 started 3 h and 2 h ago (outside a 1 h window); the
  // streak goes on through them.
  const auto budget =
      ar::relaunch_budget(attempts({hours{4}, hours{3}, hours{2}, minutes{20}},
                                   {minutes{10}, minutes{10}, minutes{10}, minutes{10}}),
                          hours{1}, hours{2});
  CHECK(budget.in_window == 1);
  CHECK(budget.streak == 4);
}

TEST_CASE("relaunch budget: an attempt that ran healthy resets the count and the backoff",
          "[resume]") {
  // Attempt 2 ran 40 min: only attempt 3 (a quick failure) counts.
  auto list = attempts({minutes{70}, minutes{65}, minutes{60}, minutes{15}},
                       {minutes{1}, minutes{1}, minutes{40}, minutes{10}});
  auto budget = ar::relaunch_budget(list, hours{24}, minutes{30});
  CHECK(budget.in_window == 1);
  CHECK(budget.streak == 2);
  // The attempt failing now ran healthy itself: a fresh start.
  list.back().ran = minutes{30};
  budget = ar::relaunch_budget(list, hours{24}, minutes{30});
  CHECK(budget.in_window == 0);
  CHECK(budget.streak == 1);
  // healthy_after=0: no attempt resets anything.
  budget = ar::relaunch_budget(list, hours{24}, minutes{0});
  CHECK(budget.in_window == 3);
  CHECK(budget.streak == 4);
}

TEST_CASE("a relaunch the controller resizes runs on --nodes of its count, in place of -N",
          "[resume]") {
  using V = std::vector<std::string>;
  // In-job spares or --auto-resume-min-nodes: the step's count from the
  // controller takes the place of the user's -N.
  CHECK(ar::relaunch_argv({"srun", "-N4", "-n", "8", "python", "train.py"}, 4, 4) ==
        V{"srun", "--open-mode=append", "--overlap", "--nodes=4", "-n", "8", "python", "train.py"});
  CHECK(ar::relaunch_argv({"srun", "--nodes", "4", "-w", "node[1-4]", "x", "-N9"}, 4, 4) ==
        V{"srun", "--open-mode=append", "--overlap", "--nodes=4", "x", "-N9"});
  CHECK(ar::relaunch_argv({"srun", "x"}, 5, 4) ==
        V{"srun", "--open-mode=append", "--overlap", "--nodes=4", "x"});
  // Relaunched again: one --nodes, the new count.
  CHECK(ar::relaunch_argv({"srun", "--open-mode=append", "--overlap", "--nodes=3", "x"}, 3, 2) ==
        V{"srun", "--open-mode=append", "--nodes=2", "--overlap", "x"});
  CHECK(ar::dropped_node_options({"srun", "-N4", "-w", "n1", "x"}, 3) == V{"-N 4", "-w n1"});
  CHECK(ar::dropped_node_options({"srun", "--nodes=4", "x"}, 3) == V{"--nodes=4"});
}

TEST_CASE("a step relaunched on fewer nodes keeps its tasks per node, not its -n", "[resume]") {
  using V = std::vector<std::string>;
  CHECK(ar::relaunch_argv({"srun", "-N4", "-n", "8", "x"}, 4, 3) ==
        V{"srun", "--open-mode=append", "--overlap", "--nodes=3", "x"});
  CHECK(ar::relaunch_argv({"srun", "--ntasks=8", "--ntasks-per-node=2", "x"}, 4, 3) ==
        V{"srun", "--open-mode=append", "--overlap", "--nodes=3", "--ntasks-per-node=2", "x"});
  CHECK(ar::dropped_node_options({"srun", "-N4", "-n", "8", "x"}, 3, 4) == V{"-N 4", "-n 8"});
  // The same size (spares): -n stays.
  CHECK(ar::dropped_node_options({"srun", "-N4", "-n", "8", "x"}, 4, 4) == V{"-N 4"});
  // The step's size unknown (0): not a shrink, -n stays.
  CHECK(ar::relaunch_argv({"srun", "-N4", "-n16", "x"}, 0, 4) ==
        V{"srun", "--open-mode=append", "--overlap", "--nodes=4", "-n16", "x"});
  CHECK(ar::resized_tasks(8, 4, 3) == 6U);
  CHECK(ar::resized_tasks(3, 3, 2) == 2U);
  CHECK_FALSE(ar::resized_tasks(7, 4, 3));  // not spread evenly: srun's defaults
  CHECK_FALSE(ar::resized_tasks(8, 0, 3));
  CHECK_FALSE(ar::resized_tasks(8, 4, 0));
}

TEST_CASE("with_story adds to auto-resume's part of an AdminComment, keeping the admin's",
          "[resume]") {
  using ar::with_story;
  CHECK(with_story("", "attempt 0: node3 failed, relaunch on node[1-4]") ==
        "[auto-resume] attempt 0: node3 failed, relaunch on node[1-4]");
  const auto twice = with_story("[auto-resume] attempt 0: node3 failed, relaunch on node[1-4]",
                                "attempt 1: node2 failed, give_up: too little time");
  CHECK(twice ==
        "[auto-resume] attempt 0: node3 failed, relaunch on node[1-4]; attempt 1: node2 failed, "
        "give_up: too little time");
  CHECK(with_story("checked by ops ", "attempt 0: relaunch") ==
        "checked by ops [auto-resume] attempt 0: relaunch");
  CHECK(with_story("checked by ops [auto-resume] attempt 0: relaunch", "attempt 1: relaunch") ==
        "checked by ops [auto-resume] attempt 0: relaunch; attempt 1: relaunch");
  // A long story keeps its newest entries within kMaxStoryBytes.
  std::string comment;
  for (int i = 0; i < 100; ++i)
    comment = with_story(comment, "attempt " + std::to_string(i) + ": node9 failed, relaunch");
  const auto story = comment.substr(ar::kStoryMarker.size());
  CHECK(story.size() <= ar::kMaxStoryBytes);
  CHECK(story.starts_with("...; attempt "));
  CHECK(story.ends_with("; attempt 99: node9 failed, relaunch"));
}
