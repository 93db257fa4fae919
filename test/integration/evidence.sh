#!/usr/bin/env bash
# Evidence before action (docs/resume.md): with the node agents running, a
# node is taken only on evidence that it is dead. Under a protected step:
#  1. node3's slurmd alone SIGSTOPped for 25 s (SlurmdTimeout=120: Slurm
#     itself would do nothing): Slurm shows it not responding, its agent
#     beats, the training goes on; nothing is marked, the step is never
#     cancelled, no provider call;
#  2. the four slurmds of the job stopped at once for 25 s (a management
#     network blip): the same;
#  3. node3's slurmd killed and started again 6 s later (a package upgrade):
#     its probes go unanswered and other agents cannot reach it either, but
#     its own agent beats: the same;
#  4. node3 really killed (slurmd, steps and agent): taken and resumed in
#     place, as without the agents, once its agent is silent too.
# The faults of 1-3 are recorded as slurmd-only ones: a mark of such a node
# counts as a healthy node marked (faults.counts).
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

# SlurmdTimeout=120: Slurm pings every 40 s and sets a node DOWN once it
# has not answered for 120 s, at least 80 s into a stall. With 60, a stall
# that a loaded machine stretched past 40 s (the crowd seen 37 s in, then
# held 5 s) was Slurm's DOWN and requeue, not the controller's to judge.
cluster_up --nodes 5 --slurmd-timeout 120 --message-timeout 3
CONTROLLER_CONF=$'end_window=1' controller_up
cd "$WORK" || exit
agents_up node1 node2 node3 node4 node5
wait_until 20 "heartbeats from all five nodes" heard 5
make_training_step
make_training_job 4000
job=$(sbatch --parsable -N4 -w node[1-4] -o job.out job.sh)
wait_until 60 "attempt 0 on 4 nodes" started 0
wait_until 30 "attempt 0 to make progress" past 3
node3_instance=$(slurmd_started node3)

# nothing_taken WHAT: no node marked, the step not cancelled nor relaunched,
# no provider call, the job still running.
nothing_taken() {
  local marked
  marked=$(sinfo -h -N -t fail,down,drain -o '%N %T %E')
  [[ -z $marked ]] || fail "$1: nodes marked: $marked"
  ! grep -q "attempt=1 " step.out || fail "$1: the step was relaunched: $(grep 'attempt=1 ' step.out)"
  assert_eq "$(job_field JobState)" RUNNING "$1: the job's state"
  assert_eq "$(job_field Restarts)" 0 "$1: the job's restart count"
  "$AR_CLI" events >events.txt
  assert_not_contains events.txt "job $job [^ ]+ (detected|node_out|relaunch|cancelled|give_up)" "$1: the step's events"
  assert_not_contains events.txt "node node[0-9]+ (marked|provider|replace_requested)" "$1: the nodes' events"
}
# slurmd_stalled NODE...: Slurm shows each NODE not responding.
slurmd_stalled() {
  local n
  for n in "$@"; do node_not_responding "$n" || return 1; done
}
responding() {
  local n
  for n in "$@"; do ! node_not_responding "$n" || return 1; done
}
# events_like PATTERN: how many of the controller's events match PATTERN.
events_like() { "$AR_CLI" events | grep -cE -- "$1" || true; }
# more_events N PATTERN: more than N events match PATTERN.
more_events() { (($(events_like "$2") > $1)); }
# none_suspected NODE...: each NODE suspected is well again, as the
# controller sees it (as many suspect_cleared events as suspected ones).
none_suspected() {
  local events n
  events=$("$AR_CLI" events) || return 1
  for n in "$@"; do
    (($(grep -cE "node $n suspected: " <<<"$events") == $(grep -cE "node $n suspect_cleared: " <<<"$events"))) || return 1
  done
}
# hold SECONDS SINCE: wait until SECONDS have passed since SINCE (the
# fault's length is the point of these cases, not a guess at a race).
hold() { while ((SECONDS - $2 < $1)); do sleep 0.5; done; }

# 1. One slurmd stalls.
before=$(checkpoint)
"$CLUSTER_CMD" stop-slurmd "$CLUSTER" node3 >/dev/null
stopped=$SECONDS
on_exit "\"$CLUSTER_CMD\" cont-slurmd \"$CLUSTER\" node3 >/dev/null 2>&1"
wait_until 90 "Slurm to show node3 not responding" slurmd_stalled node3
flagged=$SECONDS
wait_until 10 "the controller to say node3 is suspected, not taken" \
  event_seen "node node3 suspected: node3: its slurmd is not responding.*, but its own agent's last heartbeat came [0-9.]+ s ago: watched, not taken"
note "node3 not responding $((flagged - stopped)) s after its slurmd stopped; suspected, not taken"
hold 25 "$stopped"
hold 5 "$flagged"
nothing_taken "node3's slurmd stopped $((SECONDS - stopped)) s"
held=$((SECONDS - stopped))
"$CLUSTER_CMD" cont-slurmd "$CLUSTER" node3 >/dev/null
wait_until 60 "node3 to respond again" responding node3
wait_until 30 "the controller to see node3 well again" none_suspected node3
(($(checkpoint) > before + 20)) || fail "the training did not go on while node3's slurmd stalled: step $before, then $(checkpoint)"
nothing_taken "node3's slurmd back"
note "1: node3's slurmd stopped $held s: nothing taken, training from step $before to $(checkpoint)"

# 2. Every slurmd of the job stalls at once.
before=$(checkpoint)
for n in node1 node2 node3 node4; do "$CLUSTER_CMD" stop-slurmd "$CLUSTER" "$n" >/dev/null; done
stopped=$SECONDS
on_exit "for n in node1 node2 node3 node4; do \"$CLUSTER_CMD\" cont-slurmd \"$CLUSTER\" \$n >/dev/null 2>&1; done"
# Slurm pings its nodes every SlurmdTimeout/3 (40 s): once three of the
# four show not responding, the controller says they are a crowd.
wait_until 90 "the controller to say the nodes are suspected at once" \
  event_seen "node - suspect_crowd: [34] of the 4 nodes under protected steps are suspected at once"
flagged=$SECONDS
note "2: $((flagged - stopped)) s after the four slurmds stopped: $(sinfo -h -N -n node[1-4] -o '%N %T' | tr '\n' ' ')"
hold 25 "$stopped"
hold 5 "$flagged"
nothing_taken "four slurmds stopped $((SECONDS - stopped)) s"
held=$((SECONDS - stopped))
for n in node1 node2 node3 node4; do "$CLUSTER_CMD" cont-slurmd "$CLUSTER" "$n" >/dev/null; done
wait_until 60 "node1-4 to respond again" responding node1 node2 node3 node4
wait_until 30 "the controller to see node1-4 well again" none_suspected node1 node2 node3 node4
(($(checkpoint) > before + 20)) || fail "the training did not go on while the slurmds stalled: step $before, then $(checkpoint)"
nothing_taken "four slurmds back"
note "2: four slurmds stopped $held s: nothing taken, training from step $before to $(checkpoint)"

# 3. node3's slurmd restarts, 6 s away.
said=$(events_like "node node3 suspected: ")
killed=$SECONDS
"$CLUSTER_CMD" kill-slurmd "$CLUSTER" node3 >/dev/null
wait_until 6 "the controller to say node3 is suspected, not taken" more_events "$said" "node node3 suspected: "
note "3: $("$AR_CLI" events | grep -E "node node3 suspected: " | tail -n 1 | sed 's/.* suspected: //')"
hold 6 "$killed"
"$CLUSTER_CMD" restart-node "$CLUSTER" node3 --wait >/dev/null
wait_until 20 "the controller to see node3 well again" none_suspected node3
wait_until 30 "fresh heartbeats from all five nodes" heard 5
nothing_taken "node3's slurmd restarted"
[[ $(slurmd_started node3) != "$node3_instance" ]] || fail "node3's slurmd was not restarted"
note "3: node3's slurmd away $((SECONDS - killed)) s: nothing taken"

# 4. node3 dies: its agent with it.
"$CLUSTER_CMD" kill-node "$CLUSTER" node3 >/dev/null
killed=$SECONDS
wait_until 30 "node3 taken" event_seen "job $job [^ ]+ detected: step $job\.0 attempt 0: node3: "
detected=$((SECONDS - killed))
wait_until 60 "attempt 1 on 4 nodes" started 1
note "4: node3 killed: taken $detected s later, attempt 1 running $((SECONDS - killed)) s later"
"$AR_CLI" events >events.txt
assert_contains events.txt "job $job [^ ]+ detected: step $job\.0 attempt 0: node3: .*its own agent has been silent for [0-9.]+ s" "the dead node's detection"
assert_contains step.out "^0: attempt=1 .* nodes=node1,node2,node4,node5 " "attempt 1's nodes (node3 out, node5 in)"
assert_eq "$(job_field Restarts)" 0 "the job's restart count"
scancel "$job"
wait_until 60 "the job to end" job_ended
note "ok"
