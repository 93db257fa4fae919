# shellcheck shell=bash
# What the benchmarks share: the built binaries, a scratch folder whose
# cluster and controller are stopped on exit, a clock, a median and the
# machine's description. Source it after the options are parsed, with NAME
# set to the benchmark's name; a benchmark may set plugin first (another
# build of the plugin) and define bench_cleanup (run on exit, first; on
# SIGHUP, SIGINT and SIGTERM too). One that runs no binary of the build
# sets no_build=1 first.
# AR_BUILD_DIR: the build to take the binaries from (default: build/ in the
# repository).
: "${NAME:?set NAME before sourcing bench/lib.sh}"
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
build=${AR_BUILD_DIR:-$repo/build}
plugin=${plugin:-$build/spank/auto_resume.so} daemon=$build/controller/auto-resumed
if [[ -z ${no_build:-} && ! (-f $plugin && -x $daemon) ]]; then
  echo "$NAME: build first (no $plugin or $daemon)" >&2
  exit 1
fi
cluster_cmd=$repo/scripts/cluster
fail() { echo "$NAME: $*" >&2; exit 1; }
# nap SECONDS: a pause with no process started (bash's read -t on a pipe
# no one writes to).
exec {nap_fd}<> <(:)
nap() { read -rt "$1" -u "$nap_fd" || true; }
# wait_for SECONDS WHAT CMD...: poll CMD every wait_poll seconds (0.2 unless
# the benchmark sets it: one that times what it waits for looks more often)
# until it succeeds; fail at the deadline. A benchmark may define
# bench_alive (run at each look: it fails the benchmark itself, e.g. when
# its controller is gone) and bench_state (what the failure shows of the
# cluster).
wait_for() {
  local seconds=$1 deadline=$((SECONDS + $1)) what=$2 state=""
  shift 2
  until "$@"; do
    [[ $(type -t bench_alive) != function ]] || bench_alive
    if ((SECONDS >= deadline)); then
      [[ $(type -t bench_state) != function ]] || state="; $(bench_state)"
      fail "no $what within $seconds s$state"
    fi
    nap "${wait_poll:-0.2}"
  done
}

dir=$(mktemp -d /tmp/ar-bench.XXXXXX)
chmod 755 "$dir"
controller_pid=""
cleanup() {
  [[ $(type -t bench_cleanup) != function ]] || bench_cleanup
  [[ -z $controller_pid ]] || kill "$controller_pid" 2>/dev/null || true
  "$cluster_cmd" down "$dir/c" >/dev/null 2>&1 || true
}
trap 'cleanup; rm -rf "$dir"' EXIT
# A signal ends the benchmark through its exit trap: bash runs none for a
# signal it does not catch (a smoke run's timeout sends SIGTERM), and would
# leave the cluster's daemons running.
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
now() { date +%s.%N; }
# since START [DECIMALS]: the seconds from START (a now) to now (1 decimal).
since() { awk -v a="$1" -v b="$(now)" -v d="${2:-1}" 'BEGIN {printf "%.*f", d, b - a}'; }
# median NUMBER...: the median of the numbers.
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
# machine: the line that opens a benchmark's output (date, cores, memory, OS, Slurm).
machine() {
  local memory os
  memory=$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)
  os=$(. /etc/os-release && echo "$PRETTY_NAME")
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  machine: $(nproc) cores, $memory, $os, $(slurmd -V)"
}
