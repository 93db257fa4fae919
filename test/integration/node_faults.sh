#!/usr/bin/env bash
# The fault injections of scripts/cluster act on one node only and Slurm sees
# them: kill-node (a crash) and freeze-node (a hang), then the way back.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

slurmd_timeout=4
message_timeout=2
# The main scheduler runs every second: of four jobs submitted at once only the
# first may start at its submit (the others are not the top priority then),
# and at the default sched_interval (60 s) the rest could wait that long.
cluster_up --nodes 4 --slurmd-timeout $slurmd_timeout --message-timeout $message_timeout \
  --conf-line 'SchedulerParameters=permit_job_expansion,sched_interval=1'
# Slurm pings a node every SlurmdTimeout/3 and waits MessageTimeout per try;
# it marks it down after SlurmdTimeout without an answer. Allow for a few rounds.
detect=$((3 * slurmd_timeout + 3 * message_timeout + 5))
cd "$WORK" || exit

# A task on every node, so that a crash has something to kill; one job per
# node, so that Slurm's own handling of node3's failure (it ends the jobs on
# node3) does not end the tasks that kill-node must leave alone.
for n in node1 node2 node3 node4; do
  sbatch -N1 -w "$n" -o "job-$n.log" --wrap 'srun sleep 600' >/dev/null
done
wait_until 20 "a task on each of the 4 nodes" tasks_are 4 '(/usr/bin/)?sleep 600'
for n in node1 node2 node3 node4; do
  [[ -n $(live_pids "$CLUSTER" "$n") ]] || fail "found no process of $n"
done
# others: the other nodes' slurmd daemons (by their pid files) and the
# job's tasks on them. A node's short-lived processes come and go by
# themselves on a loaded machine: a slurmstepd being forked, or a slurmd's
# own child, which runs as "slurmd" until it executes slurmstepd. (The
# tests are ifs, not &&-lists: a loop whose last test fails would fail the
# function, and the test with it, on whichever process came last.)
others() {
  local n p
  for n in node1 node2 node4; do
    p=$(<"$CLUSTER/run/slurmd-$n.pid")
    if [[ -d /proc/$p ]]; then echo "$p"; fi
    for p in $(live_pids "$CLUSTER" "$n"); do
      if [[ $(ps -o args= -p "$p" 2>/dev/null) =~ ^(/usr/bin/)?sleep\ 600$ ]]; then echo "$p"; fi
    done
  done | sort
}
others_before=$(others)
[[ $(wc -l <<<"$others_before") -ge 6 ]] || fail "found no slurmd and task of each other node: $others_before"

"$CLUSTER_CMD" kill-node "$CLUSTER" node3
[[ -z $(live_pids "$CLUSTER" node3) ]] || fail "processes of node3 survived kill-node: $(live_pids "$CLUSTER" node3)"
assert_eq "$(others)" "$others_before" "the other nodes' slurmds and tasks after kill-node node3"
start=$SECONDS
wait_until "$detect" "node3 down or not responding after kill-node" node_not_responding node3
note "node3 $(node_state node3) $((SECONDS - start))s after kill-node"
mapfile -t jobs < <(squeue -h -o %i)
scancel --full "${jobs[@]}"
wait_until 30 "the jobs to end" queue_empty

"$CLUSTER_CMD" restart-node "$CLUSTER" node3
start=$SECONDS
wait_until 60 "node3 idle after restart-node" node_is node3 idle
note "node3 idle $((SECONDS - start))s after restart-node"
srun -N1 -w node3 true || fail "a step on node3 failed after restart-node"

# A frozen node: nobody sees a connection drop; Slurm notices it stops answering.
"$CLUSTER_CMD" freeze-node "$CLUSTER" node2
start=$SECONDS
wait_until "$detect" "node2 not responding after freeze-node" node_not_responding node2
note "node2 $(node_state node2) $((SECONDS - start))s after freeze-node"
"$CLUSTER_CMD" thaw-node "$CLUSTER" node2
start=$SECONDS
wait_until 60 "node2 idle after thaw-node" node_is node2 idle
note "node2 idle $((SECONDS - start))s after thaw-node"
srun -N4 true || fail "a 4-node step failed after the faults"

# restart-node refuses a frozen node; with --kill it reboots it.
"$CLUSTER_CMD" freeze-node "$CLUSTER" node4 >/dev/null
if "$CLUSTER_CMD" restart-node "$CLUSTER" node4 2>refused.txt; then fail "restart-node took a frozen node"; fi
assert_contains refused.txt "node4 is frozen" "restart-node's refusal"
"$CLUSTER_CMD" restart-node "$CLUSTER" node4 --kill --wait >/dev/null
for pid in $(live_pids "$CLUSTER" node4); do
  [[ $(awk '{print $3}' "/proc/$pid/stat") != T ]] || fail "a stopped process of node4 survived restart-node --kill"
done
srun -N1 -w node4 true || fail "a step on node4 failed after restart-node --kill"
note "ok"
