#!/usr/bin/env bash
# From an injected node fault to the training step running again: auto-resume
# vs Slurm's native path (the job killed on the node's failure, requeued,
# held for cred_expire + 1 s, rescheduled, its batch script rerun), side by
# side in one run, each on a fresh local cluster with the same settings.
# Cases: killed, frozen (a 4-node job on 5 nodes, node3 killed or frozen),
# gres (the same job holding a GPU each, node3 killed) and gres-spares (a
# 5-node job holding a GPU each on 6 nodes, its step on 4 of them so that the
# 5th is an in-job spare, node3 killed). Each case runs at each cred_expire
# given. Prints each phase, measured from the fault, the job's Restarts once
# the step runs again, and per case and cred_expire the ratio native /
# auto-resume. It measures whatever the controller does: a resume in place
# (Restarts 0) or a requeue (Restarts 1).
#   bench/resume_vs_native.sh [--cases killed,frozen,gres,gres-spares]
#                             [--cred-expire S[,S...]] [--slurmd-timeout S]
#                             [--message-timeout S]
# Defaults: all cases, cred_expire 120 (Slurm's default) then 5 (a tuned
# native path; the least Slurm keeps), SlurmdTimeout 10 s, MessageTimeout
# 10 s (the local cluster's defaults). Takes about half an hour: the native
# path waits out cred_expire.
set -euo pipefail
cases=killed,frozen,gres,gres-spares cred_expires=120,5 slurmd_timeout=10 message_timeout=10
usage_error() { echo "resume_vs_native: $*" >&2; exit 2; }
while (($#)); do
  case $1 in
    --cases|--cred-expire|--slurmd-timeout|--message-timeout)
      (($# >= 2)) || usage_error "$1 needs a value (try --help)" ;;&
    --cases) cases=$2; shift ;;
    --cred-expire) cred_expires=$2; shift ;;
    --slurmd-timeout) slurmd_timeout=$2; shift ;;
    --message-timeout) message_timeout=$2; shift ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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

fail() { echo "resume_vs_native: $*" >&2; exit 1; }

# case_setup FAULT: sets nodes (the cluster's), up_opts (more options of
# scripts/cluster up), job_opts (sbatch's) and step_opts (srun's) for FAULT.
case_setup() {
  nodes=5 up_opts=() job_opts=(-N4) step_opts=()
  case $1 in
    gres) up_opts=(--gpus 1) job_opts+=(--gres=gpu:1) ;;
    # Accounting: Slurm 22.05 refuses every update of a job resized once
    # unless slurmdbd runs, and a resume in place shrinks the job.
    gres-spares) nodes=6 up_opts=(--gpus 1 --accounting) job_opts=(-N5 --gres=gpu:1) step_opts=(-N4) ;;
  esac
}

# start_job FAULT PATH EXPIRE OUT: a fresh cluster and controller, and the
# job; returns (job id in `job`) once its step runs on all its nodes, node3
# one of them and not the batch host.
start_job() {
  local fault=$1 path=$2 expire=$3 out=$4 flag=0
  [[ $path == native ]] || flag=1
  case_setup "$fault"
  "$cluster_cmd" up "$dir/c" --nodes "$nodes" --plugin "$plugin" "${up_opts[@]}" --cred-expire "$expire" \
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
  local deadline=$((SECONDS + 60))
  until [[ $(grep -c "^running attempt=.* restart=0 " "$out" 2>/dev/null) == 4 ]]; do
    ((SECONDS < deadline)) || fail "$fault/$path: job $job did not start in 60 s: $(scontrol -o show job "$job")"
    sleep 0.2
  done
  grep -q "^running attempt=.* restart=0 .* node=node3$" "$out" ||
    fail "$fault/$path: node3 is not a node of job $job's step: $(grep -o 'node=.*' "$out" | tr '\n' ' ')"
  [[ $(scontrol -o show job "$job") =~ \ BatchHost=node3\  ]] &&
    fail "$fault/$path: node3 is job $job's batch host"
  return 0
}

# run_case FAULT PATH EXPIRE: one measurement; prints a row and keeps the
# seconds to the step running again in result[FAULT/EXPIRE/PATH].
run_case() {
  local fault=$1 path=$2 expire=$3 out=$dir/$1-$2-$3.out job
  start_job "$fault" "$path" "$expire" "$out"
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
    if [[ $(grep -cE "^running (attempt=1 |attempt=(none|0) restart=1 )" "$out" 2>/dev/null) == 4 ]]; then
      step_again=$(since "$t0")
    fi
    sleep 0.2
  done
  info=$(scontrol -o show job "$job")
  restarts="?"
  [[ ! $info =~ \ Restarts=([0-9]+)\  ]] || restarts=${BASH_REMATCH[1]}
  printf '%-12s %-12s %11s %8s %9s %10s %11s %9s\n' "$fault" "$path" "$expire" "${detected:--}" \
    "${requeued:--}" "${again:--}" "$step_again" "$restarts"
  result[$fault/$expire/$path]=$step_again
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
    killed|frozen) echo "  $fault: a 4-node job on 5 nodes, node3 $fault" ;;
    gres) echo "  gres: a 4-node job with --gres=gpu:1 on 5 nodes (1 fake GPU each), node3 killed" ;;
    gres-spares) echo "  gres-spares: a 5-node job with --gres=gpu:1 on 6 nodes (1 fake GPU each, slurmdbd)," \
      "its step srun -N4 (the 5th node an in-job spare), node3 killed" ;;
  esac
done
echo "seconds from the fault to: node marked, job requeued, job running again, step running again; then the job's Restarts"
printf '%-12s %-12s %11s %8s %9s %10s %11s %9s\n' fault path cred_expire marked requeued "job again" \
  "step again" restarts
for expire in "${expires[@]}"; do
  for fault in "${wanted[@]}"; do
    run_case "$fault" native "$expire"
    run_case "$fault" auto-resume "$expire"
  done
done
for expire in "${expires[@]}"; do
  for fault in "${wanted[@]}"; do
    awk -v f="$fault" -v e="$expire" -v n="${result[$fault/$expire/native]}" \
      -v a="${result[$fault/$expire/auto-resume]}" \
      'BEGIN {printf "%-12s cred_expire %s: native / auto-resume: %.1f s / %.1f s = x%.1f\n", f, e, n, a, n / a}'
  done
done
