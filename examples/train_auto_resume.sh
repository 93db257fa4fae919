#!/bin/bash
# The per-node entrypoint of examples/train.py: srun starts it once per node
# (one task per node), and it execs torchrun with one training process.
#
#   srun --auto-resume=1 examples/train_auto_resume.sh [TRAIN_ARGS...]
#
# TRAIN_ARGS go to train.py (e.g. --steps 100 --checkpoint-every 10).
#
# Where it reads the cluster's shape (see examples/README.md):
#   NODE_LIST    the allocation's hosts, comma-separated (set by the
#                auto-resume plugin for every task, fresh on every relaunch);
#                without it, the live allocation from squeue (never the
#                batch script's SLURM_JOB_NODELIST, which goes stale when the
#                allocation changes).
#   MASTER_ADDR  the address of NODE_LIST's first node (set by the plugin:
#                that node's NodeAddr); without NODE_LIST it is always looked
#                up here, from `scontrol show node` (NodeAddr, not the node
#                name: names need not resolve).
#   MASTER_PORT  the port of the rendezvous on that node; default
#                29500 + SLURM_JOB_ID % 1000.
#   CHECKPOINT_DIR  default of train.py's --checkpoint-dir (a folder all nodes
#                share): $SLURM_SUBMIT_DIR/checkpoints/$SLURM_JOB_ID, so that
#                a relaunch or a requeue of the job resumes, and a new job
#                starts afresh. A --checkpoint-dir in TRAIN_ARGS wins.
#   TORCHRUN_LOG_DIR  where torchrun keeps each rank's stderr.log; default
#                ${TMPDIR:-/tmp}/torchrun-$SLURM_JOB_ID-$SLURMD_NODENAME.
#   TORCHRUN     the torchrun to run; default /usr/bin/torchrun.
#   PYTHON       the Python that checks TRAIN_ARGS before torchrun starts (so
#                a typo gets a usage message, not torchrun's traceback);
#                default /usr/bin/python3.
#
# Ranks follow NODE_LIST, not Slurm's node ids: its first node is node rank 0
# and hosts the rendezvous at MASTER_ADDR:MASTER_PORT, whatever order the
# nodes of a relaunched step come in.
set -euo pipefail

me=train_auto_resume.sh
die() {
  echo "$me${SLURMD_NODENAME:+ on $SLURMD_NODENAME}: $*" >&2
  exit 1
}

[[ -n ${SLURM_JOB_ID:-} && -n ${SLURMD_NODENAME:-} ]] ||
  die "not in a Slurm step (SLURM_JOB_ID or SLURMD_NODENAME unset): run it with srun, one task per node"
node=$SLURMD_NODENAME
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)

# The nodes, in the order that gives the ranks.
if [[ -n ${NODE_LIST:-} ]]; then
  node_list=$NODE_LIST
  from="NODE_LIST"
else
  node_list=$(squeue -h -j "$SLURM_JOB_ID" -o %N) ||
    die "cannot read job $SLURM_JOB_ID's nodes from squeue"
  from="squeue (job $SLURM_JOB_ID)"
fi
nodes=()
[[ -z $node_list ]] || mapfile -t nodes < <(scontrol show hostnames "$node_list")
((${#nodes[@]} > 0)) || die "no nodes in '$node_list' (from $from)"
nnodes=${#nodes[@]}

node_rank=""
for i in "${!nodes[@]}"; do
  [[ ${nodes[i]} != "$node" ]] || { node_rank=$i; break; }
done
[[ -n $node_rank ]] || die "this node is not in the node list '$node_list' (from $from)"

# One task on every node of the allocation, or the rendezvous would wait for
# nodes that never come.
if [[ -n ${SLURM_STEP_NUM_NODES:-} && $SLURM_STEP_NUM_NODES != "$nnodes" ]]; then
  die "this step runs on $SLURM_STEP_NUM_NODES nodes but the allocation has $nnodes ($node_list): run it on all of them (srun without -N/-w)"
fi
if [[ -n ${SLURM_STEP_NUM_TASKS:-} && $SLURM_STEP_NUM_TASKS != "$nnodes" ]]; then
  die "this step runs $SLURM_STEP_NUM_TASKS tasks on $nnodes nodes: run one task per node (srun --ntasks-per-node=1); torchrun starts the training processes"
fi

# The rendezvous: an address of the first node (never its name) and a port.
if [[ -n ${NODE_LIST:-} && -n ${MASTER_ADDR:-} ]]; then
  master_addr=$MASTER_ADDR
else
  info=$(scontrol -o show node "${nodes[0]}") || die "cannot look up node ${nodes[0]} with scontrol"
  [[ $info =~ (^|[[:space:]])NodeAddr=([^[:space:]]+) ]] ||
    die "no NodeAddr for node ${nodes[0]} in: $info"
  master_addr=${BASH_REMATCH[2]}
fi
master_port=${MASTER_PORT:-$((29500 + SLURM_JOB_ID % 1000))}
if ! [[ $master_port =~ ^[1-9][0-9]{0,4}$ ]] || ((master_port > 65535)); then
  die "MASTER_PORT '$master_port' is not a TCP port (1-65535)"
fi

checkpoint_dir=${CHECKPOINT_DIR:-${SLURM_SUBMIT_DIR:-$PWD}/checkpoints/$SLURM_JOB_ID}
log_dir=${TORCHRUN_LOG_DIR:-${TMPDIR:-/tmp}/torchrun-$SLURM_JOB_ID-$node}
mkdir -p "$log_dir" || die "cannot create the torchrun log folder '$log_dir'"
torchrun=${TORCHRUN:-/usr/bin/torchrun}
[[ -x $torchrun ]] || die "no torchrun at '$torchrun' (set TORCHRUN; Debian: apt-get install python3-torch)"
"${PYTHON:-/usr/bin/python3}" "$here/train.py" --check-args --checkpoint-dir "$checkpoint_dir" "$@" ||
  die "bad training arguments: $*"

echo "$me on $node: node rank $node_rank of $nnodes (nodes from $from: ${nodes[*]}), master $master_addr:$master_port, attempt ${AUTO_RESUME_ATTEMPT:-none}, torchrun logs in $log_dir"

# --redirects 2 --tee 2: stderr goes to LOG_DIR and, prefixed with the rank,
# to the step's stderr; stdout passes straight through. (Debian's torchrun
# 1.13 on Python 3.11 crashes at start with redirects 0 or 3, the default 0
# included: "'NoneType' object has no attribute 'get'" in to_map.)
# --monitor_interval 1: torchrun notices its process ended within a second
# (default 5).
# SIGUSR1 (srun --auto-resume-hang-signal=USR1 on a hang) is for the
# training processes, which print their stacks (train.py): torchrun ignores
# it, and goes on copying their stderr to the step's.
trap '' USR1
exec "$torchrun" \
  --nnodes="$nnodes" --nproc_per_node=1 --node_rank="$node_rank" \
  --master_addr="$master_addr" --master_port="$master_port" \
  --rdzv_id="job$SLURM_JOB_ID" --monitor_interval=1 \
  --redirects=2 --tee=2 --log_dir="$log_dir" \
  "$here/train.py" --checkpoint-dir "$checkpoint_dir" "$@"
