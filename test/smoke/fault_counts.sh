#!/usr/bin/env bash
# test/integration/fault_counts.py counts what it should: a node the
# controller marked with no fault injected is a healthy node marked, a
# relaunch onto a killed node is a wrong relaunch, a step given up at its
# deadline is lost; a node marked after its kill, a relaunch after the
# node's restart, or one in whose second (the store's events keep whole
# seconds) a node was killed later, counts nothing. The report fails on any
# count.
set -euo pipefail
counts=$(dirname "$0")/../integration/fault_counts.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# A test's work folder: its cluster's logs and the controller's store.
# make_case NAME KILL_AT MARK_NODE RELAUNCH_AT MESSAGE [FAULTS_LINE]
make_case() {
  local work=$tmp/$1
  mkdir -p "$work/c/log" "$work/state"
  local kill_at=$2 mark_node=$3 relaunch_at=$4 message=$5
  printf '%s.250 kill-node node3\n%s.250 restart-node node3\n' "$kill_at" "$((kill_at + 30))" \
    >"$work/c/faults.log"
  [[ -z ${6:-} ]] || printf '%s\n' "$6" >>"$work/c/faults.log"
  printf '[%s] update_node: node %s reason set to: auto-resume: it is DOWN (job 1)\n' \
    "$(date -d "@$((kill_at + 3))" +%Y-%m-%dT%H:%M:%S.123)" "$mark_node" >"$work/c/log/slurmctld.log"
  python3 - "$work/state/auto-resume.db" "$relaunch_at" "$message" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("CREATE TABLE events (at INTEGER, run_id TEXT, kind TEXT, detail TEXT)")
db.execute("CREATE TABLE steps (run_id TEXT, attempt INTEGER, state TEXT, verdict TEXT, message TEXT)")
db.execute("INSERT INTO events VALUES (?, 'r', 'relaunch', 'relaunching run r as attempt 1 on node[1-3]')",
           (int(sys.argv[2]),))
db.execute("INSERT INTO steps VALUES ('r', 0, 'decided', 'relaunch', '')")
db.execute("INSERT INTO steps VALUES ('r', 1, 'decided', 'give_up', ?)", (sys.argv[3],))
db.commit()
PY
  python3 "$counts" record "$work" "$work/c" "$1" "$tmp/out-$1"
}

now=$(date +%s)
# Good: node3 killed, marked 3 s later, the relaunch after its restart.
make_case good "$now" node3 "$((now + 40))" "run r was relaunched 3 times"
python3 "$counts" report "$tmp/out-good" >"$tmp/good.txt" || fail "a clean run fails: $(cat "$tmp/good.txt")"
grep -q "^all 1 tests  *0  *0  *0$" "$tmp/good.txt" || fail "clean totals: $(cat "$tmp/good.txt")"
# Good: node1 killed half a second into the relaunch's second (after its
# decision, perhaps), which the store says to the second only.
make_case same_second "$now" node3 "$((now + 40))" "run r was relaunched 3 times" \
  "$((now + 40)).500 kill-node node1"
python3 "$counts" report "$tmp/out-same_second" >"$tmp/same.txt" ||
  fail "a kill after the relaunch's second began counts: $(cat "$tmp/same.txt")"
# Bad: node1 killed 0.4 s before the relaunch's second began.
make_case before "$now" node3 "$((now + 40))" "run r was relaunched 3 times" \
  "$((now + 39)).600 kill-node node1"
if python3 "$counts" report "$tmp/out-before" >"$tmp/before.txt"; then
  fail "a relaunch onto a node killed before it passes: $(cat "$tmp/before.txt")"
fi
grep -q "wrong_relaunches: r attempt 1 on node\[1-3\]: node1 down" "$tmp/before.txt" ||
  fail "no wrong relaunch named: $(cat "$tmp/before.txt")"
# Bad: node2 marked though only node3 was killed, the relaunch onto node3
# while it is down, and a step given up at its deadline.
make_case bad "$now" node2 "$((now + 10))" "the repair did not finish within repair_timeout=60 s"
if python3 "$counts" report "$tmp/out-bad" >"$tmp/bad.txt"; then
  fail "a run with faults passes: $(cat "$tmp/bad.txt")"
fi
grep -q "^all 1 tests  *1  *1  *1$" "$tmp/bad.txt" || fail "bad totals: $(cat "$tmp/bad.txt")"
grep -q "healthy_marked: node2: auto-resume: it is DOWN" "$tmp/bad.txt" || fail "no healthy mark named"
grep -q "wrong_relaunches: r attempt 1 on node\[1-3\]: node3 down" "$tmp/bad.txt" || fail "no wrong relaunch named"
# Nothing recorded: the report fails.
if python3 "$counts" report "$tmp/none" >/dev/null; then fail "an empty report passes"; fi
echo "fault counts: ok"
