#!/usr/bin/env bash
# A protected step whose tasks all exit 0 gets no_fault as soon as srun
# reports its end: each node's step daemon told the controller how its
# tasks exited (tasks_exited) before srun heard of it, so the controller
# need not wait end_window for a node at fault. A step one task of which
# failed still waits end_window (no_fault, srun keeps the step's status).
# A node killed while its task still runs (about a second before the step
# would have ended well: the task on the other node exited 0) never
# reports: the step is relaunched as before, and its attempt 1, ending
# well on every node, is decided at once.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

cluster_up --nodes 3
CONTROLLER_CONF=$'end_window=5\nbackoff=1' controller_up
cd "$WORK" || exit
# run_of JOB STEP: the events' pattern for the run id of JOB.STEP.
run_of() { echo "$1\.$2-[0-9a-f]{8}"; }

# 1. srun -N2 true: no end_window; a failing task: end_window as before.
cat >clean.sh <<'SCRIPT'
#!/bin/bash
srun -N2 --auto-resume=1 true; echo "clean $?"
srun -N2 --auto-resume=1 bash -c 'exit $SLURM_NODEID'; echo "one failed $?"
SCRIPT
job=$(sbatch --parsable -N2 -w 'node[1-2]' -o clean.out clean.sh)
wait_until 60 "the clean job to end" job_ended
cat clean.out
assert_contains clean.out "^clean 0$" "clean.out"
assert_contains clean.out "^one failed 1$" "clean.out"
"$AR_CLI" events >events.txt
assert_contains events.txt "job $job $(run_of "$job" 0) no_fault: every node of step $job\.0 \(2 nodes\) reported its tasks exited 0; srun keeps the step's own exit status" "the clean step's verdict"
assert_contains events.txt "job $job $(run_of "$job" 1) no_fault: no node of the step failed; srun keeps the step's own exit status" "the failed step's verdict (after end_window)"

# 2. node2 is killed while its task waits (it would exit 0 once released),
# after the task on node1 exited 0: node2 never reports, the step is
# relaunched; attempt 1 ends well on both nodes and is decided at once.
cat >killed.sh <<SCRIPT
#!/bin/bash
srun -N2 --auto-resume=1 bash -c '
  if [[ \$SLURM_NODEID == 1 && \$AUTO_RESUME_ATTEMPT == 0 ]]; then
    touch $WORK/late.started
    until [[ -e $WORK/release ]]; do sleep 0.1; done
  fi
  echo "node \$SLURM_NODEID attempt \$AUTO_RESUME_ATTEMPT done"
  [[ \$SLURM_NODEID != 0 ]] || touch $WORK/early.done.\$AUTO_RESUME_ATTEMPT'
echo "killed \$?"
SCRIPT
job=$(sbatch --parsable -N2 -w 'node[1-2]' -o killed.out killed.sh)
wait_until 60 "node2's task to start and node1's to exit 0" \
  test -e late.started -a -e early.done.0
"$CLUSTER_CMD" kill-node "$CLUSTER" node2 >/dev/null
touch release  # too late for node2's task: it was killed
wait_until 90 "the relaunched job to end" job_ended
cat killed.out
assert_contains killed.out "^killed 0$" "killed.out"
assert_contains killed.out "relaunching step $job\.0 of run $(run_of "$job" 0) as attempt 1 on " "srun's stderr"
assert_contains killed.out "^node 0 attempt 0 done$" "killed.out"
assert_not_contains killed.out "^node 1 attempt 0 done$" "killed.out (node2's task was killed)"
"$AR_CLI" events >events.txt
assert_contains events.txt "job $job $(run_of "$job" 0) detected: step $job\.0 attempt 0: node2: " "the killed node's detection"
assert_contains events.txt "job $job $(run_of "$job" 0) relaunch: " "the relaunch"
assert_contains events.txt "job $job $(run_of "$job" 0) no_fault: every node of step $job\.[0-9]+ \(2 nodes\) reported its tasks exited 0" "attempt 1's verdict"
note "ok"
