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
# Side by side, the same with no load (N = 0) first. Then, with the largest
# N beating, what the controller costs slurmctld (sdiag's RPC statistics
# over --sdiag-window seconds): idle, beside `squeue` and `sinfo` every 10 s
# run as another user in the same window, and during a repair (a protected
# 2-node step whose node2 is killed, resumed on node3). The last line is
# the ratio of the time to mark node3 at the largest N to that with no
# load.
#   bench/scale.sh [--counts 'N...'] [--window S] [--interval S]
#                  [--threads T] [--sdiag-window S]
# Defaults: counts '1000 10000', a 60 s window, interval 2 s, 4 threads,
# sdiag windows of 300 s.
set -euo pipefail
counts='1000 10000' window=60 interval=2 threads=4 sdiag_window=300
while (($#)); do
  case $1 in
    --counts) counts=$2; shift ;;
    --window) window=$2; shift ;;
    --sdiag-window) sdiag_window=$2; shift ;;
    --interval) interval=$2; shift ;;
    --threads) threads=$2; shift ;;
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
[[ $sdiag_window =~ ^[1-9][0-9]*$ ]] || bad "--sdiag-window '$sdiag_window' is not a whole number of seconds"
[[ $interval =~ ^[0-9]+([.][0-9]+)?$ ]] || bad "--interval '$interval' is not a number of seconds"
[[ $threads =~ ^[1-9][0-9]*$ ]] || bad "--threads '$threads' is not a positive number"
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
load=$build/bench/ar-heartbeat-load
[[ -x $load ]] || { echo "scale: build first (no $load)" >&2; exit 1; }
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
# seconds until the controller marks it; then waits until it is back (the
# controller has the local provider replace a marked node: its slurmd and
# agent start again) and heard.
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
  back3() {
    [[ $(sinfo -h -n node3 -o %T) == idle ]] &&
      "$build/cli/auto-resume" nodes node3 2>/dev/null | awk '$1 == "node3:" && $4 < 3 {ok = 1} END {exit !ok}'
  }
  deadline=$((SECONDS + 120))
  until back3; do
    ((SECONDS < deadline)) || fail "node3 not replaced, idle and heard again within 120 s of its mark: $(scontrol -o show node node3)"
    sleep 0.2
  done
}

machine
echo "scale: 3 nodes with slurmd and agent, $max more declared; heartbeats every $interval s, heartbeat_timeout $timeout s, window $window s"
# stop_load N: stops the load generator of N nodes (they say goodbye) and
# sets result to its summary line.
stop_load() {
  kill -TERM "$load_pid"
  wait "$load_pid" || true
  load_pid=""
  result=$(grep '^heartbeats:' "$dir/load-$1.txt") || fail "no summary from ar-heartbeat-load: $(tail -n 5 "$dir/load-$1.txt")"
}
base_mark=""
for n in 0 $counts; do
  result=""
  if ((n > 0)); then
    # The sessions open over the first interval or two; the window starts
    # after that.
    warmup=$(awk -v i="$interval" -v n="$n" 'BEGIN {w = 2 * i + n / 500; printf "%.0f", w < 3 ? 3 : w}')
    "$load" --controller "$AUTO_RESUME_CONTROLLER" --munge-socket "$AUTO_RESUME_MUNGE_SOCKET" \
      --prefix hb --count "$n" --interval "$interval" --threads "$threads" \
      --warmup "$warmup" --seconds 86400 >"$dir/load-$n.txt" 2>&1 &
    load_pid=$!
    sleep "$warmup"
  fi
  before=$(cpu_ticks)
  sleep "$window"
  cpu=$(awk -v a="$before" -v b="$(cpu_ticks)" -v t="$ticks_per_s" -v w="$window" 'BEGIN {printf "%.1f", 100 * (b - a) / t / w}')
  rss=$(rss_mib)
  mark=$(mark_time)
  ((n == 0 || n == max)) || stop_load "$n"
  printf '%6d nodes: controller CPU %5s %% of a core, RSS %4s MiB; node3 marked %5s s after its death%s\n' \
    "$n" "$cpu" "$rss" "$mark" "${result:+; $result}"
  [[ -n $base_mark ]] || base_mark=$mark
  last_mark=$mark
done

# What the controller costs slurmctld, with the largest N beating. The
# controller runs as root; nothing else asks slurmctld as root in a window
# (the benchmark only sleeps and reads files), and squeue and sinfo run as
# nobody.
# sdiag_user SNAPSHOT USER: "COUNT TOTAL_MS" of the user's RPCs in an sdiag
# output; root's without the benchmark's own sdiag (REQUEST_STATS_INFO).
sdiag_user() {
  awk -v u="$2" '
    function field(name,   i) { for (i = 2; i <= NF; i++) if (index($i, name ":") == 1) return substr($i, length(name) + 2); return 0 }
    /by message type/ {part = "type"; next} /by user/ {part = "user"; next} /^[A-Z]/ {part = ""}
    part == "type" && $1 == "REQUEST_STATS_INFO" {sc = field("count"); st = field("total_time")}
    part == "user" && $1 == u {c = field("count"); t = field("total_time")}
    END {if (u == "root") {c -= sc; t -= st}; printf "%d %.1f\n", c, t / 1000}' <<<"$1"
}
# sdiag_types SNAPSHOT: each message type's count and total time, one line
# (the benchmark's own sdiag left out).
sdiag_types() {
  awk '
    function field(name,   i) { for (i = 2; i <= NF; i++) if (index($i, name ":") == 1) return substr($i, length(name) + 2); return 0 }
    /by message type/ {on = 1; next} /^[A-Z]/ {on = 0}
    on && NF >= 4 && $1 != "REQUEST_STATS_INFO" {printf "%s%s %d (%.1f ms)", sep, $1, field("count"), field("total_time") / 1000; sep = ", "}
    END {print ""}' <<<"$1"
}
sdiag -r >/dev/null
runuser -u nobody -- bash -c "end=\$((SECONDS + $sdiag_window)); while ((SECONDS < end)); do squeue >/dev/null; sinfo >/dev/null; sleep 10; done" &
lookers=$!
sleep "$sdiag_window"
wait "$lookers" || true
snapshot=$(sdiag)
read -r idle_count idle_ms < <(sdiag_user "$snapshot" root)
read -r look_count look_ms < <(sdiag_user "$snapshot" nobody)
idle_types=$(sdiag_types "$snapshot")
echo "slurmctld, $sdiag_window s at $max nodes, idle: the controller (root) $idle_count RPCs, $idle_ms ms; squeue and sinfo every 10 s (nobody) $look_count RPCs, $look_ms ms; by type, both: $idle_types"

# A repair: a protected 2-node step on node[1-2], node2 killed, the step
# resumed on node[1,3].
cat >"$dir/step.sh" <<'SCRIPT'
#!/bin/bash
echo "running attempt=$AUTO_RESUME_ATTEMPT node=$SLURMD_NODENAME"
exec sleep 100000
SCRIPT
chmod +x "$dir/step.sh"
out=$dir/repair.out
job=$(sbatch --parsable -N2 -w 'node[1-2]' -o "$out" --wrap "srun --auto-resume=1 $dir/step.sh")
running() { [[ $(grep -c "^running attempt=$1 " "$out" 2>/dev/null) == 2 ]]; }
deadline=$((SECONDS + 60))
until running 0; do
  ((SECONDS < deadline)) || fail "job $job did not start within 60 s"
  sleep 0.2
done
sdiag -r >/dev/null
start=$(now)
"$cluster_cmd" kill-node "$dir/c" node2 >"$dir/kill.log" 2>&1 || fail "kill-node failed: $(tail -n 5 "$dir/kill.log")"
end=$((SECONDS + sdiag_window))
until running 1; do
  ((SECONDS < end + 60)) || fail "job $job not running again within $((sdiag_window + 60)) s of node2's death"
  sleep 0.2
done
resumed=$(since "$start")
((SECONDS >= end)) || sleep $((end - SECONDS))
snapshot=$(sdiag)
read -r repair_count repair_ms < <(sdiag_user "$snapshot" root)
repair_types=$(sdiag_types "$snapshot")
scancel "$job"
echo "slurmctld, $sdiag_window s at $max nodes, a repair (running again after $resumed s): the controller and the step's srun (root) $repair_count RPCs, $repair_ms ms; by type: $repair_types"
stop_load "$max"
printf '%6d nodes: %s\n' "$max" "$result"
echo "node3 marked at $max nodes / at 0: $last_mark s / $base_mark s = x$(awk -v a="$last_mark" -v b="$base_mark" 'BEGIN {printf "%.2f", a / b}')"
