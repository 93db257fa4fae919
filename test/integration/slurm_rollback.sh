#!/usr/bin/env bash
# slurmctld SIGKILLed right after a node of a protected step died, and back
# from a state it saved before that node joined the job. slurmctld saves its
# state in the background, at most every few seconds, and not at all for a
# new step: on a loaded machine a SIGKILL once brought it back without the
# running step, without the merge that brought the node into the job, and
# without a job submitted since. The job then no longer holds the dead node,
# which slurmctld does not yet know to be dead: that is no node "released
# healthy" (no_fault, which ended srun), but a fault once its probes go
# unanswered, and the step resumes, in place, on the nodes the job holds.
# The rolled-back slurmctld no longer lists attempt 1's step, so its cancel
# reached none of its tasks, and it hands attempt 2 the same step id: the
# controller refuses that id (step_reused) and cancels it, which ends
# attempt 1's tasks on the nodes that still ran them, and srun starts
# attempt 2 again under a new id (a launch under the old id met them: slurmd
# killed both, or ran the new one beside them).
# The rolled-back state is the one slurmctld saved while the first attempt
# ran, put back between the SIGKILL and the start. Then slurmctld goes back
# to it once more, with no node fault: the running step is unknown to it,
# but its srun asks for its verdict, and the step is not written off.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

cluster_up --nodes 4 --accounting
cd "$WORK" || exit
controller_up

make_finish_job

# resumed ATTEMPT: attempt ATTEMPT runs on the job's 3 nodes and makes
# progress, in the same job, never requeued.
resumed() {
  wait_until 60 "attempt $1 on 3 nodes" started "$1" 3
  wait_until 30 "attempt $1 to make progress" past $(($(checkpoint) + 2))
  assert_eq "$(job_field JobState)" RUNNING "the job's state after attempt $1 started"
  assert_eq "$(job_field Restarts)" 0 "the job's restart count after attempt $1 started"
}
state=$CLUSTER/state
saved_since() { (($(stat -c %Y "$state/job_state") > $1)); }
# attempt_tasks N: how many of the step's tasks of attempt N run (their
# AUTO_RESUME_ATTEMPT; this test's by their command line).
attempt_tasks() {
  local pid count=0
  local -A step_pids=()
  for pid in $(pgrep -f "$WORK/step.sh"); do step_pids[$pid]=1; done
  for pid in $(environ_pids -F "AUTO_RESUME_ATTEMPT=$1"); do
    [[ -z ${step_pids[$pid]:-} ]] || count=$((count + 1))
  done
  echo "$count"
}
no_tasks_of() { (($(attempt_tasks "$1") == 0)); }

job=$(sbatch --parsable -N3 -w 'node[1-3]' -o job.out job.sh)
wait_until 60 "attempt 0 on 3 nodes" started 0 3
wait_until 30 "attempt 0 to make progress" past 3
# slurmctld's saved state with the job on node[1-3]: a change to the job
# makes it save within seconds (a new step would not).
since=$(date +%s)
scontrol update jobid="$job" Comment=saved
wait_until 30 "slurmctld to save its state" saved_since "$since"
cp -a "$state" "$WORK/saved-state"

# node3 dies: node4 (idle) replaces it, and the provider restarts node3.
"$CLUSTER_CMD" kill-node "$CLUSTER" node3 >/dev/null
resumed 1
assert_eq "$(job_field NodeList)" "node[1-2,4]" "the job's nodes after the first repair"
node3_back() { node_is node3 idle; }
wait_until 60 "node3 to be back" node3_back

# rollback: SIGKILL slurmctld and start it from the state saved while the
# job was on node[1-3] and ran its first attempt.
rollback() {
  local ctld
  ctld=$(<"$CLUSTER/run/slurmctld.pid")
  kill -KILL "$ctld"
  ctld_gone() { ! kill -0 "$ctld" 2>/dev/null; }
  wait_until 10 "slurmctld to die" ctld_gone
  rm -rf "$state"
  cp -a "$WORK/saved-state" "$state"
  "$CLUSTER_CMD" restart-slurmctld "$CLUSTER" --wait --timeout 60 >/dev/null
  assert_eq "$(job_field NodeList)" "node[1-3]" "the job's nodes as slurmctld saved them"
}

# node4 dies, and slurmctld is SIGKILLed before the controller sees it, and
# comes back without node4 in the job and without the running step.
# slurmctld is stopped first: the controller changes nothing in Slurm while
# it does not answer, so it cannot take node4 out before the rollback
# (kill-node took 5 s to return under the sanitizer run's load, and the
# controller's probes had found node4 dead by then).
kill -STOP "$(<"$CLUSTER/run/slurmctld.pid")"
"$CLUSTER_CMD" kill-node "$CLUSTER" node4 >/dev/null
rollback
note "slurmctld back from a state saved before node4 joined the job"
resumed 2
assert_eq "$(job_events no_fault)" 0 "no_fault verdicts before the end"
"$AR_CLI" events >events.txt
assert_contains events.txt "job $job [^ ]* detected: step [0-9.]* attempt 1: node4: " \
  "the fault found after the restart"
assert_contains events.txt \
  "job $job [^ ]* step_reused: slurmctld gave attempt 2 of run [^ ]* the step id $job.1, no newer than attempt 1's step $job.1" \
  "the reused step id"
assert_contains job.out "starting srun again for attempt 2 of run" "the batch script's output"
wait_until 30 "attempt 1's tasks to end" no_tasks_of 1
assert_eq "$(attempt_tasks 2)" 3 "tasks of attempt 2 running"

# slurmctld SIGKILLed again, back from the same state: no node fails, but
# the running step (attempt 2) is unknown to slurmctld. Its srun asks for
# its verdict every second: the step runs on past the 15 s after which a
# step Slurm forgot, whose srun does not ask, is written off.
rollback
note "slurmctld back from the same state: attempt 2 unknown to it"
wait_until 60 "attempt 2 to run on for 20 s" past $(($(checkpoint) + 80))
assert_eq "$(job_events cancelled)" 0 "cancelled verdicts"
assert_eq "$(job_field JobState)" RUNNING "the job's state after the second restart"

touch finish
wait_until 60 "the job to end" job_ended
cat job.out
assert_eq "$(job_field JobState)" COMPLETED "the job's state"
assert_eq "$(job_field Restarts)" 0 "the job's restart count"
assert_contains job.out "^srun exit 0$" "the batch script's output"
for attempt in 0 1 2; do
  assert_eq "$(grep -c "attempt=$attempt " step.out)" 3 "tasks of attempt $attempt in step.out"
done
"$AR_CLI" events >events.txt
assert_eq "$(grep -c "job $job [^ ]* relaunch: " events.txt)" 2 "relaunches of the job"
note "ok"
