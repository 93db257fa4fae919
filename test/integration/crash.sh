#!/usr/bin/env bash
# A protected step that fails (a task exits 1) with no node at fault: the
# controller asks the step's node agents for their quick checks before the
# verdict (failure_check=quick). The checker is auto-resume-healthcheck's
# GPU check with nvidia-smi replaced by stubs that print the unit tests'
# fixtures:
#  1. every GPU healthy: srun says it waits for the checks, then no_fault,
#     and srun exits 1, the step's own status;
#  2. node3's GPU fallen off the bus: node3 is taken out and replaced by the
#     idle node5, and the step relaunched in place runs to its end; the job
#     is never requeued.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"
: "${AR_HEALTHCHECK:?set AR_HEALTHCHECK to the built auto-resume-healthcheck}"

cluster_up --nodes 5
CONTROLLER_CONF=$'end_window=1\nfailure_check_timeout=20' controller_up
cd "$WORK" || exit
make_nvidia_smi_stubs
# The checker the agents run (--node NODE): NODE's GPUs as
# $WORK/gpu-NODE says (healthy-2 without it).
cat >quick-check <<SCRIPT
#!/bin/bash
state=\$(cat $(printf %q "$WORK")/gpu-\$2 2>/dev/null || echo healthy-2)
exec $(printf %q "$AR_HEALTHCHECK") "\$@" --check gpu --gpus 2 --nvidia-smi $(printf %q "$WORK")/nvidia-smi-\$state
SCRIPT
chmod +x quick-check
AGENT_ARGS=(--failure-check "$WORK/quick-check")
agents_up node1 node2 node3 node4 node5
wait_until 20 "heartbeats from all five nodes" heard 5
# The step: rank 2 fails in attempt 0; every rank ends well in attempt 1.
cat >step.sh <<'SCRIPT'
#!/bin/bash
echo "attempt=$AUTO_RESUME_ATTEMPT rank=$SLURM_PROCID node=$SLURMD_NODENAME"
sleep 1
if [[ $AUTO_RESUME_ATTEMPT == 0 && $SLURM_PROCID == 2 ]]; then echo "rank 2 fails"; exit 1; fi
sleep 1
SCRIPT
chmod +x step.sh
job_state() { scontrol -o show job "$1" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
ended() { [[ $(job_state "$1") =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL)$ ]]; }

# 1. Healthy GPUs: the step's own failure.
healthy=$(sbatch --parsable -N4 -w node[1-4] -o healthy.out --wrap \
  "srun --auto-resume=1 $WORK/step.sh; echo srun exit \$?")
wait_until 60 "the healthy job to end" ended "$healthy"
cat healthy.out
assert_contains healthy.out "waiting: checking node\[1-4\] after the step failed \(failure_check\)" "srun's wait"
assert_contains healthy.out "^srun exit 1$" "the healthy job's output"
assert_not_contains healthy.out "attempt=1" "the healthy job's output (no relaunch)"
"$AR_CLI" events >events.out
assert_contains events.out "job $healthy [^ ]+ no_fault: no node of the step failed; quick checks after the step failed: passed on node\[1-4\]; srun keeps the step's own exit status" "the no_fault"
assert_contains events.out "job $healthy [^ ]+ checked: quick checks after the step failed: passed on node\[1-4\]" "the checked event"
[[ $(sinfo -h -N -t fail,down,drain -o %N) == "" ]] || fail "a node was marked: $(sinfo -N)"

# 2. node3's GPU lost: replaced, and the step relaunched.
echo lost-gpu >gpu-node3
lost=$(sbatch --parsable -N4 -w node[1-4] -o lost.out --wrap \
  "srun --auto-resume=1 $WORK/step.sh; echo srun exit \$?")
wait_until 90 "the lost-GPU job to end" ended "$lost"
cat lost.out
[[ $(job_state "$lost") == COMPLETED ]] || fail "job $lost ended $(job_state "$lost")"
[[ $(scontrol -o show job "$lost") == *" Restarts=0 "* ]] || fail "job $lost was requeued"
assert_contains lost.out "^srun exit 0$" "the lost-GPU job's output"
assert_contains lost.out "attempt=1 rank=[0-9] node=node5" "attempt 1 on the replacement node5"
assert_not_contains lost.out "attempt=1 rank=[0-9] node=node3" "the lost-GPU job's output"
"$AR_CLI" events >events.out
assert_contains events.out "job $lost [^ ]+ detected: step $lost\.0 attempt 0: node3: a health check failed: (quick check after the step failed: gpu: fail|Action:Replace gpu): GPU 00000000:2A:00\.0 is not readable" "the fault"
assert_contains events.out "job $lost [^ ]+ check_failed: quick checks after the step failed: failed on node3: (gpu: fail|Action:Replace gpu): GPU 00000000:2A:00\.0 is not readable" "the check_failed event"
assert_contains events.out "job $lost [^ ]+ relaunch: relaunching run $lost\.0-[0-9a-f]+ as attempt 1 on node\[1-2,4-5\]" "the relaunch"
