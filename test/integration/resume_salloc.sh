#!/usr/bin/env bash
# The real training example under salloc: examples/train_auto_resume.sh (one
# torchrun per node, PyTorch DDP over gloo) runs as `srun --auto-resume=1`
# inside a 3-node salloc allocation on a 4-node cluster, and the first node,
# which hosts the rendezvous master, is killed mid-training. The controller
# replaces it with the idle node4, so the relaunch's first node and master
# address change: the training must rendezvous at the new master
# (MASTER_ADDR is the live first node's NodeAddr) and resume from its last
# checkpoint, and salloc's srun ends with the training's own status. The
# srun names its nodes (-w 'node[1-3]', the dead node1 among them): the
# relaunch drops that list, which Slurm would refuse, and keeps the step's
# 3 nodes.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

[[ -x /usr/bin/torchrun ]] || fail "no /usr/bin/torchrun: install python3-torch (scripts/bootstrap does)"

cluster_up --nodes 4
controller_up
cd "$WORK" || exit
mkdir tmp
ckpt=$WORK/checkpoints
entry=$AR_SOURCE_DIR/examples/train_auto_resume.sh

TMPDIR=$WORK/tmp salloc -N3 -w 'node[1-3]' --exclusive \
  srun --auto-resume=1 -w 'node[1-3]' --ntasks-per-node=1 "$entry" \
  --steps 40 --checkpoint-every 2 --step-seconds 0.25 --checkpoint-dir "$ckpt" >salloc.out 2>&1 &
salloc_pid=$!
# shellcheck disable=SC2016 # expanded when the test ends
on_exit 'kill "$salloc_pid" 2>/dev/null'

# Generous: starting torch on 3 nodes takes several seconds on 2 cores.
wait_until 120 "training to pass step 4" grep -qE "^step ([4-9]|[1-9][0-9]) loss" salloc.out
"$CLUSTER_CMD" kill-node "$CLUSTER" node1 >/dev/null
killed=$SECONDS
salloc_done() { ! kill -0 "$salloc_pid" 2>/dev/null; }
wait_until 150 "salloc to end" salloc_done
rc=0
wait "$salloc_pid" || rc=$?
note "node1 killed; training finished $((SECONDS - killed)) s later"
cat salloc.out
assert_eq "$rc" 0 "salloc's exit status (its srun's)"
assert_contains salloc.out "relaunching step [0-9]+\.0 of run [0-9]+\.0-[0-9a-f]{8} as attempt 1 on node\[2-4\]" "srun's stderr"
assert_contains salloc.out "the relaunch runs without -w node\[1-3\]: srun's node options name the earlier allocation" "srun's stderr"
assert_contains salloc.out "^world size 3, master 127\.0\.0\.11:[0-9]+, attempt 0, nodes node1,node2,node3$" "attempt 0's rendezvous"
assert_contains salloc.out "^world size 3, master 127\.0\.0\.12:[0-9]+, attempt 1, nodes node2,node3,node4$" "attempt 1's rendezvous at the new first node"
assert_contains salloc.out "^resumed from step ([2-9]|[1-9][0-9])$" "attempt 1 resuming from a checkpoint"
assert_contains salloc.out "^training done at step 40$" "the training's end"
assert_eq "$(grep -c "^starting from step 0$" salloc.out)" 1 "fresh starts"
"$AR_CLI" events >events.txt
assert_contains events.txt "replaced: node4 \(instance [0-9]+\) joins job " "the controller's events"
assert_contains events.txt "detected: step [0-9]+\.0 attempt 0: node1: " "the controller's events"
note "ok"
