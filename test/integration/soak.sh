#!/usr/bin/env bash
# A run on a small cluster at the guard rails' defaults (docs/guard.md,
# "The circuit breaker"): 6 nodes, a protected step on 4 of them, and a
# node of the job killed again as soon as the last repair is done (its
# step running again, the killed node back in service). Every kill is
# resumed in place, once: the breaker, whose floor is 2 node marks an hour
# on 6 nodes, counts only repairs that have not succeeded, so it never
# trips (before, it tripped at the third kill and Slurm requeued the job).
# Five kills, more than the relaunch budget's max_attempts=3 relaunches of
# attempts that ran less than healthy_after: the node agents report the
# training's beats, and an attempt that passed the run's highest step ran
# healthy however short it ran (docs/resume.md, "Hangs and crashes"), so
# the budget never runs out while the run makes progress.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

kills=5
cluster_up --nodes 6 --accounting
# The defaults: no max_marks_per_hour or max_replacements_per_hour line.
CONTROLLER_LIMITS='' CONTROLLER_CONF=$'backoff=0\nend_window=1' controller_up
cd "$WORK" || exit
if grep -qi '^max_' auto-resumed.conf; then
  fail "the controller's configuration sets a limit: $(grep -i '^max_' auto-resumed.conf)"
fi
agents_up node1 node2 node3 node4 node5 node6
wait_until 20 "heartbeats from all six nodes" heard 6
make_training_step
make_training_job 4000
job=$(sbatch --parsable -N4 -w node[1-4] -o job.out job.sh)
wait_until 60 "attempt 0 on 4 nodes" started 0
batch=$(job_field BatchHost)
# in_service NODE: NODE neither down, failed nor drained (replaced).
in_service() { [[ $(node_state "$1") =~ ^(idle|mixed|allocated)$ ]]; }
for ((i = 1; i <= kills; i++)); do
  wait_until 30 "attempt $((i - 1)) to make progress" past $(($(checkpoint) + 2))
  # A node of the job, not its batch host.
  victim=$(scontrol show hostnames "$(job_field NodeList)" | grep -vx "$batch" | head -n 1)
  "$CLUSTER_CMD" kill-node "$CLUSTER" "$victim" >/dev/null
  killed=$SECONDS
  wait_until 90 "attempt $i on 4 nodes after $victim was killed" started "$i"
  note "kill $i: $victim; attempt $i running $((SECONDS - killed)) s later"
  # The repair is done once the killed node is back (its replacement).
  ((i == kills)) || wait_until 90 "$victim back in service after kill $i" in_service "$victim"
done

"$AR_CLI" events >events.txt
assert_eq "$(grep -cE "job $job [^ ]+ relaunch: " events.txt)" "$kills" "relaunches (one per kill)"
assert_not_contains events.txt "breaker_tripped|job $job [^ ]+ (requeued|give_up|would): " "the events"
assert_eq "$(job_field JobState)" RUNNING "the job's state"
assert_eq "$(job_field Restarts)" 0 "the job's restart count (never requeued)"
"$AR_CLI" status >status.txt
assert_contains status.txt "circuit breaker closed" "the controller's status"
for ((i = 0; i <= kills; i++)); do
  assert_eq "$(grep -c "attempt=$i " step.out)" 4 "tasks of attempt $i in step.out"
done
scancel "$job"
note "ok: $kills kills, each resumed once, at the default limits"
