#!/usr/bin/env bash
# The health checks on a real cluster (nodes with a GPU GRES, nvidia-smi
# replaced by stubs that print output written by hand): healthy GPUs pass
# and leave the node alone; a missing tool fails; the CPU stress check
# passes on this machine in a short run; and a failing check on a node under
# a running auto-resume step marks it FAIL with "Action:Replace gpu: ...",
# and the controller relaunches the step without that node at once.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"
: "${AR_HEALTHCHECK:?set AR_HEALTHCHECK to the built auto-resume-healthcheck}"

cluster_up --nodes 5 --gpus 1
CONTROLLER_CONF='end_window=1' controller_up
cd "$WORK" || exit
make_nvidia_smi_stubs
make_training_step
make_training_job 40

job=$(sbatch --parsable -N4 -o job.out job.sh)
wait_until 60 "attempt 0 on 4 nodes" started 0
wait_until 30 "attempt 0 to reach step 3" past 3

# Healthy GPUs: pass, nothing marked.
"$AR_HEALTHCHECK" --node node2 --nvidia-smi "$WORK/nvidia-smi-healthy-2" --gpus 2 >healthy.out ||
  fail "the check failed on healthy GPUs: $(cat healthy.out)"
assert_contains healthy.out "^gpu: pass: 2 GPUs healthy \(NVIDIA H100 80GB HBM3, driver 535\.183\.01\)$" "the healthy check"
[[ $(node_state node2) != *fail* ]] || fail "node2 was marked: $(node_state node2)"

# A GPU node without its tool fails (here without marking: --dry-run).
rc=0
"$AR_HEALTHCHECK" --node node2 --nvidia-smi "$WORK/no-such-nvidia-smi" --dry-run >missing.out || rc=$?
assert_eq "$rc" 1 "the check's exit status without nvidia-smi"
assert_contains missing.out "^gpu: fail: cannot run $WORK/no-such-nvidia-smi: " "the missing tool"
assert_contains missing.out "would mark node2 FAIL: Action:Replace gpu: cannot run" "the dry run"

# The CPU stress check (stress-ng), short: passes on the idle node5 and
# records its baseline; a node running jobs is skipped unless on demand.
"$AR_HEALTHCHECK" --node node5 --check cpu --stress-seconds 2 --baseline-file "$WORK/baseline" \
  --record-baseline >cpu.out || fail "the cpu check failed on an idle node: $(cat cpu.out)"
cat cpu.out
assert_contains cpu.out "^cpu: pass: cpu [0-9]+ bogo ops/s \(no baseline recorded\)$" "the cpu check"
assert_contains cpu.out "^cpu: baseline [0-9]+ bogo ops/s written to $WORK/baseline$" "the baseline"
[[ $(cat "$WORK/baseline") =~ ^[0-9.]+$ ]] || fail "baseline file: $(cat "$WORK/baseline")"
"$AR_HEALTHCHECK" --node node1 --check cpu --stress-seconds 1 >busy.out || fail "$(cat busy.out)"
assert_contains busy.out "^cpu: skipped: node1 runs jobs" "the cpu check on a busy node"

# A lost GPU on node3, under the running step: marked, and the step moves.
rc=0
"$AR_HEALTHCHECK" --node node3 --nvidia-smi "$WORK/nvidia-smi-lost-gpu" >lost.out || rc=$?
cat lost.out
assert_eq "$rc" 1 "the check's exit status with a lost GPU (node3's GRES: 1 GPU)"
assert_contains lost.out "^gpu: marked node3 FAIL: Action:Replace gpu: GPU 00000000:2A:00\.0 is not readable \(fallen off the bus\?\)$" "the mark"
wait_until 60 "attempt 1 on 4 nodes" started 1
assert_contains step.out "^0: attempt=1 .* nodes=node1,node2,node4,node5 " "attempt 1's nodes (node3 out, idle node5 in)"
"$AR_CLI" events >events.txt
assert_contains events.txt "job $job [^ ]+ detected: step $job\.0 attempt 0: node3: a health check failed: Action:Replace gpu: GPU 00000000:2A:00\.0 is not readable" "the controller's events"
wait_until 60 "the job to end" job_ended
assert_contains job.out "^srun exit 0$" "the batch script's output"
assert_eq "$(job_field Restarts)" 0 "the job's restart count"
note "ok"
