#!/usr/bin/env bash
# A benchmark's smoke run: smoke.sh RATIO_PATTERN BENCHMARK [OPTIONS...] runs
# BENCHMARK with OPTIONS (the smallest that still take its every path) and
# fails if it fails or prints no line matching RATIO_PATTERN (an extended
# regular expression for its ratio line, with numbers in it). It asserts no
# timing: the figures belong in bench/RESULTS.md, from full runs. A benchmark
# still running after AR_BENCH_DEADLINE seconds (default 240, below ctest's
# 300) gets SIGTERM, so that its exit trap takes its cluster down.
set -euo pipefail
(($# >= 2)) || { echo "usage: smoke.sh RATIO_PATTERN BENCHMARK [OPTIONS...]" >&2; exit 2; }
pattern=$1 bench=$2
shift 2
out=$(mktemp /tmp/ar-bench-smoke.XXXXXX)
trap 'rm -f "$out"' EXIT
start=$SECONDS
rc=0
deadline=${AR_BENCH_DEADLINE:-240}
timeout -k 30 "$deadline" "$bench" "$@" 2>&1 | tee "$out" || rc=$?
echo "[smoke] $(basename "$bench") $*: exit $rc after $((SECONDS - start)) s"
((rc != 124)) || { echo "FAIL [smoke]: $(basename "$bench") still ran after $deadline s" >&2; exit 1; }
((rc == 0)) || { echo "FAIL [smoke]: $(basename "$bench") exited with status $rc" >&2; exit 1; }
grep -qE -- "$pattern" "$out" ||
  { echo "FAIL [smoke]: $(basename "$bench") printed no line matching /$pattern/" >&2; exit 1; }
