#!/usr/bin/env bash
# From a node fault to the training step running again, when the cluster has
# no idle node to replace the failed one: with a spare in the pool
# (provider=spares, spares=1: the resume takes the spare at once) vs without
# one (provider=local: the resume waits until the failed node is replaced,
# i.e. its slurmd restarted and registered again, and takes it back). Side by
# side in one run, each on a fresh local cluster with the same settings; a
# 4-node batch job, its third node (not the batch host) killed. Prints the
# seconds from the fault to the step running again, and the ratio. The local
# provider restarts a slurmd in about a second; a real replacement (a new
# cloud instance, a power cycle, a re-image) takes minutes: --boot-seconds
# makes each replacement take that much longer, on both ways alike.
# Each way runs --runs times (alternating); the ratio is of the medians.
#   bench/spare_vs_replace.sh [--runs N] [--boot-seconds S] [--slurmd-timeout S]
#                             [--message-timeout S]
# Defaults: 3 runs, --boot-seconds 60, SlurmdTimeout 10 s, MessageTimeout 10 s.
set -euo pipefail
slurmd_timeout=10 message_timeout=10 boot_seconds=60 runs=3
while (($#)); do
  case $1 in
    --runs) runs=$2; shift ;;
    --boot-seconds) boot_seconds=$2; shift ;;
    --slurmd-timeout) slurmd_timeout=$2; shift ;;
    --message-timeout) message_timeout=$2; shift ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "spare_vs_replace: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
NAME=spare_vs_replace
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "spare_vs_replace: --runs '$runs' is not a positive number" >&2; exit 2; }
[[ $boot_seconds =~ ^[0-9]+$ ]] || { echo "spare_vs_replace: --boot-seconds '$boot_seconds' is not a whole number" >&2; exit 2; }
# The replacement: a boot's worth of waiting, then the node's slurmd anew.
cat >"$dir/replace-node" <<SCRIPT
#!/bin/bash
sleep $boot_seconds
exec $cluster_cmd restart-node $dir/c "\$1" --kill
SCRIPT
chmod +x "$dir/replace-node"

cat >"$dir/step.sh" <<'SCRIPT'
#!/bin/bash
echo "running attempt=${AUTO_RESUME_ATTEMPT:-none} rank=$SLURM_PROCID node=$SLURMD_NODENAME"
sleep 600
SCRIPT
chmod +x "$dir/step.sh"

# run_case WAY: one measurement (spare or replace); prints a row.
run_case() {
  local way=$1 nodes=4 provider
  [[ $way == spare ]] && nodes=5
  # Accounting: a job resized once needs slurmdbd for the next update.
  "$cluster_cmd" up "$dir/c" --nodes "$nodes" --plugin "$plugin" --accounting \
    --slurmd-timeout "$slurmd_timeout" --message-timeout "$message_timeout" \
    --conf-line 'SchedulerParameters=permit_job_expansion,sched_interval=1' >/dev/null
  eval "$("$cluster_cmd" env "$dir/c")"
  local port
  port=$("$cluster_cmd" free-ports 1)
  provider=local
  [[ $way == spare ]] && provider=$'spares\nspares=1'
  printf 'provider=%s\nlisten=127.0.0.1:%s\nstate_dir=%s\nmunge_socket=%s\nmax_marks_per_hour=1000\nmax_replacements_per_hour=1000\nlocal_restart_command=%s {node}\n' \
    "$provider" "$port" "$dir/state-$way" "$dir/c/munge/munge.sock" "$dir/replace-node" >"$dir/ar.conf"
  rm -rf "$dir/state-$way"
  "$daemon" --config "$dir/ar.conf" 2>"$dir/auto-resumed.log" &
  controller_pid=$!
  printf 'required %s controller=127.0.0.1:%s munge_socket=%s\n' "$plugin" "$port" \
    "$dir/c/munge/munge.sock" >"$dir/c/etc/plugstack.conf"
  local deadline=$((SECONDS + 30))
  if [[ $way == spare ]]; then  # the pool is filled before the job comes
    until sinfo -h -N -t drain -R -o '%E' | grep -qx spare; do
      ((SECONDS < deadline)) || { echo "spare_vs_replace: no spare in 30 s" >&2; exit 1; }
      sleep 0.2
    done
  fi
  local out=$dir/$way.out job
  rm -f "$out"
  job=$(sbatch --parsable -N4 -o "$out" --wrap "srun --auto-resume=1 $dir/step.sh")
  deadline=$((SECONDS + 60))
  until [[ $(grep -c "^running attempt=0 " "$out" 2>/dev/null) == 4 ]]; do
    ((SECONDS < deadline)) || { echo "spare_vs_replace: job $job did not start" >&2; exit 1; }
    sleep 0.2
  done
  local victim t0 again=""
  # The job's third node, as its tasks report it (the batch host is its first).
  victim=$(grep "^running attempt=0 " "$out" | sed 's/.* node=//' | sort -V | sed -n 3p)
  [[ -n $victim ]] || { echo "spare_vs_replace: no third node in $out" >&2; exit 1; }
  t0=$(now)
  "$cluster_cmd" kill-node "$dir/c" "$victim" >/dev/null
  deadline=$((SECONDS + 300))
  until [[ $(grep -c "^running attempt=1 " "$out" 2>/dev/null) == 4 ]]; do
    ((SECONDS < deadline)) || { echo "spare_vs_replace: $way: no relaunch in 300 s" >&2; exit 1; }
    sleep 0.2
  done
  again=$(since "$t0")
  local on
  on=$(grep "^running attempt=1 " "$out" | sed 's/.* node=//' | sort | paste -sd,)
  printf '%-8s %-8s %12s   %s\n' "$way" "$victim" "$again" "$on"
  eval "result_$way+=($again)"
  scancel "$job" 2>/dev/null || true
  if [[ -n ${KEEP_LOGS:-} ]]; then  # for a closer look: KEEP_LOGS=DIR
    mkdir -p "$KEEP_LOGS/$way-${#result_spare[@]}"
    cp -r "$dir/c/log" "$dir/state-$way" "$dir/auto-resumed.log" "$KEEP_LOGS/$way-${#result_spare[@]}/"
  fi
  cleanup
  controller_pid=""
}

machine
echo "SlurmdTimeout ${slurmd_timeout} s, MessageTimeout ${message_timeout} s, a replacement boots in ${boot_seconds} s; 4-node job, no idle node; the job's 3rd node killed"
printf '%-8s %-8s %12s   %s\n' way killed "step again" "attempt 1 on"
result_replace=() result_spare=()
for ((run = 1; run <= runs; run++)); do
  run_case replace
  run_case spare
done
r=$(median "${result_replace[@]}") s=$(median "${result_spare[@]}")
awk -v r="$r" -v s="$s" -v n="$runs" \
  'BEGIN {printf "median of %d: without a spare / with a spare: %.1f s / %.1f s = x%.1f\n", n, r, s, r / s}'
