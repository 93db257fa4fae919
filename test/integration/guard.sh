#!/usr/bin/env bash
# The guard rails on a real cluster (docs/guard.md). With mode=observe, a
# node killed under a protected step of a --no-kill job is said once as
# what the controller would do (a `would` event, an "observe: would" log
# line) and nothing is done: the controller marks no node, shrinks and
# requeues nothing, relaunches nothing; srun ends with the step's own status
# (no_fault). Then acting: `auto-resume pause` holds across a restart of the
# controller, `status` says so, and `unpause` lifts it.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

cluster_up --nodes 4 --slurmd-timeout 6 --message-timeout 3
cd "$WORK" || exit
CONTROLLER_CONF=$'mode=observe\nend_window=2' controller_up
make_training_step
make_training_job 400

# 1. Observe: node3 killed under the step.
job=$(sbatch --parsable --no-kill -N4 -o job.out job.sh)
wait_until 60 "the step to start" started 0
wait_until 30 "the step to reach step 3" past 3
"$CLUSTER_CMD" kill-node "$CLUSTER" node3 >/dev/null
would() { "$AR_CLI" events | grep -qE "job $job [^ ]+ would: observe: would mark node3 FAIL"; }
wait_until 30 "the would event" would
wait_until 120 "the batch script to go on" grep -q "^srun exit" job.out
cat job.out
"$AR_CLI" events >events.txt
assert_eq "$(grep -cE "job $job [^ ]+ would: " events.txt)" 1 "would events of the job (once per fault)"
assert_contains events.txt "job $job [^ ]+ would: observe: would mark node3 FAIL, shrink job $job to node\[1-2,4\], cancel step $job\.0 and relaunch run [^ ]+ as attempt 1" "the would event"
assert_contains events.txt "job $job [^ ]+ no_fault: the controller did not act \(observe\)" "the verdict"
for kind in detected node_out relaunch requeued; do
  if grep -qE "job $job [^ ]+ $kind: " events.txt; then fail "the controller acted in observe mode: $(grep " $kind: " events.txt)"; fi
done
assert_contains "$WORK/controller.log" "info: observe: would mark node3 FAIL" "the controller's log"
if grep -q "srun exit 0" job.out; then fail "srun's step survived a killed node: $(cat job.out)"; fi
reason=$(scontrol -o show node node3 | grep -o ' Reason=.*' || true)
[[ $reason != *auto-resume* ]] || fail "the controller marked node3 in observe mode:$reason"
assert_eq "$(job_field Restarts)" 0 "the job's restart count (no requeue)"
note "observe: node3 killed, said once, nothing done ($(grep -o 'srun exit [0-9]*' job.out))"

# 2. Acting: a pause holds across a restart, and unpause lifts it.
controller_down
CONTROLLER_CONF='' controller_up
"$AR_CLI" pause --reason "kernel upgrade" >pause.txt
assert_contains pause.txt "^paused by uid 0 \(kernel upgrade\): the controller acts on nothing" "pause"
controller_down
controller_up
"$AR_CLI" status >status.txt
assert_contains status.txt "^controller: mode act, paused by uid 0 since [^ ]+: kernel upgrade, circuit breaker closed" "status after a restart"
"$AR_CLI" unpause >unpause.txt
assert_contains unpause.txt "^unpaused by uid 0: the controller acts again" "unpause"
"$AR_CLI" --json status >status.json
assert_contains status.json '"paused": false' "status once unpaused"
"$AR_CLI" resume-actions >resume.txt
assert_contains resume.txt "^the circuit breaker is not tripped" "resume-actions with nothing tripped"
echo "ok"
