#!/usr/bin/env bash
# Goodput under faults: a real PyTorch DDP training (examples/train.py, gloo,
# CPU, one process per node) on the local cluster for a fixed wall time, hit
# by faults from a seeded schedule, run twice, one way after the other, each
# on a fresh cluster (with slurmdbd) with the same settings and schedule:
#   auto-resume: srun --auto-resume=1 --auto-resume-hang-timeout=H, with the
#                controller and a node agent per node;
#   native:      Slurm's own way, no plugin: sbatch --requeue (a node's
#                failure requeues the job), a batch script that requeues the
#                job itself when srun fails, and reruns the training from
#                the same checkpoints. A faulted node is rebooted once Slurm
#                has marked it down (as the controller's local provider does).
# Faults (--faults), each on the running job, the schedule cycling through
# them in a seeded order: killed (a node of the job other than the batch
# host SIGKILLed), frozen (the same SIGSTOPped), hung (a rank stops for good
# after its step: a hung collective; native Slurm never notices), crash (a
# rank exits 1 and its node's stubbed GPU check fails: auto-resume's agents
# run it after the failed step; native Slurm runs none).
# Prints per way the ETTR (effective training time ratio: steps in the final
# model x step time / wall time), the downtime per fault (median, p90: from
# the fault to the first step of the training running again), the steps lost
# per fault, each fault; then the ratio line; writes DIR/goodput.png (step
# against wall time, faults marked; matplotlib) and the raw logs into DIR.
#   bench/goodput.sh [--minutes M] [--fault-every S] [--checkpoint-every S]
#                    [--seed N] [--faults killed,frozen,hung,crash]
#                    [--nodes N] [--hang-timeout S] [--cred-expire S]
#                    [--slurmd-timeout S] [--message-timeout S] [--out DIR]
# Defaults: 10 minutes per way, a fault every 120 s (each moved by up to a
# quarter of that, seeded), checkpoints every 10 s, seed 1, all four faults,
# a 4-node job on 5 nodes, hang timeout 10 s, cred_expire 5 (the least Slurm
# keeps: a tuned native path), SlurmdTimeout and MessageTimeout 10 s, out
# ./goodput-out. Takes the two wall times and about a minute more.
set -euo pipefail
minutes=10 fault_every=120 checkpoint_every=10 seed=1 faults=killed,frozen,hung,crash nodes=4
hang_timeout=10 cred_expire=5 slurmd_timeout=10 message_timeout=10 out=goodput-out
usage_error() { echo "goodput: $*" >&2; exit 2; }
while (($#)); do
  case $1 in
    --minutes|--fault-every|--checkpoint-every|--seed|--faults|--nodes|--hang-timeout|--cred-expire|--slurmd-timeout|--message-timeout|--out)
      (($# >= 2)) || usage_error "$1 needs a value (try --help)" ;;&
    --minutes) minutes=$2; shift ;;
    --fault-every) fault_every=$2; shift ;;
    --checkpoint-every) checkpoint_every=$2; shift ;;
    --seed) seed=$2; shift ;;
    --faults) faults=$2; shift ;;
    --nodes) nodes=$2; shift ;;
    --hang-timeout) hang_timeout=$2; shift ;;
    --cred-expire) cred_expire=$2; shift ;;
    --slurmd-timeout) slurmd_timeout=$2; shift ;;
    --message-timeout) message_timeout=$2; shift ;;
    --out) out=$2; shift ;;
    -h|--help) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) usage_error "unknown argument '$1' (try --help)" ;;
  esac
  shift
done
if ! { [[ $minutes =~ ^[0-9]+([.][0-9]+)?$ ]] && awk -v m="$minutes" 'BEGIN {exit !(m >= 0.5 && m <= 240)}'; }; then
  usage_error "bad --minutes '$minutes': 0.5 to 240"
fi
wall=$(awk -v m="$minutes" 'BEGIN {printf "%d", m * 60}')
if ! { [[ $fault_every =~ ^[1-9][0-9]*$ ]] && ((fault_every >= 20)); }; then
  usage_error "bad --fault-every '$fault_every': whole seconds, at least 20"
fi
if ! { [[ $checkpoint_every =~ ^[1-9][0-9]*$ ]] && ((checkpoint_every <= 600)); }; then
  usage_error "bad --checkpoint-every '$checkpoint_every': whole seconds, 1 to 600"
fi
[[ $seed =~ ^[0-9]{1,9}$ ]] || usage_error "bad --seed '$seed': a whole number, 0 to 999999999"
if ! { [[ $nodes =~ ^[1-9][0-9]*$ ]] && ((nodes >= 2 && nodes <= 8)); }; then
  usage_error "bad --nodes '$nodes': 2 to 8 (the job's nodes; the cluster has one more)"
fi
[[ $hang_timeout =~ ^[1-9][0-9]*$ ]] || usage_error "bad --hang-timeout '$hang_timeout': whole seconds, at least 1"
if ! { [[ $cred_expire =~ ^[0-9]{1,5}$ ]] && ((10#$cred_expire >= 5 && 10#$cred_expire <= 86400)); }; then
  usage_error "bad --cred-expire '$cred_expire': 5-86400 seconds (Slurm keeps 120 for less than 5)"
fi
[[ $slurmd_timeout =~ ^[1-9][0-9]*$ ]] || usage_error "bad --slurmd-timeout '$slurmd_timeout': whole seconds, at least 1"
[[ $message_timeout =~ ^[1-9][0-9]*$ ]] || usage_error "bad --message-timeout '$message_timeout': whole seconds, at least 1"
[[ -n $out ]] || usage_error "--out names no folder"
IFS=, read -ra kinds <<<"$faults"
((${#kinds[@]})) || usage_error "--faults names no fault"
for kind in "${kinds[@]}"; do
  case $kind in
    killed|frozen|hung|crash) ;;
    *) usage_error "unknown fault '$kind' in --faults '$faults' (killed, frozen, hung, crash)" ;;
  esac
done
((fault_every * 4 / 3 > 2 * hang_timeout)) ||
  usage_error "--fault-every $fault_every is too short for --hang-timeout $hang_timeout: faults would overlap"

python=/usr/bin/python3
report=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)/goodput_report.py
[[ -x /usr/bin/torchrun ]] || { echo "goodput: no /usr/bin/torchrun: install python3-torch (scripts/bootstrap does)" >&2; exit 1; }
"$python" -c 'import matplotlib' 2>/dev/null ||
  { echo "goodput: $python has no matplotlib, which draws the picture: apt-get install python3-matplotlib (scripts/bootstrap does)" >&2; exit 1; }
mkdir -p -- "$out" || { echo "goodput: cannot create --out '$out'" >&2; exit 1; }
out=$(cd -- "$out" && pwd -P)

NAME=goodput
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
agent=$build/node/auto-resume-agent cli=$build/cli/auto-resume healthcheck=$build/node/auto-resume-healthcheck
for program in "$agent" "$cli" "$healthcheck"; do
  [[ -x $program ]] || { echo "goodput: build first (no $program)" >&2; exit 1; }
done
entry=$repo/examples/train_auto_resume.sh
epoch() { date +%s.%N; }
# The bench's own processes for the job (an sbatch, a reboot) are all
# waited on; the cluster's go down with it (lib.sh's cleanup).

# The stubbed GPU check: the agents' default quick checker,
# auto-resume-healthcheck, found first in PATH, is this wrapper: the GPU
# check with an nvidia-smi that prints the unit tests' fixtures, healthy
# unless DIR/gpu-NODE names lost-gpu (read once: the node then reboots with
# a good GPU).
mkdir "$dir/bin" "$dir/tmp"
for state in healthy-2 lost-gpu; do
  printf '#!/bin/sh\ncat %q\n' "$repo/test/unit/fixtures/nvidia-smi/$state.xml" >"$dir/nvidia-smi-$state"
  chmod +x "$dir/nvidia-smi-$state"
done
cat >"$dir/bin/auto-resume-healthcheck" <<SCRIPT
#!/bin/bash
# auto-resume-agent's quick checks: --node NODE
state=healthy-2
if [[ -f $dir/gpu-\$2 ]]; then state=\$(<"$dir/gpu-\$2"); rm -f "$dir/gpu-\$2"; fi
exec $(printf %q "$healthcheck") "\$@" --check gpu --gpus 2 --nvidia-smi $(printf %q "$dir")/nvidia-smi-\$state
SCRIPT
chmod +x "$dir/bin/auto-resume-healthcheck"

# The seeded schedule: seconds after the training's start, and the fault,
# cycling through the kinds in a seeded order, each time moved by up to a
# quarter of --fault-every; and a seeded pick per fault (which node or rank).
RANDOM=$seed
order=("${kinds[@]}")
for ((i = ${#order[@]} - 1; i > 0; i--)); do
  j=$((RANDOM % (i + 1))) swap=${order[i]}
  order[i]=${order[j]} order[j]=$swap
done
schedule=()
for ((k = 1; ; k++)); do
  jitter=$((RANDOM % (fault_every / 2 + 1) - fault_every / 4))
  at=$((k * fault_every + jitter))
  # a fault needs the time for its resume before the end
  ((at + 2 * hang_timeout + 20 <= wall)) || break
  schedule+=("$at ${order[(k - 1) % ${#order[@]}]} $RANDOM")
done
((${#schedule[@]})) || usage_error "no fault fits: --minutes $minutes with --fault-every $fault_every"

step_seconds=0.1
checkpoint_steps=$(awk -v c="$checkpoint_every" -v s="$step_seconds" 'BEGIN {n = int(c / s + 0.5); print n < 1 ? 1 : n}')
healthy_after=$((fault_every / 2))
total=$((nodes + 1))

# job_nodes JOB: the job's nodes, one a line (none unless it runs).
job_nodes() {
  local list
  list=$(squeue -h -j "$1" -t RUNNING -o %N 2>/dev/null) || return 0
  [[ -z $list ]] || scontrol show hostnames "$list"
}
batch_host() { scontrol -o show job "$1" 2>/dev/null | grep -o ' BatchHost=[^ ]*' | cut -d= -f2; }
# rank_node OUT RANK: the node of RANK in the training's latest start (the
# entrypoint's "on NODE: node rank R of N" lines).
rank_node() {
  sed -n "s/^train_auto_resume.sh on \([^:]*\): node rank $2 of .*/\1/p" "$1" | tail -n 1
}
first_step() { [[ -s $1 ]] && grep -q ' step ' "$1"; }

# run_way WAY: one run on a fresh cluster; its files go to $out/WAY-*.
run_way() {
  local way=$1 up_opts=() srun_opts=() job_opts=()
  local log=$out/$way-steps.log faults_log=$out/$way-faults.log job_out=$out/$way-job.out
  rm -f "$log" "$faults_log" "$job_out"
  rm -rf "$dir/ckpt-$way" "$dir/faults-$way"
  mkdir -p "$dir/faults-$way"
  if [[ $way == auto-resume ]]; then
    up_opts=(--plugin "$plugin" --controller --agents --controller-bin "$daemon" --agent-bin "$agent"
      --cli-bin "$cli" --controller-conf max_marks_per_hour=1000 --controller-conf max_replacements_per_hour=1000
      --controller-conf max_attempts=100 --controller-conf max_hang_restarts=100
      --controller-conf "healthy_after=$healthy_after" --controller-conf end_window=1
      --controller-conf failure_check_timeout=20)
    srun_opts=(--auto-resume=1 "--auto-resume-hang-timeout=$hang_timeout")
  else
    up_opts=(--no-plugin)
    job_opts=(--requeue)
  fi
  # --accounting (slurmdbd): Slurm 22.05 refuses every update of a job
  # resized once unless slurmdbd runs, and each resume in place resizes the
  # job (a node out, another merged in): without it, the second node fault
  # could not take the node out, and Slurm requeued the job.
  PATH=$dir/bin:$PATH "$cluster_cmd" up "$dir/c" --nodes "$total" --accounting "${up_opts[@]}" --cred-expire "$cred_expire" \
    --slurmd-timeout "$slurmd_timeout" --message-timeout "$message_timeout" \
    --conf-line 'SchedulerParameters=permit_job_expansion,sched_interval=1' >/dev/null
  eval "$("$cluster_cmd" env "$dir/c")"
  local port
  port=$("$cluster_cmd" free-ports 1)
  # The batch script: the training; on the native path, a failed srun
  # requeues the job (the rerun resumes from the checkpoint).
  cat >"$dir/job-$way.sh" <<SCRIPT
#!/bin/bash
srun ${srun_opts[*]} $entry --steps 100000000 --checkpoint-every $checkpoint_steps --step-seconds $step_seconds \
  --checkpoint-dir $dir/ckpt-$way --fault-dir $dir/faults-$way --step-log $log
rc=\$?
echo "srun exit \$rc"
if [[ $way == native && \$rc != 0 ]]; then scontrol requeue \$SLURM_JOB_ID; fi
SCRIPT
  local job start_epoch
  start_epoch=$(epoch)
  job=$(OMP_NUM_THREADS=1 TMPDIR=$dir/tmp MASTER_PORT=$port PATH=/usr/bin:$PATH \
    sbatch --parsable "-N$nodes" --ntasks-per-node=1 --exclusive "${job_opts[@]}" --open-mode=append -o "$job_out" "$dir/job-$way.sh")
  local deadline=$((SECONDS + 120))
  until first_step "$log"; do
    ((SECONDS < deadline)) || fail "$way: job $job took no training step in 120 s: $(scontrol -o show job "$job"); $(tail -n 20 "$job_out")"
    nap 0.5
  done
  local t0
  t0=$(awk '$3 == "start" {print $1; exit}' "$log")
  echo "$way: job $job's training started $(awk -v a="$start_epoch" -v b="$t0" 'BEGIN {printf "%.1f", b - a}') s after sbatch"
  # The faults, at their times; a fault waits until the job runs (a native
  # job may be pending after a requeue). Faulted nodes of the native path
  # are rebooted once Slurm has them down.
  local entry_ kind pick at target now_s nodes_now host candidates reboot=()
  for entry_ in "${schedule[@]}"; do
    read -r at kind pick <<<"$entry_"
    while :; do
      now_s=$(awk -v a="$t0" -v b="$(epoch)" 'BEGIN {printf "%d", b - a}')
      ((now_s < wall)) || break 2
      [[ $way == native ]] && ((${#reboot[@]})) && reboot_down reboot
      if ((now_s >= at)); then
        mapfile -t nodes_now < <(job_nodes "$job")
        ((${#nodes_now[@]} == nodes)) && break
      fi
      nap 0.5
    done
    host=$(batch_host "$job")
    candidates=()
    for target in "${nodes_now[@]}"; do [[ $target == "$host" ]] || candidates+=("$target"); done
    case $kind in
      killed|frozen)
        target=${candidates[pick % ${#candidates[@]}]}
        echo "$(epoch) $kind $target" >>"$faults_log"
        if [[ $kind == killed ]]; then "$cluster_cmd" kill-node "$dir/c" "$target" >/dev/null
        else "$cluster_cmd" freeze-node "$dir/c" "$target" >/dev/null; fi
        [[ $way == auto-resume ]] || reboot+=("$target")
        ;;
      hung|crash)
        # a rank on a node other than the batch host (the crash's node is
        # taken out)
        local rank node ranks=()
        for ((rank = 0; rank < nodes; rank++)); do
          node=$(rank_node "$job_out" "$rank")
          [[ -z $node || $node == "$host" ]] || ranks+=("$rank:$node")
        done
        ((${#ranks[@]})) || fail "$way: no rank of job $job found in its output: $(tail -n 20 "$job_out")"
        target=${ranks[pick % ${#ranks[@]}]}
        rank=${target%%:*} node=${target#*:}
        target=rank$rank@$node
        [[ $kind == hung ]] || echo lost-gpu >"$dir/gpu-$node"
        echo "$(epoch) $kind $target" >>"$faults_log"
        : >"$dir/faults-$way/${kind/hung/hang}-$rank"
        ;;
    esac
    echo "$way: +$(awk -v a="$t0" -v b="$(epoch)" 'BEGIN {printf "%.1f", b - a}') s: $kind $target"
  done
  # The rest of the wall time.
  local t_end
  t_end=$(awk -v a="$t0" -v w="$wall" 'BEGIN {printf "%.3f", a + w}')
  while awk -v e="$t_end" -v n="$(epoch)" 'BEGIN {exit !(n < e)}'; do
    [[ $way == native ]] && ((${#reboot[@]})) && reboot_down reboot
    nap 0.5
  done
  echo "$t0 $t_end" >"$out/$way-window"
  scancel "$job" 2>/dev/null || true
  scontrol -o show job "$job" >"$out/$way-job.info" 2>&1 || true
  if [[ $way == auto-resume ]]; then
    "$cli" --controller "$AUTO_RESUME_CONTROLLER" --munge-socket "$AUTO_RESUME_MUNGE_SOCKET" events \
      >"$out/$way-events.log" 2>&1 || true
    cp "$dir/c/log/auto-resumed.log" "$out/$way-auto-resumed.log" 2>/dev/null || true
  fi
  cp "$dir/c/log/slurmctld.log" "$out/$way-slurmctld.log" 2>/dev/null || true
  "$cluster_cmd" down "$dir/c" >/dev/null
  rm -f "$dir"/gpu-*
}
# reboot_down ARRAY: reboot (restart-node --kill) each node of ARRAY that
# Slurm has marked down or not responding, and take it out of ARRAY.
reboot_down() {
  local -n nodes_=$1
  local node state left=()
  for node in "${nodes_[@]}"; do
    state=$(sinfo -h -n "$node" -N -o %t 2>/dev/null | head -n 1)
    # down, not merely not responding: a node back before Slurm marks it
    # down would hide the fault from Slurm
    if [[ $state =~ (down|fail) ]]; then
      "$cluster_cmd" restart-node "$dir/c" "$node" --kill >/dev/null || fail "reboot of $node failed"
    else
      left+=("$node")
    fi
  done
  nodes_=(${left[@]+"${left[@]}"})
}

machine
echo "a $nodes-node DDP training (examples/train.py, gloo, CPU, one rank per node, steps of $step_seconds s" \
  "plus compute, a checkpoint every $checkpoint_steps steps: about ${checkpoint_every} s) on $total nodes," \
  "$minutes min per way from its first step; SlurmdTimeout $slurmd_timeout s, MessageTimeout $message_timeout s," \
  "cred_expire $cred_expire s"
echo "auto-resume: hang timeout $hang_timeout s, healthy_after $healthy_after s, a node replaced by a reboot;" \
  "native: --requeue, srun failing requeues the job, a faulted node rebooted once Slurm has it down"
shown=""
for entry_ in "${schedule[@]}"; do
  read -r at kind _ <<<"$entry_"
  shown+="${shown:+, }$at $kind"
done
echo "schedule (seed $seed, s after the training's start): $shown"
for way in auto-resume native; do
  run_way "$way"
done
"$python" "$report" --out "$out" --ways auto-resume,native
