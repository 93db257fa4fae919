#!/usr/bin/env bash
# A rack failure against a single fault, on one local cluster in one run:
# --jobs protected jobs of --job-nodes nodes each (8 of 4 by default, 32
# nodes), one more job of as many nodes for the single fault, and one idle
# node per job beside them, every node with its slurmd and its node agent,
# slurmdbd, the controller with the local provider (a failed node is
# "replaced" by a restart of its slurmd). First the single fault: one node
# of job 0 killed (slurmd, steps and agent SIGKILLed), and the seconds until
# its step runs again on all its nodes (attempt 1). Then the rack: one node
# of each of the other jobs killed at once, and the seconds until each step
# runs again, the slowest being the rack's time (every fault a first one:
# no relaunch backoff in either). Each step is one `srun --auto-resume=1`
# task per node that prints its attempt and sleeps. The last line is the
# ratio of the rack's time to the single fault's (the goal: at most 2).
#   bench/rack.sh [--jobs J] [--job-nodes K] [--timeout S]
# Defaults: 8 jobs of 4 nodes (45 nodes in all), a deadline of 300 s per
# phase.
set -euo pipefail
jobs=8 job_nodes=4 phase_timeout=300
usage_error() { echo "rack: $*" >&2; exit 2; }
while (($#)); do
  case $1 in
    --jobs|--job-nodes|--timeout) (($# >= 2)) || usage_error "$1 needs a value (try --help)" ;;&
    --jobs) jobs=$2; shift ;;
    --job-nodes) job_nodes=$2; shift ;;
    --timeout) phase_timeout=$2; shift ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) usage_error "unknown argument '$1' (try --help)" ;;
  esac
  shift
done
[[ $jobs =~ ^[1-9][0-9]*$ ]] || usage_error "--jobs '$jobs' is not a positive number"
[[ $job_nodes =~ ^[1-9][0-9]*$ ]] || usage_error "--job-nodes '$job_nodes' is not a positive number"
((job_nodes >= 2)) || usage_error "--job-nodes $job_nodes: a job needs 2 nodes at least (its batch host and the killed node)"
[[ $phase_timeout =~ ^[1-9][0-9]*$ ]] || usage_error "--timeout '$phase_timeout' is not a whole number of seconds"
nodes=$(((jobs + 1) * (job_nodes + 1)))
((nodes <= 70)) || usage_error "--jobs $jobs x --job-nodes $job_nodes needs $nodes nodes with job 0 and the idle ones: at most 70 (scripts/cluster)"
NAME=rack
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Many faults at once on a small cluster: the guard rails' limits are not
# what this measures. Accounting: Slurm 22.05 refuses every update of a
# job resized once unless slurmdbd runs, and job 1 is resized twice.
"$cluster_cmd" up "$dir/c" --nodes "$nodes" --accounting --plugin "$plugin" --controller --agents \
  --controller-conf max_marks_per_hour=1000 --controller-conf max_replacements_per_hour=1000 \
  --controller-bin "$daemon" --agent-bin "$build/node/auto-resume-agent" \
  --cli-bin "$build/cli/auto-resume" --timeout 300 >/dev/null
eval "$("$cluster_cmd" env "$dir/c")"

cat >"$dir/step.sh" <<'SCRIPT'
#!/bin/bash
echo "attempt=${AUTO_RESUME_ATTEMPT:-none} rank=$SLURM_PROCID node=$SLURMD_NODENAME"
sleep 3600
SCRIPT
chmod +x "$dir/step.sh"

# Job J (0 to --jobs) on nodes J*K+1 .. (J+1)*K, exclusive (as a training
# takes its nodes); the rest stay idle.
declare -a job_ids
for ((j = 0; j <= jobs; j++)); do
  first=$((j * job_nodes + 1)) last=$(((j + 1) * job_nodes))
  job_ids[j]=$(sbatch --parsable --exclusive -N "$job_nodes" -w "node[$first-$last]" -o "$dir/job$j.out" \
    --wrap "srun --auto-resume=1 $dir/step.sh")
done
# running J A: job J's step runs attempt A on all its nodes.
running() { [[ $(grep -c "^attempt=$2 " "$dir/job$1.out" 2>/dev/null) == "$job_nodes" ]]; }
deadline=$((SECONDS + phase_timeout))
for ((j = 0; j <= jobs; j++)); do
  until running "$j" 0; do
    ((SECONDS < deadline)) || fail "job ${job_ids[j]} did not start in ${phase_timeout} s: $(scontrol -o show job "${job_ids[j]}")"
    sleep 0.2
  done
done

declare -A attempt again_at
for ((j = 0; j <= jobs; j++)); do attempt[$j]=0; done
# victim J: a node job J's step runs on now that is not its batch host
# (the highest rank's, else the next lower one's).
victim() {
  local j=$1 rank batch node
  batch=$(scontrol -o show job "${job_ids[j]}" | grep -o ' BatchHost=[^ ]*' | cut -d= -f2)
  for ((rank = job_nodes - 1; rank >= 0; rank--)); do
    node=$(sed -n "s/^attempt=${attempt[$j]} rank=$rank node=//p" "$dir/job$j.out" | tail -n 1)
    [[ -z $node || $node == "$batch" ]] || { echo "$node"; return; }
  done
  fail "job ${job_ids[j]} runs on no node but its batch host $batch"
}
# wait_again T0 J...: waits until each job J runs its next attempt; sets
# again_at[J] to the seconds from T0, and moves attempt[J] on.
wait_again() {
  local t0=$1 j
  shift
  local -A left=()
  for j in "$@"; do left[$j]=1; done
  local deadline=$((SECONDS + phase_timeout))
  while ((${#left[@]})); do
    for j in "${!left[@]}"; do
      if running "$j" $((attempt[$j] + 1)); then
        again_at[$j]=$(since "$t0")
        attempt[$j]=$((attempt[$j] + 1))
        unset "left[$j]"
      fi
    done
    ((${#left[@]} == 0)) && break
    ((SECONDS < deadline)) || fail "not running again in ${phase_timeout} s: jobs ${!left[*]}; $(events_tail)"
    sleep 0.2
  done
}
events_tail() { "$build/cli/auto-resume" events 2>&1 | tail -n 20; }

machine
echo "$((jobs + 1)) protected jobs of $job_nodes nodes each on $nodes nodes ($((jobs + 1)) idle), a node agent per node, slurmdbd," \
  "the local provider (a failed node's slurmd restarted); the killed nodes' slurmd, steps and agent SIGKILLed"

# 1. A single fault: a node of job 0.
first_victim=$(victim 0)
t0=$(now)
"$cluster_cmd" kill-node "$dir/c" "$first_victim" >/dev/null
wait_again "$t0" 0
single=${again_at[0]}
echo "single fault ($first_victim of job 0): the step runs again ${single} s after the kill"

# 2. The rack: one node of each other job, killed at once (in parallel).
victims=()
for ((j = 1; j <= jobs; j++)); do victims+=("$(victim "$j")"); done
t0=$(now)
pids=()
for node in "${victims[@]}"; do
  "$cluster_cmd" kill-node "$dir/c" "$node" >/dev/null &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || fail "a kill-node failed"; done
killed=$(since "$t0")
mapfile -t all < <(seq 1 "$jobs")
wait_again "$t0" "${all[@]}"
times=()
for ((j = 1; j <= jobs; j++)); do times+=("${again_at[$j]}"); done
slowest=$(printf '%s\n' "${times[@]}" | sort -n | tail -n 1)
echo "rack failure (${victims[*]} killed at once, one node of each job, the kills done in ${killed} s):" \
  "each step runs again after (s, job 1 to $jobs): ${times[*]}; median $(median "${times[@]}"), slowest ${slowest}"
"$build/cli/auto-resume" events >"$dir/events.txt" 2>&1 || true
# KEEP_LOGS=DIR: the events and the controller's log kept there.
[[ -z ${KEEP_LOGS:-} ]] || { mkdir -p "$KEEP_LOGS"; cp "$dir/events.txt" "$dir/c/log/auto-resumed.log" "$KEEP_LOGS/"; }
relaunches=$(grep -c " relaunch: " "$dir/events.txt" || true)
requeues=$(grep -c " requeued: " "$dir/events.txt" || true)
((requeues == 0)) || fail "$requeues jobs were requeued: $(grep " requeued: " "$dir/events.txt")"
echo "relaunches recorded: $relaunches (one per fault: $((jobs + 1)))"
((relaunches == jobs + 1)) || fail "expected $((jobs + 1)) relaunches, saw $relaunches: $(tail -n 20 "$dir/events.txt")"
# The kills themselves take a while here (a kill-node each, on 2 cores):
# the rack measured from the last kill done too.
awk -v r="$slowest" -v k="$killed" -v s="$single" \
  'BEGIN {printf "from the last kill done: rack / single fault: %.1f s / %.1f s = x%.2f\n", r - k, s, (r - k) / s}'
awk -v r="$slowest" -v s="$single" \
  'BEGIN {printf "rack / single fault: %.1f s / %.1f s = x%.2f (goal: at most x2)\n", r, s, r / s}'
