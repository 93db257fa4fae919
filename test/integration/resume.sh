#!/usr/bin/env bash
# In-place resume on a real cluster: a batch job's `srun --auto-resume=1`
# step (a stand-in training that checkpoints the step it reached) loses a
# node that is not the batch host, is relaunched on a repaired allocation,
# loses another node, is relaunched again, and completes from its
# checkpoints: the job is never requeued, the step's output file keeps every
# attempt's lines, and each attempt's NODE_LIST and MASTER_ADDR match the
# live allocation. Then, in a job flagged with sbatch --auto-resume=1: an
# application failure (exit 3, no node at fault) is not resumed and srun
# exits 3; a step that opted out is not registered at all.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

# Accounting: Slurm 22.05 refuses a second resize of a job without it.
cluster_up --nodes 4 --accounting
CONTROLLER_CONF=$'backoff=1\nend_window=2' controller_up
cd "$WORK" || exit

make_training_step
# The user's own MASTER_PORT is kept across relaunches.
make_training_job 60 'export MASTER_PORT=31234'

# Two tasks per node (8 in all): a replacement node must hold the job's 2
# CPUs per node.

job=$(sbatch --parsable -N4 --ntasks-per-node=2 -o job.out job.sh)
wait_until 60 "attempt 0 on 4 nodes" started 0 8
wait_until 30 "attempt 0 to reach step 5" past 5
[[ $(job_field BatchHost) == node1 ]] || fail "batch host is $(job_field BatchHost), not node1"
"$CLUSTER_CMD" kill-node "$CLUSTER" node3 >/dev/null
killed=$SECONDS
wait_until 60 "attempt 1 on 4 nodes" started 1 8
note "node3 killed: attempt 1 running $((SECONDS - killed)) s later"
first_resume_at=$(checkpoint)
wait_until 30 "attempt 1 to make progress" past $((first_resume_at + 5))
"$CLUSTER_CMD" kill-node "$CLUSTER" node2 >/dev/null
killed=$SECONDS
wait_until 60 "attempt 2 on 4 nodes" started 2 8
note "node2 killed: attempt 2 running $((SECONDS - killed)) s later"
wait_until 60 "the job to end" job_ended

cat job.out step.out
assert_eq "$(job_field JobState)" COMPLETED "job state"
assert_eq "$(job_field Restarts)" 0 "the job's restart count (a requeue is not a resume)"
assert_contains job.out "^srun exit 0$" "the batch script's output"
assert_contains job.out "relaunching step $job\.0 of run $job\.0-[0-9a-f]{8} as attempt 1 on " "srun's stderr"
assert_contains job.out "relaunching step $job\.1 of run $job\.0-[0-9a-f]{8} as attempt 2 on " "srun's stderr"
# Every attempt's lines are in the step's output file (opened in append mode).
for attempt in 0 1 2; do
  assert_eq "$(grep -c "attempt=$attempt " step.out)" 8 "tasks of attempt $attempt in step.out"
done
assert_contains step.out "^[0-9]: done at step 60$" "step.out"
# Each relaunch started from the checkpoint, not from zero.
resumed1=$(grep -o "^0: attempt=1 .* start=[0-9]*" step.out | grep -o '[0-9]*$')
resumed2=$(grep -o "^0: attempt=2 .* start=[0-9]*" step.out | grep -o '[0-9]*$')
((resumed1 >= 5 && resumed2 > resumed1)) || fail "attempts started at steps $resumed1 and $resumed2"
# The last attempt saw the live allocation.
live=$(scontrol show hostnames "$(job_field NodeList)" | paste -sd,)
first=$(scontrol show hostnames "$(job_field NodeList)" | head -n 1)
assert_contains step.out "^0: attempt=2 restarts=0 rank=0 node=[a-z0-9]+ nodes=$live master=$(node_addr "$first"):31234 " "attempt 2's environment"
# sacct keeps a record per resize (documented in docs/resume.md).
sacct -n -X -j "$job" -o State | tr -d ' ' >sacct.txt
assert_eq "$(tail -n 1 sacct.txt)" COMPLETED "sacct's last record of the job"
assert_eq "$(sort -u sacct.txt | paste -sd,)" COMPLETED,RESIZING "sacct's records of the job"

"$AR_CLI" events >events.txt
for kind in detected node_out merged expanded relaunch; do
  assert_contains events.txt "job $job [^ ]+ $kind: " "the controller's events"
done
# No idle node: each failed node came back as a new instance and rejoined.
for node in node3 node2; do
  assert_contains events.txt "node $node provider: asking the local provider to replace $node" "the node keeper's events"
  assert_contains events.txt "node $node replaced: $node is back in service" "the node keeper's events"
done
assert_eq "$(grep -c "job $job [^ ]* relaunch: " events.txt)" 2 "relaunches in the events"
assert_contains events.txt "detected: step $job\.0 attempt 0: node3: " "the first detection"
assert_contains events.txt "detected: step $job\.1 attempt 1: node2: " "the second detection"
assert_contains events.txt "after a backoff of 1 s" "the second relaunch"

# An application failure is not resumed; opted-out steps are not registered;
# a second protected step while one runs is refused, and runs unprotected.
cat >app.sh <<SCRIPT
#!/bin/bash
#SBATCH --auto-resume=1
srun true; echo "plain \$?"
srun --auto-resume=0 true; echo "opted out \$?"
srun bash -c 'exit 3'; echo "failing \$?"
srun -N2 bash -c 'touch $WORK/first.started; sleep 4' &
until [[ -f $WORK/first.started ]]; do sleep 0.1; done
srun -N2 true; echo "second \$?"
wait
SCRIPT
job=$(sbatch --parsable -N4 -o app.out app.sh)
wait_until 60 "the application job to end" job_ended
cat app.out
assert_contains app.out "^plain 0$" "app.out"
assert_contains app.out "^opted out 0$" "app.out"
assert_contains app.out "^failing 3$" "app.out"
assert_contains app.out "^second 0$" "app.out"
assert_contains app.out "auto_resume: warning: auto-resume protection is OFF for step $job\.4: the controller at [^ ]+ refused it \(bad_request: job $job already has a protected step running \($job\.3, run $job\.3-[0-9a-f]{8}\); auto-resume protects one step per job at a time\)" "the refused second step"
assert_not_contains app.out "relaunching" "app.out"
"$AR_CLI" status --job "$job" --json >app-status.json
assert_eq "$(python3 -c 'import json,sys; print(sorted((s["step_id"], s["verdict"]) for s in json.load(sys.stdin)["steps"]))' <app-status.json)" \
  "[(0, 'no_fault'), (2, 'no_fault'), (3, 'no_fault')]" "the application job's protected steps and verdicts"
note "ok"
