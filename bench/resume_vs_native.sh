#!/usr/bin/env bash
# From an injected node fault to the training step running again: auto-resume
# vs Slurm's native path (the job killed on the node's failure, requeued,
# held for cred_expire + 1 s, rescheduled, its batch script rerun), side by
# side in one run, each on a fresh local cluster with the same settings.
# Cases: killed, frozen (a 4-node job on 5 nodes, node3 killed or frozen; with
# --sizes, a job of each size N on N+1 nodes),
# gres (the same job holding a GPU each, node3 killed) and gres-spares (a
# 5-node job holding a GPU each on 6 nodes, its step on 4 of them so that the
# 5th is an in-job spare, node3 killed). Each case runs at each cred_expire
# given. Prints each phase, measured from the fault, the job's Restarts once
# the step runs again, and per case and cred_expire the ratio native /
# auto-resume. It measures whatever the controller does: a resume in place
# (Restarts 0) or a requeue (Restarts 1). With more than one size, each
# case and cred_expire also gets its curve: the time at each size against
# the smallest's, beside the ratio of their logs (log2 N / log2 N0).
#   bench/resume_vs_native.sh [--cases killed,frozen,gres,gres-spares]
#                             [--cred-expire S[,S...]] [--slurmd-timeout S]
#                             [--message-timeout S] [--sizes N[,N...]]
# Defaults: all cases, cred_expire 120 (Slurm's default) then 5 (a tuned
# native path; the least Slurm keeps), SlurmdTimeout 10 s, MessageTimeout
# 10 s (the local cluster's defaults), size 4 (killed and frozen only: the
# gres cases keep their 4 nodes). Takes about half an hour: the native
# path waits out cred_expire.
set -euo pipefail
cases=killed,frozen,gres,gres-spares cred_expires=120,5 slurmd_timeout=10 message_timeout=10
sizes_arg=4
usage_error() { echo "resume_vs_native: $*" >&2; exit 2; }
while (($#)); do
  case $1 in
    --cases|--cred-expire|--slurmd-timeout|--message-timeout|--sizes)
      (($# >= 2)) || usage_error "$1 needs a value (try --help)" ;;&
    --sizes) sizes_arg=$2; shift ;;
    --cases) cases=$2; shift ;;
    --cred-expire) cred_expires=$2; shift ;;
    --slurmd-timeout) slurmd_timeout=$2; shift ;;
    --message-timeout) message_timeout=$2; shift ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) usage_error "unknown argument '$1' (try --help)" ;;
  esac
  shift
done
IFS=, read -ra wanted <<<"$cases"
((${#wanted[@]})) || usage_error "--cases names no case"
for fault in "${wanted[@]}"; do
  case $fault in
    killed|frozen|gres|gres-spares) ;;
    *) usage_error "unknown case '$fault' in --cases '$cases' (killed, frozen, gres, gres-spares)" ;;
  esac
done
IFS=, read -ra expires <<<"$cred_expires"
((${#expires[@]})) || usage_error "--cred-expire names no value"
for i in "${!expires[@]}"; do
  expire=${expires[i]}
  if ! [[ $expire =~ ^[0-9]{1,5}$ ]] || ((10#$expire < 5 || 10#$expire > 86400)); then
    usage_error "bad cred_expire '$expire' in --cred-expire '$cred_expires': 5-86400 seconds (Slurm keeps 120 for less than 5)"
  fi
  expires[i]=$((10#$expire))
done
IFS=, read -ra sizes <<<"$sizes_arg"
((${#sizes[@]})) || usage_error "--sizes names no size"
for i in "${!sizes[@]}"; do
  size=${sizes[i]}
  if ! [[ $size =~ ^[0-9]{1,2}$ ]] || ((10#$size < 4 || 10#$size > 69)); then
    usage_error "bad size '$size' in --sizes '$sizes_arg': 4-69 nodes (node3 is the one faulted; scripts/cluster runs 70 at most)"
  fi
  sizes[i]=$((10#$size))
done
[[ $slurmd_timeout =~ ^[1-9][0-9]*$ ]] || usage_error "bad --slurmd-timeout '$slurmd_timeout': whole seconds, at least 1"
[[ $message_timeout =~ ^[1-9][0-9]*$ ]] || usage_error "bad --message-timeout '$message_timeout': whole seconds, at least 1"
NAME=resume_vs_native
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The training stand-in; each run prints one line per task saying which
# attempt and restart it is, and on which node.
cat >"$dir/step.sh" <<'SCRIPT'
#!/bin/bash
echo "running attempt=${AUTO_RESUME_ATTEMPT:-none} restart=${SLURM_RESTART_COUNT:-0} rank=$SLURM_PROCID node=$SLURMD_NODENAME"
sleep 600
SCRIPT
chmod +x "$dir/step.sh"


# case_setup FAULT SIZE: sets nodes (the cluster's), up_opts (more options
# of scripts/cluster up), job_opts (sbatch's), step_opts (srun's) and tasks
# (the step's, one a node) for FAULT at SIZE.
case_setup() {
  nodes=$(($2 + 1)) up_opts=() job_opts=(-N"$2") step_opts=() tasks=$2
  case $1 in
    gres) up_opts=(--gpus 1) job_opts+=(--gres=gpu:1) ;;
    # Accounting: Slurm 22.05 refuses every update of a job resized once
    # unless slurmdbd runs, and a resume in place shrinks the job.
    gres-spares) nodes=6 up_opts=(--gpus 1 --accounting) job_opts=(-N5 --gres=gpu:1) step_opts=(-N4) tasks=4 ;;
  esac
}

# start_job FAULT PATH EXPIRE OUT SIZE: a fresh cluster and controller, and
# the job; returns (job id in `job`) once its step runs on all its nodes,
# node3 one of them and not the batch host.
start_job() {
  local fault=$1 path=$2 expire=$3 out=$4 size=$5 flag=0
  [[ $path == native ]] || flag=1
  case_setup "$fault" "$size"
  "$cluster_cmd" up "$dir/c" --nodes "$nodes" --timeout 300 --plugin "$plugin" "${up_opts[@]}" --cred-expire "$expire" \
    --slurmd-timeout "$slurmd_timeout" --message-timeout "$message_timeout" \
    --conf-line 'SchedulerParameters=permit_job_expansion,sched_interval=1' >/dev/null
  eval "$("$cluster_cmd" env "$dir/c")"
  local port
  port=$("$cluster_cmd" free-ports 1)
  printf 'provider=local\nlisten=127.0.0.1:%s\nstate_dir=%s\nmunge_socket=%s\nmax_marks_per_hour=1000\nmax_replacements_per_hour=1000\nlocal_restart_command=%s restart-node %s {node} --kill\n' \
    "$port" "$dir/state-$fault-$path-$expire" "$dir/c/munge/munge.sock" "$cluster_cmd" "$dir/c" >"$dir/ar.conf"
  "$daemon" --config "$dir/ar.conf" 2>>"$dir/auto-resumed.log" &
  controller_pid=$!
  printf 'required %s controller=127.0.0.1:%s munge_socket=%s\n' "$plugin" "$port" \
    "$dir/c/munge/munge.sock" >"$dir/c/etc/plugstack.conf"
  rm -f "$out"
  # Slurm picks the lowest nodes (node1-4, or node1-5 for gres-spares), so
  # that both paths have the same idle node to go on with: the native rerun
  # is scheduled onto it, and auto-resume takes it as the replacement (in
  # gres-spares, the job's own 5th node is the spare).
  job=$(sbatch --parsable "${job_opts[@]}" -o "$out" \
    --wrap "srun ${step_opts[*]} --auto-resume=$flag $dir/step.sh")
  local deadline=$((SECONDS + 120))
  until [[ $(grep -c "^running attempt=.* restart=0 " "$out" 2>/dev/null) == "$tasks" ]]; do
    ((SECONDS < deadline)) || fail "$fault/$path: job $job did not start in 120 s: $(scontrol -o show job "$job")"
    sleep 0.2
  done
  grep -q "^running attempt=.* restart=0 .* node=node3$" "$out" ||
    fail "$fault/$path: node3 is not a node of job $job's step: $(grep -o 'node=.*' "$out" | tr '\n' ' ')"
  [[ $(scontrol -o show job "$job") =~ \ BatchHost=node3\  ]] &&
    fail "$fault/$path: node3 is job $job's batch host"
  return 0
}

# run_case FAULT PATH EXPIRE SIZE: one measurement; prints a row and keeps
# the seconds to the step running again in result[FAULT/EXPIRE/SIZE/PATH].
run_case() {
  local fault=$1 path=$2 expire=$3 size=$4 out=$dir/$1-$2-$3-$4.out job
  start_job "$fault" "$path" "$expire" "$out" "$size"
  # The fault, on a node of the step other than the batch host.
  local t0 detected="" requeued="" again="" step_again="" state info restarts
  t0=$(now)
  if [[ $fault == frozen ]]; then "$cluster_cmd" freeze-node "$dir/c" node3 >/dev/null
  else "$cluster_cmd" kill-node "$dir/c" node3 >/dev/null; fi
  local deadline=$((SECONDS + 600))
  while [[ -z $step_again ]]; do
    ((SECONDS < deadline)) ||
      fail "$fault/$path/cred_expire $expire: no rerun in 600 s: $(scontrol -o show job "$job"); $(cat "$out")"
    state=$(sinfo -h -n node3 -o %t)
    [[ -n $detected || ! $state =~ (\*|down|fail) ]] || detected=$(since "$t0")
    info=$(scontrol -o show job "$job")
    [[ -n $requeued || ! $info =~ \ Restarts=1\  ]] || requeued=$(since "$t0")
    [[ -n $again || ! $info =~ JobState=RUNNING.*\ Restarts=1\  ]] || again=$(since "$t0")
    # A resume in place: attempt 1 of the step; a requeue: the rerun's
    # registration (attempt 0, or none on the native path) with restart 1.
    if [[ $(grep -cE "^running (attempt=1 |attempt=(none|0) restart=1 )" "$out" 2>/dev/null) == "$tasks" ]]; then
      step_again=$(since "$t0")
    fi
    sleep 0.2
  done
  info=$(scontrol -o show job "$job")
  restarts="?"
  [[ ! $info =~ \ Restarts=([0-9]+)\  ]] || restarts=${BASH_REMATCH[1]}
  printf '%-12s %5s %-12s %11s %8s %9s %10s %11s %9s\n' "$fault" "$size" "$path" "$expire" \
    "${detected:--}" "${requeued:--}" "${again:--}" "$step_again" "$restarts"
  result[$fault/$expire/$size/$path]=$step_again
  scancel "$job" 2>/dev/null || true
  cleanup
  controller_pid=""
}

declare -A result
machine
echo "SlurmdTimeout ${slurmd_timeout} s, MessageTimeout ${message_timeout} s, a scheduler pass every second;" \
  "node3 (a node of the step, not the batch host) faulted"
for fault in "${wanted[@]}"; do
  case $fault in
    killed|frozen) echo "  $fault: a job of N nodes on N+1 (N: ${sizes[*]}), node3 $fault" ;;
    gres) echo "  gres: a 4-node job with --gres=gpu:1 on 5 nodes (1 fake GPU each), node3 killed" ;;
    gres-spares) echo "  gres-spares: a 5-node job with --gres=gpu:1 on 6 nodes (1 fake GPU each, slurmdbd)," \
      "its step srun -N4 (the 5th node an in-job spare), node3 killed" ;;
  esac
done
echo "seconds from the fault to: node marked, job requeued, job running again, step running again; then the job's Restarts"
printf '%-12s %5s %-12s %11s %8s %9s %10s %11s %9s\n' fault nodes path cred_expire marked requeued \
  "job again" "step again" restarts
# sizes_of FAULT: the sizes FAULT runs at (the gres cases: 4 only).
sizes_of() { if [[ $1 == killed || $1 == frozen ]]; then echo "${sizes[@]}"; else echo 4; fi; }
for expire in "${expires[@]}"; do
  for fault in "${wanted[@]}"; do
    for size in $(sizes_of "$fault"); do
      run_case "$fault" native "$expire" "$size"
      run_case "$fault" auto-resume "$expire" "$size"
    done
  done
done
for expire in "${expires[@]}"; do
  for fault in "${wanted[@]}"; do
    for size in $(sizes_of "$fault"); do
      awk -v f="$fault" -v e="$expire" -v s="$size" -v n="${result[$fault/$expire/$size/native]}" \
        -v a="${result[$fault/$expire/$size/auto-resume]}" \
        'BEGIN {printf "%-12s %2s nodes, cred_expire %s: native / auto-resume: %.1f s / %.1f s = x%.1f\n", f, s, e, n, a, n / a}'
    done
  done
done
# The curves: each size's time against the smallest's, beside log2 N / log2 N0.
if ((${#sizes[@]} > 1)); then
  for expire in "${expires[@]}"; do
    for fault in "${wanted[@]}"; do
      [[ $fault == killed || $fault == frozen ]] || continue
      for path in auto-resume native; do
        line="$fault cred_expire $expire, $path:"
        base=${result[$fault/$expire/${sizes[0]}/$path]}
        for size in "${sizes[@]}"; do
          line+=$(awk -v s="$size" -v s0="${sizes[0]}" -v t="${result[$fault/$expire/$size/$path]}" -v t0="$base" \
            'BEGIN {printf " %d nodes %.1f s (x%.2f; log x%.2f);", s, t, t / t0, log(s) / log(s0)}')
        done
        echo "${line%;}"
      done
    done
  done
fi
