#!/usr/bin/env bash
# A wide step's resume does not wait for Slurm's record of the old step.
# From 7 nodes on, Slurm 22.05's step daemons send a step's end up a tree:
# the daemon on the step's first node waits 60 s for a dead node's part, and
# slurmctld lists the step as long. A protected 7-node step loses node3: each
# surviving node's step daemon reports that its tasks exited (tasks_exited),
# and the relaunch goes ahead on that, while slurmctld still lists the old
# step (it used to wait the minute out). The job then completes.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

cluster_up --nodes 7
CONTROLLER_CONF=$'backoff=0\nend_window=2' controller_up
cd "$WORK" || exit
make_training_step
make_training_job 80
job=$(sbatch --parsable -N7 -o job.out job.sh)
wait_until 60 "attempt 0 on 7 nodes" started 0 7
"$CLUSTER_CMD" kill-node "$CLUSTER" node3 >/dev/null
# Well within the minute the old record stays.
wait_until 40 "attempt 1 on 7 nodes" started 1 7
scontrol -o show step "$job.0" >old-step.txt 2>&1 ||
  fail "slurmctld no longer lists step $job.0 once attempt 1 runs: $(cat old-step.txt); the test shows nothing"
assert_contains "$WORK/controller.log" \
  "slurmctld still lists step $job.0, but every surviving node reported its tasks exited: relaunching" \
  "the controller's log"
wait_until 90 "the job to end" job_ended
assert_eq "$(job_field JobState)" COMPLETED "job state ($(cat job.out))"
assert_contains job.out "^srun exit 0$" "the batch script's output"
controller_down
note "ok"
