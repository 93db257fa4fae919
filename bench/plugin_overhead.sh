#!/usr/bin/env bash
# srun start-up with the auto_resume plugin loaded vs not loaded, and with
# --auto-resume=1 (registration with a running controller: a munge session,
# one request, one SQLite commit; after the step, srun waits end_window, 3 s,
# for the controller's verdict), on the same local cluster, interleaved run
# by run so that drift hits all sides alike. Also times the cluster's start
# (to all nodes idle) and its teardown.
#   bench/plugin_overhead.sh [--runs N] [--nodes N] [--plugin PATH]
# Default plugin: the one in AR_BUILD_DIR (default build/), as bench/lib.sh says.
set -euo pipefail
runs=40 nodes=4 plugin=""
while (($#)); do
  case $1 in
    --runs) runs=$2; shift ;;
    --nodes) nodes=$2; shift ;;
    --plugin) plugin=$2; shift ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "plugin_overhead: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "plugin_overhead: bad --runs '$runs'" >&2; exit 2; }
NAME=plugin_overhead
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
now_us() { echo $(($(date +%s%N) / 1000)); }

t0=$(now_us)
"$repo/scripts/cluster" up "$dir/c" --nodes "$nodes" --plugin "$plugin" >/dev/null
up_us=$(($(now_us) - t0))
eval "$("$repo/scripts/cluster" env "$dir/c")"
plugstack=$dir/c/etc/plugstack.conf
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf 'provider=local\nlisten=127.0.0.1:%s\nstate_dir=%s\nmunge_socket=%s\n' \
  "$port" "$dir/state" "$dir/c/munge/munge.sock" >"$dir/auto-resumed.conf"
"$daemon" --config "$dir/auto-resumed.conf" 2>"$dir/auto-resumed.log" &
controller_pid=$!
with_plugin="required $plugin controller=127.0.0.1:$port munge_socket=$dir/c/munge/munge.sock"

time_srun() {  # PLUGSTACK_LINE SRUN_ARGS... -> microseconds
  printf '%s\n' "$1" >"$plugstack"
  shift
  local start
  start=$(now_us)
  srun -N "$nodes" "$@" true 2>/dev/null
  echo $(($(now_us) - start))
}

# Measured inside one allocation, as the sruns of a batch script run.
measure() {
  printf '%s\n' "$with_plugin" >"$plugstack"
  # Until the controller answers: a registered step's tasks get AUTO_RESUME_ATTEMPT.
  local deadline=$((SECONDS + 30)) attempt=""
  until [[ $attempt == 0 ]]; do
    ((SECONDS < deadline)) || { echo "the controller did not take a step in 30 s: $(cat "$dir/probe.err")" >&2; return 1; }
    attempt=$(srun -N1 --auto-resume=1 printenv AUTO_RESUME_ATTEMPT 2>"$dir/probe.err") || sleep 0.1
  done
  : >"$dir/none"; : >"$dir/loaded"; : >"$dir/flagged"
  for ((i = 0; i < runs; i++)); do
    time_srun "" >>"$dir/none"
    time_srun "$with_plugin" >>"$dir/loaded"
    time_srun "$with_plugin" --auto-resume=1 >>"$dir/flagged"
  done
}
export -f now_us time_srun measure
export plugstack nodes runs dir with_plugin
salloc -N "$nodes" bash -c measure 2>"$dir/salloc.err" ||
  { echo "plugin_overhead: measuring failed: $(cat "$dir/salloc.err")" >&2; exit 1; }
mapfile -t runs_none <"$dir/none"; mapfile -t runs_loaded <"$dir/loaded"; mapfile -t runs_flagged <"$dir/flagged"
none=$(median "${runs_none[@]}") loaded=$(median "${runs_loaded[@]}") flagged=$(median "${runs_flagged[@]}")

t0=$(now_us)
"$repo/scripts/cluster" down "$dir/c" >/dev/null
down_us=$(($(now_us) - t0))

machine
ms() { awk -v us="$1" 'BEGIN {printf "%.1f ms", us / 1000}'; }
echo "cluster up ($nodes nodes to idle): $(ms "$up_us")   down: $(ms "$down_us")"
echo "srun -N$nodes true, median of $runs interleaved runs each:"
echo "  plugin not loaded:                 $(ms "$none")"
echo "  plugin loaded, option not given:   $(ms "$loaded")"
echo "  plugin loaded, --auto-resume=1:    $(ms "$flagged")   (registered; then srun waits end_window for the verdict)"
awk -v n="$none" -v l="$loaded" -v f="$flagged" \
  'BEGIN {printf "ratio loaded/not loaded: %.3f   flagged/not loaded: %.3f\n", l/n, f/n}'
