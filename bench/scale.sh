#!/usr/bin/env bash
# The controller at scale, on a local cluster: 3 real nodes (slurmd and
# agent each) and, declared beside them in slurm.conf, as many nodes as
# the largest of --counts, each at an address of its own in 127.1.0.0/16
# and never started. For each N of --counts, bench/heartbeat_load.cpp
# (ar-heartbeat-load: the node agent's client, munge and session, one
# session and one source address per node, the cross-checks answered)
# sends heartbeats for N of them every --interval seconds (the agent's
# default, 2 s), and over --window seconds once every session is open:
#   - the controller's CPU (% of one core, user + system) and its RSS;
#   - the heartbeats' reply latency, p50 and p99, and how many failed;
#   - the time from node3's death (its slurmd and agent SIGKILLed) until
#     the controller marks it FAIL for its silence (the goal:
#     heartbeat_timeout + 2 s).
# Side by side, the same with no load (N = 0) first; the last line is the
# ratio of the time to mark node3 at the largest N to that with no load.
#   bench/scale.sh [--counts 'N...'] [--window S] [--interval S]
#                  [--threads T]
# Defaults: counts '1000 10000', a 60 s window, interval 2 s, 4 threads.
set -euo pipefail
counts='1000 10000' window=60 interval=2 threads=4
while (($#)); do
  case $1 in
    --counts) counts=$2; shift ;;
    --window) window=$2; shift ;;
    --interval) interval=$2; shift ;;
    --threads) threads=$2; shift ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "scale: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
NAME=scale
bad() { echo "scale: $1" >&2; exit 2; }
for n in $counts; do
  if ! [[ $n =~ ^[1-9][0-9]*$ ]] || ((n > 60000)); then bad "--counts: '$n' is not a count from 1 to 60000"; fi
done
[[ -n $counts ]] || bad "--counts is empty"
[[ $window =~ ^[1-9][0-9]*$ ]] || bad "--window '$window' is not a whole number of seconds"
[[ $interval =~ ^[0-9]+([.][0-9]+)?$ ]] || bad "--interval '$interval' is not a number of seconds"
[[ $threads =~ ^[1-9][0-9]*$ ]] || bad "--threads '$threads' is not a positive number"
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
load=$build/bench/ar-heartbeat-load
[[ -x $load ]] || { echo "scale: build first (no $load)" >&2; exit 1; }
fail() { echo "scale: $*" >&2; exit 1; }
load_pid=""
bench_cleanup() {
  [[ -z $load_pid ]] || kill "$load_pid" 2>/dev/null || true
  [[ -z ${KEEP_LOGS:-} ]] || { mkdir -p "$KEEP_LOGS"; cp -r "$dir/c/log" "$dir"/load-*.txt "$KEEP_LOGS/" 2>/dev/null || true; }
}

max=0
for n in $counts; do ((n <= max)) || max=$n; done
"$load" --print-conf --prefix hb --count "$max" >"$dir/hb.conf"
"$cluster_cmd" up "$dir/c" --nodes 3 --plugin "$plugin" --controller --agents \
  --conf-line "Include $dir/hb.conf" \
  --controller-bin "$daemon" --agent-bin "$build/node/auto-resume-agent" \
  --cli-bin "$build/cli/auto-resume" >/dev/null
eval "$("$cluster_cmd" env "$dir/c")"
controller_pid=$(<"$dir/c/run/auto-resumed.pid")
timeout=$(awk -F= '$1 == "heartbeat_timeout" {print $2}' "$dir/c/etc/auto-resumed.conf")
timeout=${timeout:-10}

# cpu_ticks: the controller's user + system time so far, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$controller_pid/stat"; }
rss_mib() { awk '/^VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$controller_pid/status"; }
ticks_per_s=$(getconf CLK_TCK)

# marked: node3 is marked FAIL for its silence.
marked() { scontrol -o show node node3 | grep -q 'Reason=Action:Replace heartbeat: no heartbeat'; }
# mark_time: kills node3 (its slurmd, steps and agent) and prints the
# seconds until the controller marks it; then brings it back.
mark_time() {
  local start deadline=$((SECONDS + timeout + 60))
  start=$(now)
  "$cluster_cmd" kill-node "$dir/c" node3 >"$dir/kill.log" 2>&1 || fail "kill-node failed: $(tail -n 5 "$dir/kill.log")"
  until marked; do
    ((SECONDS < deadline)) || fail "node3 not marked within $((timeout + 60)) s of its death: $(scontrol -o show node node3)"
    kill -0 "$controller_pid" 2>/dev/null || fail "auto-resumed exited: $(tail -n 5 "$dir/c/log/auto-resumed.log")"
    sleep 0.1
  done
  since "$start"
  # (slurmd and the agent it starts keep no descriptor of this script's)
  "$cluster_cmd" restart-node "$dir/c" node3 >"$dir/restart.log" 2>&1 ||
    fail "restart-node failed: $(tail -n 5 "$dir/restart.log")"
  scontrol update nodename=node3 state=resume
  back3() {
    [[ $(sinfo -h -n node3 -o %T) == idle ]] &&
      "$build/cli/auto-resume" nodes 2>/dev/null | awk '$1 == "node3:" && $4 < 3 {ok = 1} END {exit !ok}'
  }
  deadline=$((SECONDS + 60))
  until back3; do
    ((SECONDS < deadline)) || fail "node3 not idle with its agent heard again within 60 s: $(scontrol -o show node node3)"
    sleep 0.2
  done
}

machine
echo "scale: 3 nodes with slurmd and agent, $max more declared; heartbeats every $interval s, heartbeat_timeout $timeout s, window $window s"
base_mark=""
for n in 0 $counts; do
  result=""
  if ((n > 0)); then
    # The sessions open over the first interval or two; the window starts
    # after that.
    warmup=$(awk -v i="$interval" -v n="$n" 'BEGIN {w = 2 * i + n / 2000; printf "%.0f", w < 3 ? 3 : w}')
    "$load" --controller "$AUTO_RESUME_CONTROLLER" --munge-socket "$AUTO_RESUME_MUNGE_SOCKET" \
      --prefix hb --count "$n" --interval "$interval" --threads "$threads" \
      --warmup "$warmup" --seconds $((warmup + window + timeout + 30)) >"$dir/load-$n.txt" 2>&1 &
    load_pid=$!
    sleep "$warmup"
  fi
  before=$(cpu_ticks)
  sleep "$window"
  cpu=$(awk -v a="$before" -v b="$(cpu_ticks)" -v t="$ticks_per_s" -v w="$window" 'BEGIN {printf "%.1f", 100 * (b - a) / t / w}')
  rss=$(rss_mib)
  mark=$(mark_time)
  if ((n > 0)); then
    kill -TERM "$load_pid"
    wait "$load_pid" || true
    load_pid=""
    result=$(grep '^heartbeats:' "$dir/load-$n.txt") || fail "no summary from ar-heartbeat-load: $(tail -n 5 "$dir/load-$n.txt")"
  fi
  printf '%6d nodes: controller CPU %5s %% of a core, RSS %4s MiB; node3 marked %5s s after its death%s\n' \
    "$n" "$cpu" "$rss" "$mark" "${result:+; $result}"
  [[ -n $base_mark ]] || base_mark=$mark
  last_mark=$mark
done
echo "node3 marked at $max nodes / at 0: $last_mark s / $base_mark s = x$(awk -v a="$last_mark" -v b="$base_mark" 'BEGIN {printf "%.2f", a / b}')"
