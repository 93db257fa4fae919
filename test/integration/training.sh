#!/usr/bin/env bash
# The training example for real: examples/train_auto_resume.sh runs a PyTorch
# DDP training (examples/train.py, gloo, one torchrun per node) over the 2
# nodes of an sbatch job under srun --auto-resume=1; a second job on the same
# checkpoint folder resumes from its last checkpoint instead of step 0. The
# second job's srun is a plain one, so the script's own way of finding the
# nodes and the master's address (the live allocation, NodeAddr) is tested
# whatever the plugin puts in the tasks' environment; that job also checks
# that ranks follow NODE_LIST's order. Each torch run takes a few seconds.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

[[ -x /usr/bin/torchrun ]] || fail "no /usr/bin/torchrun: install python3-torch (scripts/bootstrap does)"

cluster_up --nodes 2
controller_up
cd "$WORK" || exit
mkdir tmp
ckpt=$WORK/checkpoints
entry=$AR_SOURCE_DIR/examples/train_auto_resume.sh

# job_ended JOB: the job left the queue (for good: not COMPLETING).
job_state() { scontrol -o show job "$1" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
job_ended() { [[ $(job_state "$1") =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED)$ ]]; }
# run_job NAME CMD...: an sbatch job of 2 nodes, one task per node, that runs
# CMD (output in NAME.out); waits for it and checks it completed, in place.
# torchrun's logs (under TMPDIR) stay under $WORK; the rendezvous port is a
# free one, as other tests' clusters may run meanwhile.
run_job() {
  local name=$1 job
  shift
  job=$(TMPDIR=$WORK/tmp MASTER_PORT=$(free_port) sbatch --parsable -N2 --ntasks-per-node=1 \
        --exclusive -o "$name.out" --wrap "$(printf '%q ' "$@")") || fail "sbatch of $name failed"
  # Generous: importing torch alone takes about a second on 2 cores.
  wait_until 150 "job $job ($name) to end" job_ended "$job"
  [[ $(job_state "$job") == COMPLETED ]] ||
    { cat "$name.out" >&2; fail "job $job ($name) ended $(job_state "$job"), not COMPLETED"; }
  [[ $(scontrol -o show job "$job") == *" Restarts=0 "* ]] || fail "job $job ($name) was requeued"
}

start=$SECONDS
run_job first srun --auto-resume=1 "$entry" --steps 10 --checkpoint-every 5 --checkpoint-dir "$ckpt"
note "10 steps on 2 nodes: $((SECONDS - start)) s"
assert_not_contains first.out "protection is OFF" "the first job's output"
assert_contains first.out "^world size 2, master 127\.0\.0\.11:[0-9]+, attempt 0(, nodes node1,node2)?$" "the first job's output"
assert_contains first.out "^starting from step 0$" "the first job's output"
assert_contains first.out "^step 5 loss [0-9.]+$" "the first job's output"
assert_contains first.out "^training done at step 10$" "the first job's output"
assert_not_contains first.out "^resumed from" "the first job's output"
[[ -f $ckpt/checkpoint.pt ]] || fail "no checkpoint in $ckpt: $(ls -la "$ckpt")"
assert_eq "$(find "$ckpt" -name '*.tmp' | wc -l)" 0 "temporary checkpoint files left"

# The second job: first, with torchrun replaced by echo (only its command
# line matters), the ranks follow NODE_LIST's order, its first node hosting
# the master, as after a relaunch whose new node sorts first; without
# NODE_LIST an inherited MASTER_ADDR is not trusted. Then the real training,
# with a plain srun, resumes from the first job's checkpoint.
q_entry=$(printf %q "$entry") q_ckpt=$(printf %q "$ckpt")
cat >second.sh <<SCRIPT
#!/bin/bash
set -euo pipefail
TORCHRUN=/bin/echo NODE_LIST=node2,node1 MASTER_ADDR=127.0.0.12 srun -l $q_entry --steps 1 | sort >reordered.out
TORCHRUN=/bin/echo MASTER_ADDR=10.9.9.9 srun -l $q_entry --steps 1 | sort >inherited.out
srun $q_entry --steps 20 --checkpoint-every 5 --checkpoint-dir $q_ckpt
SCRIPT
start=$SECONDS
run_job second bash second.sh
note "resumed at step 10 and ran to 20: $((SECONDS - start)) s"
assert_contains reordered.out "^0: --nnodes=2 --nproc_per_node=1 --node_rank=1 --master_addr=127\.0\.0\.12 " "node1's torchrun with NODE_LIST=node2,node1"
assert_contains reordered.out "^1: --nnodes=2 --nproc_per_node=1 --node_rank=0 --master_addr=127\.0\.0\.12 " "node2's torchrun with NODE_LIST=node2,node1"
assert_contains inherited.out "^1: --nnodes=2 --nproc_per_node=1 --node_rank=1 --master_addr=127\.0\.0\.11 " "node2's torchrun with a stale MASTER_ADDR"
assert_contains second.out "nodes from squeue \(job [0-9]+\): node1 node2\), master 127\.0\.0\.11:" "the second job's output"
assert_contains second.out "^world size 2, master 127\.0\.0\.11:[0-9]+$" "the second job's output"
assert_contains second.out "^resumed from step 10$" "the second job's output"
assert_not_contains second.out "^starting from step 0" "the second job's output"
assert_not_contains second.out "^step (5|10) loss" "the second job's output"
assert_contains second.out "^step 15 loss [0-9.]+$" "the second job's output"
assert_contains second.out "^training done at step 20$" "the second job's output"
assert_eq "$(grep -c "^resumed from step" second.out)" 1 "lines saying where training resumed"
note "ok"
