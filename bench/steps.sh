#!/usr/bin/env bash
# Many protected steps: the controller's own work per look (bench/
# engine_load.cpp, ar-engine-load: the real resume engine, node keeper,
# store and request service, every outside call on a thread of its own as
# in auto-resumed, over the unit tests' in-memory Slurm, so that a look's
# time is the engine's alone: it never waits on slurmctld). Side by side:
# 1 step; --steps steps (each a 2-node job of its own, 48 users); the same
# with --repairs of them under repair throughout (their helper jobs pend).
# For each: registrations (srun's `register`, through the service), p50;
# --looks looks a second of the engine's clock apart: p50, p99, the most;
# with repairs, their sruns' `verdict` requests, p50 and p99; the store's
# size on disk. The last line: look p99 with the repairs / with 1 step.
#   bench/steps.sh [--steps N] [--repairs R] [--looks L] [--verdicts V]
# Defaults: 1000 steps, 8 repairs, 200 looks, 400 verdicts.
set -euo pipefail
steps=1000 repairs=8 looks=200 verdicts=400
while (($#)); do
  case $1 in
    --steps|--repairs|--looks|--verdicts)
      (($# >= 2)) || { echo "steps: $1 needs a value (try --help)" >&2; exit 2; } ;;&
    --steps) steps=$2; shift ;;
    --repairs) repairs=$2; shift ;;
    --looks) looks=$2; shift ;;
    --verdicts) verdicts=$2; shift ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "steps: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
NAME=steps
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
load=$build/bench/ar-engine-load
[[ -x $load ]] || { echo "steps: build first (no $load)" >&2; exit 1; }
machine
echo "the real engine, keeper, store (SQLite, WAL, synchronous=FULL) and service; an in-memory Slurm"
# The engine's log (every repair's lines) goes to a file, shown on failure.
if ! "$load" --steps "$steps" --repairs "$repairs" --ticks "$looks" --verdicts "$verdicts" 2>"$dir/engine.log"; then
  tail -n 20 "$dir/engine.log" >&2
  exit 1
fi
