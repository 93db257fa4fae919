#!/usr/bin/env python3
"""Medians with bootstrap 95 % confidence intervals, for the benchmarks.

    bench/bootstrap.py [--resamples N] [--seed S] BASE OTHER...

Each file holds one number a line, its runs in the order they ran; all the
files hold as many runs, run i of each taken in the same round (interleaved
runs). Prints one line per file, BASE first: "MEDIAN LOW HIGH"; then one line
per OTHER: "DIFF LOW HIGH", DIFF = median(OTHER) - median(BASE). LOW and HIGH
bound the 95 % percentile interval over N resamples (default 2000) of the
rounds, drawn with replacement: each resample takes the same rounds from
every file, so that drift that hit one round hits all its variants alike.
Plain Python (no numpy); the seed (default 1) makes a run repeatable.
"""
import argparse
import random
import statistics
import sys


def read_runs(path):
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line.strip() for line in f if line.strip()]
    except OSError as e:
        sys.exit(f"bootstrap: cannot read '{path}': {e.strerror}")
    runs = []
    for n, line in enumerate(lines, 1):
        try:
            runs.append(float(line))
        except ValueError:
            sys.exit(f"bootstrap: {path}, line {n}: not a number: '{line}'")
    if not runs:
        sys.exit(f"bootstrap: '{path}' holds no runs")
    return runs


def percentile(sorted_values, q):
    """The q-quantile (0..1) of sorted values, linear between neighbours."""
    pos = q * (len(sorted_values) - 1)
    low = int(pos)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (pos - low)


def interval(values):
    values = sorted(values)
    return percentile(values, 0.025), percentile(values, 0.975)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("base")
    parser.add_argument("others", nargs="*")
    args = parser.parse_args()
    if args.resamples < 1:
        sys.exit(f"bootstrap: bad --resamples '{args.resamples}': at least 1")
    files = [args.base] + args.others
    series = [read_runs(path) for path in files]
    rounds = len(series[0])
    for path, runs in zip(files, series):
        if len(runs) != rounds:
            sys.exit(f"bootstrap: '{path}' holds {len(runs)} runs, '{files[0]}' {rounds}")

    rng = random.Random(args.seed)
    medians = [[] for _ in series]
    for _ in range(args.resamples):
        picks = [rng.randrange(rounds) for _ in range(rounds)]
        for i, runs in enumerate(series):
            medians[i].append(statistics.median(runs[p] for p in picks))

    for runs, resampled in zip(series, medians):
        print(statistics.median(runs), *interval(resampled))
    base = statistics.median(series[0])
    for runs, resampled in zip(series[1:], medians[1:]):
        diffs = [m - b for m, b in zip(resampled, medians[0])]
        print(statistics.median(runs) - base, *interval(diffs))


if __name__ == "__main__":
    main()
