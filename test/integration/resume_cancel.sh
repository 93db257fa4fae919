#!/usr/bin/env bash
# Stopping a protected step while its srun waits for the verdict: scancel of
# a salloc job and of a batch job, and Ctrl-C (SIGINT) on the srun. Nothing is
# relaunched, srun ends, and the controller records the step as cancelled.
# A long end_window keeps each srun waiting after its step ended with a
# failed task (`false`: a step whose tasks all exited 0 is decided at once,
# without end_window, and leaves nothing to stop). Also: a
# protected srun SIGKILLed mid-step is written off once Slurm forgets its
# step, so the job's next srun is protected again; a heterogeneous job is
# refused with the reason.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

cluster_up --nodes 2
CONTROLLER_CONF='end_window=120' controller_up
cd "$WORK" || exit

waiting() { grep -q "waiting for the controller's verdict" "$1" 2>/dev/null; }
gone() { ! kill -0 "$1" 2>/dev/null; }
# verdict_of JOB: the verdict of the job's first protected step.
verdict_of() {
  "$AR_CLI" status --job "$1" --json |
    python3 -c 'import json,sys; s=json.load(sys.stdin)["steps"]; print(s[-1].get("verdict", "") if s else "")'
}
is_cancelled() { [[ $(verdict_of "$1") == cancelled ]]; }
no_relaunch() {
  "$AR_CLI" events >events.txt
  assert_not_contains events.txt "job $1 [^ ]+ relaunch: " "the controller's events"
  assert_not_contains "$2" "auto_resume: relaunching" "$2"
}

# 1. salloc: scancel does not kill the srun; the controller answers cancelled.
salloc -N2 srun --auto-resume=1 false >salloc.out 2>&1 &
pid=$!
wait_until 60 "salloc's srun to wait for its verdict" waiting salloc.out
job=$(squeue -h -o %i | head -n 1)
scancel "$job"
wait_until 60 "salloc to end" gone "$pid"
wait_until 30 "the controller to record job $job as cancelled" is_cancelled "$job"
cat salloc.out
no_relaunch "$job" salloc.out

# 2. sbatch: scancel ends the batch script and its srun.
cat >batch.sh <<'SCRIPT'
#!/bin/bash
srun --auto-resume=1 false
echo "srun exit $?"
SCRIPT
job=$(sbatch --parsable -N2 -o batch.out batch.sh)
wait_until 60 "the batch job's srun to wait for its verdict" waiting batch.out
scancel "$job"
wait_until 60 "the batch job to end" job_ended
wait_until 30 "the controller to record job $job as cancelled" is_cancelled "$job"
cat batch.out
assert_eq "$(job_field JobState)" CANCELLED "the batch job's state"
no_relaunch "$job" batch.out

# 3. Ctrl-C on the waiting srun: it tells the controller and exits 130.
salloc -N2 bash -c 'srun --auto-resume=1 false & echo $! >srun.pid; wait $!; echo "srun exit $?"' \
  >sigint.out 2>&1 &
pid=$!
wait_until 60 "the srun to wait for its verdict" waiting sigint.out
job=$(squeue -h -o %i | head -n 1)
kill -INT "$(cat srun.pid)"
wait_until 60 "salloc to end" gone "$pid"
cat sigint.out
assert_contains sigint.out "auto_resume: srun got SIGINT while waiting for the verdict: not relaunching step $job\.0" "srun's message"
assert_contains sigint.out "^srun exit 130$" "srun's exit status"
assert_eq "$(verdict_of "$job")" cancelled "the controller's verdict"
no_relaunch "$job" sigint.out

# 4. A protected srun SIGKILLed: once the controller has written its step
# off, the next protected srun in the job is accepted (and, like every srun
# here, waits out the long end_window: scancel ends it).
salloc -N2 bash -c 'srun --auto-resume=1 sleep 300 & echo $! >srun.pid; wait
                    until [[ -f go ]]; do sleep 0.1; done
                    srun --auto-resume=1 false 2>next.err' >killed.out 2>&1 &
pid=$!
wait_until 60 "the first step to run" tasks_are 2 '(/usr/bin/)?sleep 300'
job=$(squeue -h -o %i | head -n 1)
kill -KILL "$(cat srun.pid)"
written_off() { "$AR_CLI" events | grep -q "job $job [^ ]* cancelled: step $job\.0 is gone and its srun never asked for a verdict"; }
wait_until 60 "the controller to write the killed srun's step off" written_off
touch go
wait_until 60 "the next srun to wait for its verdict" waiting next.err
scancel "$job"
wait_until 60 "salloc to end" gone "$pid"
cat killed.out next.err
assert_not_contains next.err "protection is OFF" "the next srun's stderr"

# 5. A heterogeneous job cannot be repaired: said, and the step runs.
salloc -N1 : -N1 srun --auto-resume=1 true >het.out 2>&1 || fail "the heterogeneous job's srun failed: $(cat het.out)"
cat het.out
assert_contains het.out "protection is OFF for step [0-9]+\.0: the controller at [^ ]+ refused it \(bad_request: job [0-9]+ is a heterogeneous job, which auto-resume cannot repair" "srun's warning"
note "ok"
