#!/usr/bin/env bash
# A benchmark that hangs past its smoke run's deadline (in salloc, as a
# benchmark whose srun waits forever would, with a stand-in for its
# controller in the background) still takes its cluster down: smoke.sh fails
# it, and its exit trap (bench/lib.sh) has run, its folder gone and no
# daemon of its cluster left. Without the trap on SIGTERM, bash dies there
# without running its exit trap.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
work=$(mktemp -d /tmp/ar-bench-timeout.XXXXXX)
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cat >"$work/hang.sh" <<SCRIPT
#!/usr/bin/env bash
set -euo pipefail
NAME=hang
source $repo/bench/lib.sh
echo "folder \$dir"
"\$cluster_cmd" up "\$dir/c" --nodes 1 --no-plugin >/dev/null
eval "\$("\$cluster_cmd" env "\$dir/c")"
echo "up"
sleep 600 &
controller_pid=\$!
salloc -N1 bash -c 'srun sleep 600'
SCRIPT
chmod +x "$work/hang.sh"
rc=0
AR_BENCH_DEADLINE=${AR_BENCH_DEADLINE:-20} "$repo/test/bench/smoke.sh" "^never$" "$work/hang.sh" >"$work/out" 2>&1 || rc=$?
cat "$work/out"
((rc != 0)) || fail "smoke.sh passed a benchmark that hung"
grep -q "still ran after" "$work/out" || fail "smoke.sh did not say that the benchmark ran past its deadline"
grep -qx "up" "$work/out" || fail "the benchmark's cluster did not start"
folder=$(sed -n 's/^folder //p' "$work/out")
[[ -n $folder ]] || fail "the benchmark printed no folder"
if [[ -e $folder ]]; then
  "$repo/scripts/cluster" down "$folder/c" >/dev/null 2>&1 || true
  rm -rf "$folder"
  fail "the benchmark's exit trap did not run: $folder was left (its cluster now taken down)"
fi
echo "ok"
