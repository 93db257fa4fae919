#!/usr/bin/env bash
# Continuous provisioning on the local cluster (docs/provisioning.md): two
# node groups reconciled at once by auto-resumed with the local provider
# (scripts/local-provider: a slot's instance is its slurmd). Group a wants 3
# nodes but its provider has capacity for 2 (exit 69): the 2 are kept and
# released (partial capacity), a `capacity_unavailable` event says so once,
# and a 3-node job in a's partition pends; group b gets its 2 meanwhile.
# When capacity returns, the third is created after capacity_backoff, the
# job starts on the three, and the group is InService. Unprovisioned slots
# never show in sinfo. Lowering a's count to 1 (`auto-resume group set`)
# with a job on a-2 and one on a-3 then takes the idle a-1 away at once
# (powered down and hidden again) and a-3 once its job ends; usage shows
# both closed. Along the
# way the admin's commands are checked: group status, group set (and what
# it refuses), usage, events --group/--level/--json, lifecycle-log (group
# b's lifecycle script), and that a user may not use them.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"
share_with_users  # nobody runs the CLI

host=$(hostname -s)
slots=$WORK/slots.conf
: >"$slots"
mapfile -t ports < <("$CLUSTER_CMD" free-ports 8)
for group in a b; do
  for i in 1 2 3 4; do
    echo "NodeName=$group-$i NodeHostname=$host Port=${ports[0]} CPUs=2 State=CLOUD" >>"$slots"
    ports=("${ports[@]:1}")
  done
done
# Power saving on (docs/provisioning.md, "The CLOUD state machine"); the
# static nodes' partition never powers down, the groups' never by itself.
power_saving 60
cluster_up --nodes 2 "${POWER_SAVING[@]}" --conf-line "Include $slots" \
  --conf-line 'PartitionName=pa Nodes=a-[1-4] SuspendTime=INFINITE' \
  --conf-line 'PartitionName=pb Nodes=b-[1-4] SuspendTime=INFINITE' >/dev/null

mkdir -p "$WORK/groups" "$CLUSTER/provider"
printf 'count=3\nmax_count=4\npartitions=pa\n' >"$WORK/groups/a.conf"
cat >"$WORK/lifecycle.sh" <<'SCRIPT'
#!/bin/sh
echo "lifecycle of $(hostname -s) done"
SCRIPT
chmod +x "$WORK/lifecycle.sh"
printf 'count=2\nmax_count=4\npartitions=pb\nlifecycle_script=%s\n' "$WORK/lifecycle.sh" \
  >"$WORK/groups/b.conf"
echo 2 >"$CLUSTER/provider/capacity-a"
# capacity_backoff=20: the slot whose create found no capacity stays hidden
# that long before it tries again (at 10 s, a loaded CI machine's sinfo
# calls missed the few seconds it was hidden).
provisioning_up "capacity_backoff=20"

cd "$WORK" || exit
idle() { [[ $(sinfo -h -n "$1" -N -o '%T' 2>/dev/null | head -n 1) == idle ]]; }
all_idle() {
  local n
  for n in "$@"; do idle "$n" || return 1; done
}
shown() { sinfo -h -N -o %N | sort -u | grep -x "$1" >/dev/null; }
assert_hidden() {
  local n
  for n in "$@"; do ! shown "$n" || fail "unprovisioned slot $n shows in sinfo: $(sinfo -N)"; done
}
job=$(sbatch --parsable -N3 -p pa -o "$WORK/job.out" --wrap 'srun -l printenv SLURMD_NODENAME')
job_state() { scontrol -o show job "$job" | grep -o ' JobState=[^ ]*' | cut -d= -f2; }

# Two of a's three slots get an instance (whichever creates come first).
idle_count() {
  local n count=0
  for n in "$@"; do ! idle "$n" || count=$((count + 1)); done
  echo "$count"
}
two_of_a() { [[ $(idle_count a-1 a-2 a-3) == 2 ]]; }
wait_until 60 "b-1 and b-2 idle" all_idle b-1 b-2
wait_until 60 "two of a-1, a-2 and a-3 idle" two_of_a
wait_until 20 "the capacity_unavailable event of group a" event_seen 'capacity_unavailable \(warning\): no capacity'
short=
for n in a-1 a-2 a-3; do idle "$n" || short=$n; done
wait_until 20 "$short, whose create found no capacity, hidden again" eval "! shown $short"
assert_hidden a-4 b-3 b-4
assert_eq "$(job_state)" PENDING "the 3-node job with 2 of a's nodes"

rm "$CLUSTER/provider/capacity-a"  # capacity is back
job_over() { [[ ! $(job_state) =~ ^(PENDING|CONFIGURING|RUNNING|COMPLETING)$ ]]; }
wait_until 60 "job $job to run on the third node and end" job_over
assert_eq "$(job_state)" COMPLETED "job $job ($(cat "$WORK/job.out"))"
assert_eq "$(grep -E '^[0-9]: ' "$WORK/job.out" | sort | tr '\n' ' ')" "0: a-1 1: a-2 2: a-3 " \
  "job $job's tasks"
assert_hidden a-4 b-3 b-4
wait_until 20 "group a InService" event_seen 'group_status.* -> InService'
events=$("$AR_CLI" events)
assert_eq "$(grep -c 'capacity_unavailable' <<<"$events")" 1 "capacity_unavailable events (one per episode)"

# group status, as words and as JSON.
"$AR_CLI" group status >status.txt
assert_contains status.txt '^a +compute +InService +3 +0 +4 +3 +0 +0 ' "group status"
assert_contains status.txt '^b +compute +InService +2 +0 +4 +2 +0 +0 ' "group status"
group_field() {  # GROUP FIELD: from group status --json
  "$AR_CLI" --json group status |
    python3 -c 'import json,sys; print([g[sys.argv[2]] for g in json.load(sys.stdin)["groups"] if g["name"] == sys.argv[1]][0])' "$1" "$2"
}
assert_eq "$(group_field b in_service)" 2 "group b's in_service (group status --json)"

# What group set refuses, the file left as it was.
cp "$WORK/groups/a.conf" a.conf.before
refused() {  # EXPECTED ARGS...: the command fails, saying EXPECTED
  local expected=$1
  shift
  if "$AR_CLI" "$@" >refused.out 2>&1; then fail "auto-resume $* was accepted"; fi
  assert_contains refused.out "$expected" "auto-resume $*"
}
refused "count 9 is more than max_count 4" group set a count=9
refused "unknown key 'size'" group set a size=1
refused "no group 'zz': cannot read $WORK/groups/zz.conf" group set zz count=1
refused "min_count 3 is more than count" group set b min_count=3
refused "is not a group name" group set ../a count=1
cmp -s a.conf.before "$WORK/groups/a.conf" || fail "a refused group set changed a.conf"
nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
if nobody "$AR_CLI" group set a count=0 >user.out 2>&1; then fail "a user's group set was accepted"; fi
assert_contains user.out "group_set is for root and SlurmUser, not uid" "a user's group set"
if nobody "$AR_CLI" usage >user.out 2>&1; then fail "a user's usage was accepted"; fi
assert_contains user.out "usage is for root and SlurmUser, not uid" "a user's usage"

# The lifecycle script's log of b-1, through the controller.
"$AR_CLI" lifecycle-log b-1 >lifecycle.out 2>lifecycle.err
assert_contains lifecycle.out "^lifecycle of $host done$" "lifecycle-log b-1"
assert_contains lifecycle.err "$WORK/lifecycle/b/b-1\.1\.log" "lifecycle-log b-1's path"
refused "'x-1' is no group's node" lifecycle-log x-1

# Scale-in with a job on a-2 and one on a-3: count 1 takes the idle a-1
# at once, hidden and drained again, and a-3 (busy, the highest slot) once
# its job ends; a-2 stays.
for n in 2 3; do
  sbatch --parsable -p pa -w "a-$n" -J "on-a-$n" -o /dev/null --wrap "until [ -e $WORK/end-a-$n ]; do sleep 0.2; done" >/dev/null
done
runs_on() { [[ $(squeue -h -n "on-$1" -t R -o %N) == "$1" ]]; }
wait_until 30 "the jobs on a-2 and a-3 to run" eval 'runs_on a-2 && runs_on a-3'
"$AR_CLI" group set a count=1 >set.out
assert_contains set.out "group a: count=1 written to $WORK/groups/a.conf; operation [0-9]+ \(count 1" \
  "group set"
assert_eq "$(cat "$WORK/groups/a.conf")" $'count=1\nmax_count=4\npartitions=pa' "a.conf after group set"
gone() { ! shown "$1"; }
wait_until 60 "a-1 powered down and hidden" gone a-1
wait_until 20 "the termination of a-1" event_seen 'group a node a-1 instance_terminated: scale_in'
state_of() { sinfo -h -n "$1" -N -o '%T' | head -n 1; }
assert_eq "$(state_of a-3)" draining "a-3's state while its job runs"
runs_on a-3 || fail "the job on a-3 ended with the scale-in"
[[ $(state_of a-2) == @(allocated|mixed) ]] || fail "a-2 is $(state_of a-2), not running its job"
touch end-a-3
wait_until 60 "a-3 powered down and hidden once its job ended" gone a-3
wait_until 20 "the termination of a-3" event_seen 'group a node a-3 instance_terminated: scale_in'
touch end-a-2
wait_until 30 "a-2 idle" idle a-2

# Metering: a's three instances, two of them ended by the scale-in.
"$AR_CLI" usage --group a >usage.txt
assert_contains usage.txt '^group a: 3 instance\(s\), ' "usage --group a"
"$AR_CLI" --json usage --group a >usage.json
ends=$(python3 -c 'import json,sys; print(sorted(i["end_reason"] for i in json.load(sys.stdin)["instances"] if i["started"]))' <usage.json)
assert_eq "$ends" "['', 'scale_in', 'scale_in']" "the end reasons of a's instances"

# Events of one group; warnings and graver, as cluster event records.
"$AR_CLI" events --group b >b-events.txt
assert_contains b-events.txt "group b node b-1 instance_created" "events --group b"
if grep -v ' group b ' b-events.txt; then fail "events --group b listed another's"; fi
"$AR_CLI" --json events --level warning >warnings.json
python3 - warnings.json <<'PY' || fail "events --level warning --json: $(cat warnings.json)"
import json, sys
events = json.load(open(sys.argv[1]))["events"]
assert events, "no events"
assert all(e["level"] in ("warning", "error") for e in events), events
capacity = [e for e in events if e["kind"] == "capacity_unavailable"]
assert len(capacity) == 1, capacity
e = capacity[0]
for key in ("event_id", "time", "group", "instance", "resource_type", "level", "description"):
    assert key in e, key
assert e["group"] == "a" and e["resource_type"] in ("group", "instance"), e
PY
note "ok"