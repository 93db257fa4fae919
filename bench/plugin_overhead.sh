#!/usr/bin/env bash
# srun start-up with the auto_resume plugin loaded vs not loaded, and with
# --auto-resume=1 (registration with a running controller: a munge session,
# one request, one SQLite commit; then, after the step, whatever srun waits
# for the controller's verdict), on the same local cluster, interleaved run
# by run so that drift hits all sides alike. Prints each variant's median and
# the differences loaded - not loaded and flagged - not loaded, each with a
# bootstrap 95 % confidence interval (2,000 resamples of the rounds:
# bench/bootstrap.py). Also times the cluster's start (to all nodes idle) and
# its teardown.
#   bench/plugin_overhead.sh [--runs N] [--nodes N] [--plugin PATH]
# Defaults: 200 runs of each variant, 4 nodes, the plugin in AR_BUILD_DIR
# (default build/), as bench/lib.sh says. About 3 minutes: a flagged srun
# whose tasks all exited 0 hears its verdict at once.
set -euo pipefail
runs=200 nodes=4 plugin=""
while (($#)); do
  case $1 in
    --runs|--nodes|--plugin)
      (($# >= 2)) || { echo "plugin_overhead: $1 needs a value" >&2; exit 2; } ;;&
    --runs) runs=$2; shift ;;
    --nodes) nodes=$2; shift ;;
    --plugin) plugin=$2; shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "plugin_overhead: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "plugin_overhead: bad --runs '$runs': a whole number of runs, at least 1" >&2; exit 2; }
[[ $nodes =~ ^[1-9][0-9]*$ ]] || { echo "plugin_overhead: bad --nodes '$nodes': a whole number of nodes, at least 1" >&2; exit 2; }
NAME=plugin_overhead
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
now_us() { echo $(($(date +%s%N) / 1000)); }

t0=$(now_us)
"$repo/scripts/cluster" up "$dir/c" --nodes "$nodes" --plugin "$plugin" >/dev/null
up_us=$(($(now_us) - t0))
eval "$("$repo/scripts/cluster" env "$dir/c")"
plugstack=$dir/c/etc/plugstack.conf
port=$("$repo/scripts/cluster" free-ports 1)
# (No cap on the steps a job registers: --runs may pass the default's 600.)
printf 'provider=local\nlisten=127.0.0.1:%s\nstate_dir=%s\nmunge_socket=%s\n%s\n' \
  "$port" "$dir/state" "$dir/c/munge/munge.sock" \
  $'max_job_steps_per_hour=1000000\nmax_user_steps_per_hour=1000000' >"$dir/auto-resumed.conf"
"$daemon" --config "$dir/auto-resumed.conf" 2>"$dir/auto-resumed.log" &
controller_pid=$!
# required=1: a flagged srun whose step the controller did not register
# fails instead of running unprotected, so that no flagged run is timed
# without its registration (plain steps never read it). The probe goes
# without it: a srun refused under required=1 leaves its step behind in
# slurmctld (Slurm 22.05), holding its nodes' CPUs from the next sruns.
probe_line="required $plugin controller=127.0.0.1:$port munge_socket=$dir/c/munge/munge.sock"
with_plugin="$probe_line required=1"

time_srun() {  # PLUGSTACK_LINE SRUN_ARGS... -> microseconds; fails with srun
  printf '%s\n' "$1" >"$plugstack"
  shift
  local start end
  start=$(now_us)
  srun -N "$nodes" "$@" true 2>"$dir/srun.err" ||
    { echo "plugin_overhead: srun -N $nodes $* true failed: $(cat "$dir/srun.err")" >&2; return 1; }
  end=$(now_us)
  echo $((end - start))
}

# Measured inside one allocation, as the sruns of a batch script run.
measure() {
  printf '%s\n' "$probe_line" >"$plugstack"
  # Until the controller answers: a registered step's tasks get AUTO_RESUME_ATTEMPT
  # (an unregistered one runs unprotected, without it).
  local deadline=$((SECONDS + 30)) attempt=""
  until [[ $attempt == 0 ]]; do
    ((SECONDS < deadline)) || { echo "the controller did not take a step in 30 s: $(cat "$dir/probe.err")" >&2; return 1; }
    attempt=$(srun -N1 --auto-resume=1 printenv AUTO_RESUME_ATTEMPT 2>"$dir/probe.err") || sleep 0.1
  done
  : >"$dir/none"; : >"$dir/loaded"; : >"$dir/flagged"
  for ((i = 0; i < runs; i++)); do
    time_srun "" >>"$dir/none" || return 1
    time_srun "$with_plugin" >>"$dir/loaded" || return 1
    time_srun "$with_plugin" --auto-resume=1 >>"$dir/flagged" || return 1
  done
}
export -f now_us time_srun measure
export plugstack nodes runs dir probe_line with_plugin
salloc -N "$nodes" bash -c measure 2>"$dir/salloc.err" ||
  { echo "plugin_overhead: measuring failed: $(cat "$dir/salloc.err")" >&2; exit 1; }
# Each line: median, then the interval's bounds (us); the differences last.
mapfile -t stats < <(python3 "$repo/bench/bootstrap.py" "$dir/none" "$dir/loaded" "$dir/flagged")
((${#stats[@]} == 5)) || { echo "plugin_overhead: bench/bootstrap.py failed" >&2; exit 1; }

t0=$(now_us)
"$repo/scripts/cluster" down "$dir/c" >/dev/null
down_us=$(($(now_us) - t0))

machine
ms() { awk -v us="$1" 'BEGIN {printf "%.1f ms", us / 1000}'; }
# with_ci "MEDIAN LOW HIGH" [+]: "MEDIAN ms  [LOW, HIGH]" in ms; + signs them.
with_ci() {
  awk -v sign="${2:-}" '{
    f = (sign == "+") ? "%+.1f" : "%.1f"
    printf f " ms  [" f ", " f "]", $1 / 1000, $2 / 1000, $3 / 1000
  }' <<<"$1"
}
echo "cluster up ($nodes nodes to idle): $(ms "$up_us")   down: $(ms "$down_us")"
echo "srun -N$nodes true, median of $runs interleaved runs each [bootstrap 95 % confidence interval]:"
echo "  plugin not loaded:                 $(with_ci "${stats[0]}")"
echo "  plugin loaded, option not given:   $(with_ci "${stats[1]}")"
echo "  plugin loaded, --auto-resume=1:    $(with_ci "${stats[2]}")   (registered; srun then waits for the verdict)"
echo "  loaded - not loaded:               $(with_ci "${stats[3]}" +)"
echo "  flagged - not loaded:              $(with_ci "${stats[4]}" +)"
read -r none _ <<<"${stats[0]}"; read -r loaded _ <<<"${stats[1]}"; read -r flagged _ <<<"${stats[2]}"
awk -v n="$none" -v l="$loaded" -v f="$flagged" \
  'BEGIN {printf "ratio loaded/not loaded: %.3f   flagged/not loaded: %.3f\n", l/n, f/n}'
