#!/usr/bin/env bash
# From an injected node fault to the training step running again: auto-resume
# in place vs Slurm's native path (the job killed on the node's failure,
# requeued, held for cred_expire + 1 s, rescheduled, its batch script rerun),
# side by side in one run, each on a fresh local cluster with the same
# settings, for a killed node and a frozen node, and for a job holding GRES
# (where auto-resume requeues too, but at once). Prints each phase, measured
# from the fault, and the ratio native / auto-resume.
#   bench/resume_vs_native.sh [--cases killed,frozen,gres] [--cred-expire S]
#                             [--slurmd-timeout S] [--message-timeout S]
# Defaults: all cases, Slurm's own cred_expire (120 s), SlurmdTimeout 10 s,
# MessageTimeout 10 s (the local cluster's defaults). Takes minutes: the
# native path waits out cred_expire.
set -euo pipefail
cases=killed,frozen,gres cred_expire="" slurmd_timeout=10 message_timeout=10
while (($#)); do
  case $1 in
    --cases) cases=$2; shift ;;
    --cred-expire) cred_expire=$2; shift ;;
    --slurmd-timeout) slurmd_timeout=$2; shift ;;
    --message-timeout) message_timeout=$2; shift ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "resume_vs_native: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
NAME=resume_vs_native
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The training stand-in: rank 0 checkpoints every 0.25 s; each run prints
# one line per task saying which attempt and restart it is.
cat >"$dir/step.sh" <<'SCRIPT'
#!/bin/bash
echo "running attempt=${AUTO_RESUME_ATTEMPT:-none} restart=${SLURM_RESTART_COUNT:-0} rank=$SLURM_PROCID"
sleep 600
SCRIPT
chmod +x "$dir/step.sh"

# run_case FAULT PATH: one measurement; prints a row.
run_case() {
  local fault=$1 path=$2 gres=() flag=0 opts=()
  [[ $fault != gres ]] || gres=(--gpus 1)
  [[ -z $cred_expire ]] || opts+=(--cred-expire "$cred_expire")
  [[ $path == native ]] || flag=1
  "$cluster_cmd" up "$dir/c" --nodes 5 --plugin "$plugin" "${gres[@]}" "${opts[@]}" \
    --slurmd-timeout "$slurmd_timeout" --message-timeout "$message_timeout" \
    --conf-line 'SchedulerParameters=permit_job_expansion,sched_interval=1' >/dev/null
  eval "$("$cluster_cmd" env "$dir/c")"
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  printf 'provider=local\nlisten=127.0.0.1:%s\nstate_dir=%s\nmunge_socket=%s\nmax_marks_per_hour=1000\nmax_replacements_per_hour=1000\nlocal_restart_command=%s restart-node %s {node} --kill\n' \
    "$port" "$dir/state-$fault-$path" "$dir/c/munge/munge.sock" "$cluster_cmd" "$dir/c" >"$dir/ar.conf"
  "$daemon" --config "$dir/ar.conf" 2>>"$dir/auto-resumed.log" &
  controller_pid=$!
  printf 'required %s controller=127.0.0.1:%s munge_socket=%s\n' "$plugin" "$port" \
    "$dir/c/munge/munge.sock" >"$dir/c/etc/plugstack.conf"
  local out=$dir/$fault-$path.out job gres_opt=()
  [[ $fault != gres ]] || gres_opt=(--gres=gpu:1)
  rm -f "$out"
  # 4 of the 5 nodes (Slurm picks node1-4), so that both paths have the
  # same idle node to go on with: the native rerun is scheduled onto it, and
  # auto-resume takes it as the replacement.
  job=$(sbatch --parsable -N4 "${gres_opt[@]}" -o "$out" \
    --wrap "srun --auto-resume=$flag $dir/step.sh")
  local deadline=$((SECONDS + 60))
  until [[ $(grep -c "^running attempt=.* restart=0 " "$out" 2>/dev/null) == 4 ]]; do
    ((SECONDS < deadline)) || { echo "resume_vs_native: job $job did not start" >&2; exit 1; }
    sleep 0.2
  done
  # The fault, on a node other than the batch host.
  local t0 detected="" requeued="" again="" step_again="" state
  t0=$(now)
  if [[ $fault == frozen ]]; then "$cluster_cmd" freeze-node "$dir/c" node3 >/dev/null
  else "$cluster_cmd" kill-node "$dir/c" node3 >/dev/null; fi
  deadline=$((SECONDS + 600))
  while [[ -z $step_again ]]; do
    ((SECONDS < deadline)) || { echo "resume_vs_native: $fault/$path: no rerun in 600 s" >&2; exit 1; }
    state=$(sinfo -h -n node3 -o %t)
    [[ -n $detected || ! $state =~ (\*|down|fail) ]] || detected=$(since "$t0")
    local info
    info=$(scontrol -o show job "$job")
    [[ -n $requeued || ! $info =~ \ Restarts=1\  ]] || requeued=$(since "$t0")
    [[ -n $again || ! $info =~ JobState=RUNNING.*\ Restarts=1\  ]] || again=$(since "$t0")
    if [[ $(grep -cE "^running (attempt=1 |attempt=(none|0) restart=1 )" "$out" 2>/dev/null) == 4 ]]; then
      step_again=$(since "$t0")
    fi
    sleep 0.2
  done
  printf '%-8s %-12s %9s %12s %14s %12s\n' "$fault" "$path" "${detected:--}" "${requeued:--}" \
    "${again:--}" "$step_again"
  eval "result_${fault}_${path//-/_}=$step_again"
  scancel "$job" 2>/dev/null || true
  cleanup
  controller_pid=""
}

machine
shown_expire=${cred_expire:-"120 (the default)"}
echo "SlurmdTimeout ${slurmd_timeout} s, MessageTimeout ${message_timeout} s, cred_expire $shown_expire s; 4-node job on 5 nodes, node3 faulted"
echo "seconds from the fault to: node marked by Slurm, job requeued, job running again, step running again"
printf '%-8s %-12s %9s %12s %14s %12s\n' fault path "marked" "requeued" "job again" "step again"
IFS=, read -ra wanted <<<"$cases"
for fault in "${wanted[@]}"; do
  case $fault in killed|frozen|gres) ;; *) echo "resume_vs_native: unknown case '$fault'" >&2; exit 2 ;; esac
  run_case "$fault" native
  run_case "$fault" auto-resume
done
for fault in "${wanted[@]}"; do
  n=result_${fault}_native a=result_${fault}_auto_resume
  awk -v f="$fault" -v n="${!n}" -v a="${!a}" \
    'BEGIN {printf "%-8s native / auto-resume: %.1f s / %.1f s = x%.1f\n", f, n, a, n / a}'
done
