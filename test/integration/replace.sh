#!/usr/bin/env bash
# Admin replacement, as the seeds describe it, with the local provider
# (restart-node --kill: the same hostname comes back as a new instance):
# - `scontrol update node=X state=fail reason="Action:Replace"` with a job
#   running on X: the job runs to its end untouched, then X is replaced and
#   idle again;
# - `state=down reason="Action:Replace"`: the job on X is killed first, then
#   X is replaced;
# - `auto-resume replace X --now`: the auto-resume step on X is resumed on
#   another node at once, and X is replaced once the step has left it;
# - `auto-resume replace X --force`: a plain job on X is killed;
# - bad requests name the bad value.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

cluster_up --nodes 4 --accounting
CONTROLLER_CONF='end_window=1' controller_up
cd "$WORK" || exit
replaced() { event_seen "node $1 replaced: $1 is back in service: a new instance"; }
new_instance() { [[ $(slurmd_started "$1") != "$2" ]]; }
job_state() { scontrol -o show job "$1" | grep -o ' JobState=[^ ]*' | cut -d= -f2; }
job_is() { [[ $(job_state "$1") == "$2" ]]; }

# 1. state=fail: the running job finishes first.
before=$(slurmd_started node4)
plain=$(sbatch --parsable -N1 -w node4 -o plain.out --wrap "while [ ! -e $WORK/release ]; do sleep 0.2; done; echo released")
wait_until 30 "the plain job to run" job_is "$plain" RUNNING
scontrol update node=node4 state=fail reason="Action:Replace"
wait_until 20 "the controller to wait for the job" event_seen "node node4 waiting: waiting for the jobs on node4 to end"
job_is "$plain" RUNNING || fail "the job on node4 was interrupted: $(job_state "$plain")"
assert_eq "$(slurmd_started node4)" "$before" "node4's instance while its job runs"
touch release
wait_until 30 "the plain job to complete" job_is "$plain" COMPLETED
assert_contains plain.out "^released$" "the job's output"
wait_until 60 "node4 replaced" replaced node4
wait_until 20 "node4 idle" node_is node4 idle
new_instance node4 "$before" || fail "node4 was not replaced: same slurmd start time"
"$AR_CLI" events >events.txt
assert_contains events.txt "node node4 replace_requested: node4 is FAIL \(Action:Replace\): the local provider replaces it once no job runs on it" "the request"
assert_contains events.txt "node node4 provider: asking the local provider to replace node4 \(try 1 of 3\)" "the provider call"

# 2. state=down: the job on the node is killed first.
before=$(slurmd_started node4)
doomed=$(sbatch --parsable --no-requeue -N1 -w node4 --wrap "sleep 300")
wait_until 30 "the doomed job to run" job_is "$doomed" RUNNING
scontrol update node=node4 state=down reason="Action:Replace"
wait_until 30 "the doomed job to be killed" job_ended_id "$doomed"
wait_until 60 "node4 replaced again" event_seen "node node4 replaced: .*started at $(true)"
wait_until 20 "node4 idle again" node_is node4 idle
new_instance node4 "$before" || fail "node4 was not replaced after state=down"

# 3. auto-resume replace --now: the auto-resume step moves at once.
make_training_step
make_training_job 400
job=$(sbatch --parsable -N3 -w node[1-3] -o job.out job.sh)
wait_until 60 "attempt 0 on 3 nodes" started 0 3
wait_until 30 "attempt 0 to reach step 3" past 3
before=$(slurmd_started node2)
"$AR_CLI" replace node2 --now >replace.out
assert_contains replace.out "^node2 marked FAIL with reason 'Action:Replace admin: replacement requested \(--now\)': protected steps on it are resumed elsewhere now" "the CLI's answer"
wait_until 30 "attempt 1 on 3 nodes" started 1 3
assert_contains step.out "^0: attempt=1 .* nodes=node1,node3,node4 " "attempt 1's nodes (node2 out, node4 in)"
wait_until 60 "node2 replaced" replaced node2
new_instance node2 "$before" || fail "node2 was not replaced"
wait_until 20 "node2 idle" node_is node2 idle

# 4. --force: a plain job on the node is killed, then the node is replaced.
before=$(slurmd_started node2)
other=$(sbatch --parsable --no-requeue -N1 -w node2 --wrap "sleep 300")
wait_until 30 "the other job to run" job_is "$other" RUNNING
"$AR_CLI" replace node2 --force >force.out
assert_contains force.out "other jobs are killed" "the CLI's answer to --force"
wait_until 30 "the other job to be killed" job_ended_id "$other"
wait_until 60 "node2 replaced again" event_seen "node node2 forced: node2 set DOWN"
wait_until 60 "node2 back" node_is node2 idle
new_instance node2 "$before" || fail "node2 was not replaced after --force"
job_is "$job" RUNNING || fail "the auto-resume job was hit by the other job's --force: $(job_state "$job")"

# 5. Bad requests.
rc=0
"$AR_CLI" replace node9 2>bad.err || rc=$?
assert_eq "$rc" 1 "replace of an unknown node"
assert_contains bad.err "refused replace: bad_request: slurmctld does not know node 'node9'" "the error"
rc=0
"$AR_CLI" replace 'node1;reboot' 2>bad.err || rc=$?
assert_eq "$rc" 1 "replace of a bad node name"
assert_contains bad.err "'node1;reboot' is not a node name" "the error"
rc=0
"$AR_CLI" replace node1 --now --force 2>bad.err || rc=$?
((rc != 0)) || fail "--now with --force was taken"
assert_contains bad.err "--now excludes --force" "the error"

scancel "$job"
job_ended_by() { job_ended_id "$job"; }
wait_until 60 "the auto-resume job to end" job_ended_by
note "ok"
