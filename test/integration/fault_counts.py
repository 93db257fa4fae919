#!/usr/bin/env python3
"""The fault matrix's counts (docs/faults.md), over every integration test.

record WORK CLUSTER TEST OUTDIR: at the end of one test, counts from its own
cluster and controller
  - healthy nodes marked: a node the controller marked (a reason it sets:
    "auto-resume: ..." or "Action:Replace heartbeat: ...", from slurmctld's
    log) while no fault was injected into it (scripts/cluster's faults.log:
    kill-node and freeze-node, until thaw-node or restart-node; a line for
    slurmctld or slurmdbd, which restart-slurmctld and stop-slurmdbd write,
    names no node and makes none faulty; stop-slurmd, cont-slurmd and
    kill-slurmd fault slurmd alone on a live host, which makes no node
    faulty: a mark then counts);
  - wrong relaunches: a relaunch whose node list holds a node that was
    killed or frozen at that moment (faults.log says it to the millisecond,
    the store's events to the second: a node counts when it was faulty at
    the start of the relaunch's second, so that a fault injected later in
    that second, after the decision perhaps, is not held against it);
  - steps lost: a protected step given up at its deadline (the repair did
    not finish in time) or still repairing when the test ended;
and writes them to OUTDIR/TEST.json.

report OUTDIR: prints each test's counts and the totals; fails when a count
is not 0 or no test recorded any.
"""

import json
import os
import re
import sqlite3
import sys
import time

MARKS = ("auto-resume: ", "Action:Replace heartbeat: ")
REASON = re.compile(r"^\[([0-9T:.-]+)\] update_node: node (\S+) reason set to: (.*)$")


def expand(hostlist):
    """node[1-3,5],gpu7 -> [node1, node2, node3, node5, gpu7] (the local cluster's forms)."""
    out = []
    for prefix, ranges, plain in re.findall(r"([^,\[]+)\[([^\]]+)\]|([^,\[\]]+)", hostlist):
        if plain:
            out.append(plain)
            continue
        for part in ranges.split(","):
            low, _, high = part.partition("-")
            for n in range(int(low), int(high or low) + 1):
                out.append(f"{prefix}{n:0{len(low)}d}")
    return out


def injected(cluster):
    """Node -> [(epoch, faulty after it)], in order, from scripts/cluster's log."""
    changes = {}
    try:
        with open(os.path.join(cluster, "faults.log"), encoding="utf-8") as log:
            for line in log:
                at, command, node = line.split()
                faulty = command in ("kill-node", "freeze-node")
                changes.setdefault(node, []).append((float(at), faulty))
    except FileNotFoundError:
        pass
    return changes


def faulty_at(changes, node, at):
    state = False
    for when, faulty in changes.get(node, []):
        if when > at:
            break
        state = faulty
    return state


def faulty_lately(changes, node, at, window=120):
    """Faulty at `at`, or within the `window` seconds before it."""
    return faulty_at(changes, node, at) or any(
        faulty and at - window <= when <= at for when, faulty in changes.get(node, []))


def record(work, cluster, test, outdir):
    changes = injected(cluster)
    counts = {"healthy_marked": [], "wrong_relaunches": [], "steps_lost": []}
    try:
        with open(os.path.join(cluster, "log", "slurmctld.log"), encoding="utf-8",
                  errors="replace") as log:
            for line in log:
                m = REASON.match(line.rstrip("\n"))
                if not m or not m.group(3).startswith(MARKS):
                    continue
                stamp, _, millis = m.group(1).partition(".")
                at = time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S")) + float(
                    "0." + (millis or "0"))
                # A node marked during or soon after a fault injected into
                # it is no healthy node.
                if not faulty_lately(changes, m.group(2), at):
                    counts["healthy_marked"].append(f"{m.group(2)}: {m.group(3)}")
    except FileNotFoundError:
        pass
    database = os.path.join(work, "state", "auto-resume.db")
    if os.path.exists(database):
        db = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
        for run_id, at, detail in db.execute(
                "SELECT run_id, at, detail FROM events WHERE kind = 'relaunch'"):
            m = re.search(r"as attempt (\d+) on (\S+)", detail)
            if not m:
                continue
            bad = [n for n in expand(m.group(2)) if faulty_at(changes, n, at)]
            if bad:
                counts["wrong_relaunches"].append(
                    f"{run_id} attempt {m.group(1)} on {m.group(2)}: {', '.join(bad)} down")
        for run_id, attempt, state, verdict, message in db.execute(
                "SELECT run_id, attempt, state, verdict, message FROM steps"):
            if state == "repairing" or (verdict == "give_up" and message.startswith(
                    ("the repair did not finish", "no verdict within"))):
                counts["steps_lost"].append(f"{run_id}#{attempt}: {state} {message}")
        db.close()
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, test + ".json"), "w", encoding="utf-8") as out:
        json.dump(counts, out)


def report(outdir):
    files = sorted(f for f in os.listdir(outdir) if f.endswith(".json")) if os.path.isdir(
        outdir) else []
    if not files:
        print(f"FAIL: no integration test recorded its fault counts in {outdir}")
        return 1
    totals = {"steps_lost": 0, "wrong_relaunches": 0, "healthy_marked": 0}
    print(f"{'test':<28} steps_lost wrong_relaunches healthy_marked")
    for name in files:
        with open(os.path.join(outdir, name), encoding="utf-8") as f:
            counts = json.load(f)
        row = {key: len(counts.get(key, [])) for key in totals}
        print(f"{name[:-5]:<28} {row['steps_lost']:>10} {row['wrong_relaunches']:>16} "
              f"{row['healthy_marked']:>14}")
        for key in totals:
            totals[key] += row[key]
            for what in counts.get(key, []):
                print(f"  {key}: {what}")
    print(f"{'all ' + str(len(files)) + ' tests':<28} {totals['steps_lost']:>10} "
          f"{totals['wrong_relaunches']:>16} {totals['healthy_marked']:>14}")
    return 0 if not any(totals.values()) else 1


def main(argv):
    if len(argv) == 6 and argv[1] == "record":
        record(*argv[2:])
        return 0
    if len(argv) == 3 and argv[1] == "report":
        return report(argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
