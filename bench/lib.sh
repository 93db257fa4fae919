# shellcheck shell=bash
# What the fault benchmarks share: the built binaries, a scratch folder whose
# cluster and controller are stopped on exit, and a clock. Source it after
# the options are parsed, with NAME set to the benchmark's name.
: "${NAME:?set NAME before sourcing bench/lib.sh}"
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
plugin=$repo/build/spank/auto_resume.so daemon=$repo/build/controller/auto-resumed
[[ -f $plugin && -x $daemon ]] || { echo "$NAME: build first (no $plugin or $daemon)" >&2; exit 1; }
cluster_cmd=$repo/scripts/cluster

dir=$(mktemp -d /tmp/ar-bench.XXXXXX)
chmod 755 "$dir"
controller_pid=""
cleanup() {
  [[ -z $controller_pid ]] || kill "$controller_pid" 2>/dev/null || true
  "$cluster_cmd" down "$dir/c" >/dev/null 2>&1 || true
}
trap 'cleanup; rm -rf "$dir"' EXIT
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.1f", b - a}'; }
