#!/usr/bin/env bash
# One batch job through three faults, with a controller that is killed in
# the middle of a repair: node3 killed while the provider is still bringing
# it back, the controller SIGKILLed then, and started again: the repair
# completes and the step is relaunched exactly once. Then node2 is frozen
# (no connection drops; Slurm's pings notice) and the step is resumed again.
# Then node4 is killed with max_attempts=2 reached: no relaunch, the node
# still leaves the job, srun exits 75 with the reason, and the batch script
# goes on. The job is never requeued.
# SlurmdTimeout 12 (MessageTimeout 3): Slurm says node2 is not responding
# at its first missed ping, and the controller takes it out of the job
# before slurmctld sets it DOWN and requeues the job itself; at 6 a loaded
# CI machine saw both in the same second (2026-12-06). The controller reads
# slurmctld's nodes every second (slurm_read_interval=1): at the default 5
# s, with nothing under way, its read could come after the 5 s between
# that first missed ping and slurmctld's DOWN, and a loaded machine saw
# slurmctld requeue the job first (2026-12-06).
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

cluster_up --nodes 4 --accounting --slurmd-timeout 12 --message-timeout 3
cd "$WORK" || exit
# A provider that takes a few seconds, so that the controller dies mid-repair
# (8 s: the kill follows the node_out event, which a loaded machine's event
# polls may see seconds late).
cat >slow-restart.sh <<SCRIPT
#!/bin/bash
sleep 8
exec $CLUSTER_CMD restart-node $CLUSTER "\$1" --kill
SCRIPT
chmod +x slow-restart.sh
CONTROLLER_RESTART_COMMAND="$WORK/slow-restart.sh {node}"
CONTROLLER_CONF=$'max_attempts=2\nbackoff=1\nslurm_read_interval=1'
controller_up
make_training_step
make_training_job 400
event() { "$AR_CLI" events | grep -qE "job $job [^ ]+ $1"; }
# store SQL [ARG...]: rows of a read-only query on the controller's store
# (fields joined by '|'), for what a killed controller left there.
store() {
  python3 -c '
import sqlite3, sys
db = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
for row in db.execute(sys.argv[2], sys.argv[3:]):
    print("|".join(str(field) for field in row))' "$WORK/state/auto-resume.db" "$@"
}

job=$(sbatch --parsable -N4 -o job.out job.sh)
wait_until 60 "attempt 0 to reach step 5" past 5

# 1. The controller dies while the provider restarts node3.
"$CLUSTER_CMD" kill-node "$CLUSTER" node3 >/dev/null
wait_until 30 "node3 to be taken out" event "node_out: node3 set FAIL"
kill -KILL "$CONTROLLER_PID"
wait "$CONTROLLER_PID" 2>/dev/null || true
# The kill came in the middle of the repair: the store holds attempt 0 as
# repairing, with the phase it reached and no verdict, and no relaunch yet.
at_kill=$(store "SELECT state, phase, verdict FROM steps WHERE job_id = ? AND attempt = 0" "$job")
[[ $at_kill =~ ^repairing\|(detected|node_out|replaced|expanded)\|$ ]] ||
  fail "the controller was not killed mid-repair: attempt 0 was '$at_kill' (state|phase|verdict)"
last_event=$(store "SELECT max(id) FROM events")
assert_eq "$(store "SELECT count(*) FROM events WHERE job_id = ? AND kind = 'relaunch'" "$job")" 0 \
  "relaunch events before the kill"
note "controller SIGKILLed during the repair (attempt 0: $at_kill)"
controller_up
wait_until 90 "attempt 1 on 4 nodes" started 1
# The verdict came from the restarted controller.
relaunch_event=$(store "SELECT min(id) FROM events WHERE job_id = ? AND kind = 'relaunch'" "$job")
((relaunch_event > last_event)) ||
  fail "the relaunch (event $relaunch_event) was not recorded after the restart (last event before it: $last_event)"
"$AR_CLI" events >events.txt
assert_eq "$(grep -c "job $job [^ ]* relaunch: relaunching run [^ ]* as attempt 1 " events.txt)" 1 "relaunches to attempt 1"
assert_eq "$(grep -c "job $job [^ ]* registered: step $job\.[0-9]* attempt 1 " events.txt)" 1 "registrations of attempt 1"

# 2. node2 frozen: found by Slurm's pings, then resumed.
past_now=$(checkpoint)
wait_until 30 "attempt 1 to make progress" past $((past_now + 3))
"$CLUSTER_CMD" freeze-node "$CLUSTER" node2 >/dev/null
frozen=$SECONDS
wait_until 120 "attempt 2 on 4 nodes" started 2
note "node2 frozen: attempt 2 running $((SECONDS - frozen)) s later"
"$AR_CLI" events >events.txt
assert_contains events.txt "job $job [^ ]+ detected: step $job\.[0-9]+ attempt 1: node2: its slurmd is not responding" "the frozen node's detection"

# 3. max_attempts reached: give_up, and the batch script goes on.
past_now=$(checkpoint)
wait_until 30 "attempt 2 to make progress" past $((past_now + 3))
"$CLUSTER_CMD" kill-node "$CLUSTER" node4 >/dev/null
wait_until 60 "the batch script to go on" grep -q "^srun exit" job.out
cat job.out
assert_contains job.out "give_up: run $job\.0-[0-9a-f]{8} was relaunched 2 times within attempt_window=86400 s \(max_attempts=2\), none of them running healthy_after=1800 s; the failed node left the job" "srun's message"
assert_contains job.out "^srun exit 75$" "srun's exit status"
wait_until 30 "the job to end" job_ended
assert_eq "$(job_field JobState)" COMPLETED "the job's state"
assert_eq "$(job_field Restarts)" 0 "the job's restart count"
# The plugin's MASTER_PORT (none was set) follows the attempt: 29500 +
# (job % 1000) * 8 + attempt.
for attempt in 0 1 2; do
  assert_eq "$(grep -c "attempt=$attempt .* master=[0-9.]*:$((29500 + job % 1000 * 8 + attempt)) " step.out)" 4 \
    "tasks of attempt $attempt in step.out, with the attempt's MASTER_PORT"
done
note "ok"
