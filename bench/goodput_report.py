#!/usr/bin/python3
"""The figures and the picture of bench/goodput.sh, from its logs.

    goodput_report.py --out DIR --ways auto-resume,native

For each WAY, DIR holds:
  WAY-steps.log   examples/train.py --step-log: 'EPOCH PID start|step|checkpoint K'
  WAY-faults.log  'EPOCH KIND TARGET', one line per fault injected
  WAY-window      'T0 T_END': the training's first start and the end of the
                  wall time (epoch seconds)
  WAY-events.log  the controller's events (auto-resume events), if the way
                  ran one: its 'registered: step S attempt N' lines split a
                  fault's downtime in two

Definitions (bench/RESULTS.md says the same):
  step time   the median time between two consecutive steps of one run
  final model the training at the end of the wall time: its last step if
              the run then going had not been hit by a fault, else its last
              checkpoint (what a resume would start from)
  ETTR        steps of the final model x step time / wall time
  downtime    per fault: from the fault to the first step of a run started
              after it (the training going again); a fault with none before
              the end counts until the end, and is marked '(not over)'
  steps lost  per fault: the highest step before it less the step the next
              run started from
  the split   per fault, where the controller's events are there: from the
              fault to the next attempt registered with the controller (its
              detection, the repair and srun's relaunch), and from then to
              the training's first step (the new step's start: the program,
              torch, the process group, the checkpoint); the events are to
              the second, so each part is +-0.5 s

Prints per way the ETTR, the downtime per fault (median, p90) and the steps
lost per fault, overall and per kind, and each fault; then
'ETTR auto-resume / native: A / N = xR'; writes DIR/goodput.png. Exits 1,
saying why, when a log is missing or matplotlib is not there.
"""

import argparse
import calendar
import os
import re
import statistics
import sys
import time


def fail(text):
    sys.exit(f"goodput_report: {text}")


def read_lines(path):
    try:
        with open(path) as f:
            return [line.split() for line in f if line.strip()]
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")


def percentile(values, q):
    """Linear interpolation between the closest ranks (numpy's default)."""
    values = sorted(values)
    if len(values) == 1:
        return values[0]
    pos = (len(values) - 1) * q
    low = int(pos)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (pos - low)


REGISTERED = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) .* registered: step \S+ attempt (\d+)")


def registrations(out, way):
    """Epoch seconds (the middle of the second) of each attempt registered after the first."""
    path = os.path.join(out, f"{way}-events.log")
    if not os.path.exists(path):
        return []
    out_ = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = REGISTERED.match(line)
            if m and int(m.group(2)) > 0:
                out_.append(calendar.timegm(time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%SZ")) + 0.5)
    return sorted(out_)


def analyse(out, way):
    rows = read_lines(os.path.join(out, f"{way}-steps.log"))
    events = sorted((float(r[0]), r[1], r[2], int(r[3])) for r in rows if len(r) == 4)
    faults = [(float(r[0]), r[1], r[2]) for r in read_lines(os.path.join(out, f"{way}-faults.log"))] \
        if os.path.exists(os.path.join(out, f"{way}-faults.log")) else []
    window = read_lines(os.path.join(out, f"{way}-window"))
    t0, t_end = float(window[0][0]), float(window[0][1])
    events = [e for e in events if e[0] <= t_end]
    starts = [e for e in events if e[2] == "start"]
    if not starts:
        fail(f"{way}: no training start in its step log")

    # Step time: consecutive steps of one run (one pid).
    gaps, last = [], {}
    for t, pid, what, step in events:
        if what != "step":
            continue
        if pid in last and last[pid][1] == step - 1:
            gaps.append(t - last[pid][0])
        last[pid] = (t, step)
    if not gaps:
        fail(f"{way}: fewer than two consecutive steps in its step log")
    step_time = statistics.median(gaps)

    # The final model.
    last_start = starts[-1]
    hit = any(f[0] > last_start[0] for f in faults)
    run_steps = [e[3] for e in events if e[1] == last_start[1] and e[2] == "step" and e[0] >= last_start[0]]
    checkpoints = [e[3] for e in events if e[2] == "checkpoint"]
    if hit:
        final = checkpoints[-1] if checkpoints else 0
    else:
        final = run_steps[-1] if run_steps else last_start[3]
    wall = t_end - t0
    ettr = final * step_time / wall

    registered = registrations(out, way)
    per_fault = []
    for t, kind, target in faults:
        before = [e[3] for e in events if e[2] == "step" and e[0] <= t]
        highest = max(before) if before else 0
        after = [s for s in starts if s[0] > t]
        resumed = None
        for s in after:
            steps = [e for e in events if e[1] == s[1] and e[2] == "step" and e[0] > s[0]]
            if steps:
                resumed = (s, steps[0])
                break
        if resumed:
            downtime = resumed[1][0] - t
            lost = highest - resumed[0][3]
            over = True
        else:
            downtime = t_end - t
            lost = None
            over = False
        # The attempt the controller relaunched for it: registered between
        # the fault and the run's first step.
        relaunched = None
        if resumed:
            relaunched = next((r for r in registered if t - 0.5 <= r <= resumed[1][0] + 0.5), None)
        per_fault.append({"t": t - t0, "kind": kind, "target": target, "downtime": downtime,
                          "lost": lost, "over": over,
                          "relaunch": None if relaunched is None else max(relaunched - t, 0.0)})
    return {"way": way, "t0": t0, "wall": wall, "step_time": step_time, "final": final,
            "ettr": ettr, "faults": per_fault, "events": events}


def summary(faults):
    if not faults:
        return "no fault"
    downs = [f["downtime"] for f in faults]
    lost = [f["lost"] for f in faults if f["lost"] is not None]
    open_ = sum(1 for f in faults if not f["over"])
    text = (f"downtime per fault median {statistics.median(downs):.1f} s, "
            f"p90 {percentile(downs, 0.9):.1f} s")
    if lost:
        text += f"; steps lost per fault median {statistics.median(lost):g}, mean {statistics.mean(lost):.1f}"
    if open_:
        text += f"; {open_} not over at the end (counted to the end)"
    return text


def report(result):
    r = result
    print(f"{r['way']}: wall {r['wall']:.1f} s, step time {r['step_time'] * 1000:.1f} ms, "
          f"final model at step {r['final']} = {r['final'] * r['step_time']:.1f} s of training: "
          f"ETTR {r['ettr']:.3f}")
    print(f"  {len(r['faults'])} faults: {summary(r['faults'])}")
    for kind in sorted({f["kind"] for f in r["faults"]}):
        print(f"  {kind}: {summary([f for f in r['faults'] if f['kind'] == kind])}")
    split = [f for f in r["faults"] if f["relaunch"] is not None]
    if split:
        to_relaunch = [f["relaunch"] for f in split]
        to_step = [f["downtime"] - f["relaunch"] for f in split]
        print(f"  split of {len(split)} downtimes: fault to the relaunched attempt registered median "
              f"{statistics.median(to_relaunch):.1f} s, then to its first step median "
              f"{statistics.median(to_step):.1f} s (+-0.5 s)")
    for f in r["faults"]:
        lost = "-" if f["lost"] is None else f["lost"]
        relaunch = "" if f["relaunch"] is None else f" (relaunched at +{f['relaunch']:.1f} s)"
        print(f"    +{f['t']:6.1f} s {f['kind']:<7} {f['target']:<14} downtime {f['downtime']:6.1f} s"
              f"{'' if f['over'] else ' (not over)'}{relaunch}, steps lost {lost}")


def draw(results, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        fail("no matplotlib to draw the picture: apt-get install python3-matplotlib "
             "(scripts/bootstrap does)")
    colors = {"killed": "tab:red", "frozen": "tab:blue", "hung": "tab:orange", "crash": "tab:purple"}
    fig, axes = plt.subplots(len(results), 1, figsize=(8, 2.3 * len(results) + 0.6), sharex=True,
                             sharey=True, squeeze=False)
    for ax, r in zip(axes[:, 0], results):
        runs = {}
        for t, pid, what, step in r["events"]:
            if what == "step":
                runs.setdefault(pid, ([], []))
                runs[pid][0].append(t - r["t0"])
                runs[pid][1].append(step)
        for xs, ys in runs.values():
            ax.plot(xs, ys, color="tab:green", linewidth=1.2)
        for kind in colors:
            ts = [f["t"] for f in r["faults"] if f["kind"] == kind]
            for i, t in enumerate(ts):
                ax.axvline(t, color=colors[kind], linestyle="--", linewidth=1,
                           label=kind if i == 0 else None)
        ax.set_title(f"{r['way']}: ETTR {r['ettr']:.2f}", fontsize=10)
        ax.set_ylabel("training step")
        ax.set_xlim(0, r["wall"])
        ax.grid(alpha=0.3)
        if r["faults"]:
            ax.legend(fontsize=8, loc="upper left")
    axes[-1, 0].set_xlabel("wall time since the training's start (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="the benchmark's output folder")
    parser.add_argument("--ways", required=True, help="comma-separated, e.g. auto-resume,native")
    args = parser.parse_args(argv)
    ways = [w for w in args.ways.split(",") if w]
    if len(ways) != 2:
        parser.error(f"--ways '{args.ways}': two ways, comma-separated")
    results = [analyse(args.out, way) for way in ways]
    for r in results:
        report(r)
    png = os.path.join(args.out, "goodput.png")
    draw(results, png)
    print(f"picture: {png}")
    a, n = results[0]["ettr"], results[1]["ettr"]
    ratio = f"x{a / n:.2f}" if n > 0 else "x-"
    print(f"ETTR {ways[0]} / {ways[1]}: {a:.2f} / {n:.2f} = {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
