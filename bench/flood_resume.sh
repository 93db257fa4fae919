#!/usr/bin/env bash
# From a node fault to the protected step running again, during a flood of
# idle unauthenticated connections to the controller vs without one. The
# flood (test/integration/flood.py) runs as another user (nobody) from its
# own source address, holds --connections idle connections open that never
# authenticate and opens a new one for each the controller closes. A K-node
# batch job (node1..nodeK, node1 its batch host) on K+1 nodes runs
# `srun --auto-resume=1`; its last node is killed (slurmd, step daemon and
# tasks SIGKILLed) and the controller resumes the step on the idle node.
# A fresh local cluster and controller for each run; the controller has its
# default settings but for what the local cluster needs (listen, state_dir,
# munge_socket, provider=local), under a descriptor limit of --nofile (default
# 65536: LimitNOFILE= of examples/auto-resumed.service.in, or the hard limit here
# if that is lower and cannot be raised). Each way runs --runs
# times, alternating; prints each run, the medians and the ratio flood /
# no flood.
#   bench/flood_resume.sh [--runs N] [--nodes K] [--connections N] [--nofile N]
#                         [--source ADDR] [--slurmd-timeout S] [--message-timeout S]
# Defaults: 5 runs, K=4, 1100 connections, --nofile 65536, --source
# 127.0.0.77, SlurmdTimeout 10 s, MessageTimeout 10 s. KEEP_LOGS=DIR keeps
# each run's controller and cluster logs. Run it as root (the flood runs as
# nobody, the controller as root).
set -euo pipefail
runs=5 nodes=4 connections=1100 nofile="" source=127.0.0.77 slurmd_timeout=10 message_timeout=10
while (($#)); do
  case $1 in
    --runs) runs=$2; shift ;;
    --nodes) nodes=$2; shift ;;
    --connections) connections=$2; shift ;;
    --nofile) nofile=$2; shift ;;
    --source) source=$2; shift ;;
    --slurmd-timeout) slurmd_timeout=$2; shift ;;
    --message-timeout) message_timeout=$2; shift ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "flood_resume: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
bad() { echo "flood_resume: $1" >&2; exit 2; }
[[ $runs =~ ^[1-9][0-9]*$ ]] || bad "--runs '$runs' is not a positive number"
[[ $nodes =~ ^[0-9]+$ ]] || bad "--nodes '$nodes' is not a number"
((nodes >= 2 && nodes <= 49)) || bad "--nodes '$nodes' is not 2 to 49"
[[ $connections =~ ^[1-9][0-9]*$ ]] || bad "--connections '$connections' is not a positive number"
[[ -z $nofile || $nofile =~ ^[1-9][0-9]*$ ]] || bad "--nofile '$nofile' is not a positive number"
((EUID == 0)) || bad "run it as root: the flood runs as another user, nobody"
# The unit's limit needs CAP_SYS_RESOURCE where the hard limit is lower (a
# container): then this shell's hard limit, said so.
if [[ -z $nofile ]]; then
  nofile=65536
  if ! prlimit --nofile="$nofile" true 2>/dev/null; then
    nofile=$(ulimit -Hn)
    echo "flood_resume: the hard descriptor limit here ($nofile) cannot be raised to 65536: the controller runs under $nofile" >&2
  fi
fi
prlimit --nofile="$nofile" true || bad "cannot run the controller under --nofile $nofile"
NAME=flood_resume
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# The flood's python must be one that nobody can run (not a pyenv shim in
# root's home), and its script a copy nobody can read (a clone under /root,
# mode 700 on a fresh machine, is closed to other users).
install -m 644 "$repo/test/integration/flood.py" "$dir/flood.py"
flood_cmd=(setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3
  "$dir/flood.py" --source "$source")
# (no connection: it checks that it runs and can bind the source address)
"${flood_cmd[@]}" --deadline 1 0 0 >/dev/null || bad "the flood cannot run as nobody from $source (see above)"
flood_pid=""
bench_cleanup() {
  [[ -z $flood_pid ]] || kill "$flood_pid" 2>/dev/null || true
}

cat >"$dir/step.sh" <<'SCRIPT'
#!/bin/bash
echo "running attempt=${AUTO_RESUME_ATTEMPT:-none} rank=$SLURM_PROCID node=$SLURMD_NODENAME"
sleep 600
SCRIPT
chmod +x "$dir/step.sh"

# start_controller WAY: auto-resumed for this run's cluster on a free port
# (in $port), answering on it.
start_controller() {
  port=$("$cluster_cmd" free-ports 1)
  printf 'provider=local\nlisten=127.0.0.1:%s\nstate_dir=%s\nmunge_socket=%s\nmax_marks_per_hour=1000\nmax_replacements_per_hour=1000\nlocal_restart_command=%s restart-node %s {node} --kill\n' \
    "$port" "$dir/state-$1" "$dir/c/munge/munge.sock" "$cluster_cmd" "$dir/c" >"$dir/ar.conf"
  rm -rf "$dir/state-$1"
  : >"$dir/controller.log"
  prlimit --nofile="$nofile" "$daemon" --config "$dir/ar.conf" 2>"$dir/controller.log" &
  controller_pid=$!
  local deadline=$((SECONDS + 20))
  until [[ -n $(ss -Hltn "sport = :$port") ]]; do
    kill -0 "$controller_pid" 2>/dev/null ||
      { echo "flood_resume: the controller exited: $(tail -n 5 "$dir/controller.log")" >&2; exit 1; }
    ((SECONDS < deadline)) || { echo "flood_resume: the controller does not listen on $port" >&2; exit 1; }
    sleep 0.1
  done
  printf 'required %s controller=127.0.0.1:%s munge_socket=%s\n' "$plugin" "$port" \
    "$dir/c/munge/munge.sock" >"$dir/c/etc/plugstack.conf"
}

# start_flood: the flood against $port, once all its connections are open.
start_flood() {
  rm -f "$dir/flood.stop" "$dir/flood.log"  # not the last run's lines, before the flood's shell truncates it
  "${flood_cmd[@]}" "$port" "$connections" "$dir/flood.stop" >"$dir/flood.log" 2>&1 &
  flood_pid=$! flood_t0=$(now)
  local deadline=$((SECONDS + 60))
  until grep -q "^open " "$dir/flood.log" 2>/dev/null; do
    kill -0 "$flood_pid" 2>/dev/null || { echo "flood_resume: the flood failed: $(cat "$dir/flood.log")" >&2; exit 1; }
    ((SECONDS < deadline)) || { echo "flood_resume: the flood did not open its connections in 60 s" >&2; exit 1; }
    sleep 0.1
  done
  [[ $(<"$dir/flood.log") == "open $connections" ]] ||
    { echo "flood_resume: the flood opened: $(cat "$dir/flood.log")" >&2; exit 1; }
}

# stop_flood: ends the flood; $closed: how many connections the controller
# closed, and how many a second.
stop_flood() {
  touch "$dir/flood.stop"
  local deadline=$((SECONDS + 30))
  until grep -q "^closed " "$dir/flood.log"; do
    ((SECONDS < deadline)) || { echo "flood_resume: the flood did not stop in 30 s" >&2; exit 1; }
    sleep 0.1
  done
  wait "$flood_pid" || true
  flood_pid=""
  closed=$(sed -n 's/^closed //p' "$dir/flood.log")
  closed+=$(awk -v n="$closed" -v s="$(since "$flood_t0")" 'BEGIN {printf " (%.0f/s)", n / s}')
}

# attempt_on N: the nodes the tasks of attempt N ran on, sorted, comma-separated.
attempt_on() { grep "^running attempt=$1 " "$out" | sed 's/.* node=//' | sort -V | paste -sd,; }

# wait_attempt N SECONDS: until all the job's tasks of attempt N run.
wait_attempt() {
  local deadline=$((SECONDS + $2))
  until [[ $(grep -c "^running attempt=$1 " "$out" 2>/dev/null) == "$nodes" ]]; do
    if ((SECONDS >= deadline)) || [[ -z $(squeue -h -j "$job" 2>/dev/null) ]]; then
      echo "flood_resume: $way run $run: attempt $1 not running on $nodes nodes (job $job); its output:" >&2
      cat "$out" >&2
      echo "--- the controller's log (last lines):" >&2
      tail -n 20 "$dir/controller.log" >&2
      exit 1
    fi
    sleep 0.2
  done
}

# run_case WAY: one measurement (quiet: no flood, or flood); prints a row.
run_case() {
  local way=$1
  "$cluster_cmd" up "$dir/c" --nodes $((nodes + 1)) --plugin "$plugin" \
    --slurmd-timeout "$slurmd_timeout" --message-timeout "$message_timeout" \
    --conf-line 'SchedulerParameters=permit_job_expansion,sched_interval=1' >/dev/null
  eval "$("$cluster_cmd" env "$dir/c")"
  start_controller "$way"
  [[ $way == quiet ]] || start_flood
  out=$dir/job-$way.out
  rm -f "$out"
  job=$(sbatch --parsable -N"$nodes" -o "$out" --wrap "srun --auto-resume=1 $dir/step.sh")
  wait_attempt 0 60
  # Slurm gives the job node1..nodeK: the batch host sorts before the idle
  # node, so the resume takes that node into the job instead of requeueing it.
  local expected victim t0 again closed=-
  expected=$(seq -f 'node%g' 1 "$nodes" | paste -sd,)
  [[ $(attempt_on 0) == "$expected" ]] ||
    { echo "flood_resume: job $job runs on $(attempt_on 0), not $expected" >&2; exit 1; }
  victim=node$nodes
  t0=$(now)
  "$cluster_cmd" kill-node "$dir/c" "$victim" >/dev/null
  wait_attempt 1 300
  again=$(since "$t0")
  [[ $way == quiet ]] || stop_flood
  printf '%3s  %-8s %-7s %10s %20s   %s\n' "$run" "$way" "$victim" "$again" "$closed" "$(attempt_on 1)"
  eval "result_$way+=($again)"
  scancel "$job" 2>/dev/null || true
  if [[ -n ${KEEP_LOGS:-} ]]; then  # for a closer look: KEEP_LOGS=DIR
    mkdir -p "$KEEP_LOGS/$way-$run"
    cp -r "$dir/c/log" "$dir/controller.log" "$KEEP_LOGS/$way-$run/"
  fi
  cleanup
  controller_pid=""
}

machine
echo "SlurmdTimeout ${slurmd_timeout} s, MessageTimeout ${message_timeout} s; a $nodes-node job on $((nodes + 1)) nodes, its last node killed; controller: default limits, LimitNOFILE $nofile"
echo "flood: $connections idle connections as nobody from $source, a new one for each closed"
echo "seconds from the kill to the step's tasks running again; flood's connections the controller closed (a second)"
printf '%3s  %-8s %-7s %10s %20s   %s\n' run way killed "step again" "flood closed" "attempt 1 on"
result_quiet=() result_flood=()
for ((run = 1; run <= runs; run++)); do
  run_case quiet
  run_case flood
done
q=$(median "${result_quiet[@]}") f=$(median "${result_flood[@]}")
awk -v q="$q" -v f="$f" -v n="$runs" \
  'BEGIN {printf "median of %d: flood / no flood: %.1f s / %.1f s = x%.2f (target: at most x1.2)\n", n, f, q, f / q}'
