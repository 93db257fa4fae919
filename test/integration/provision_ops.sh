#!/usr/bin/env bash
# Continuous provisioning's repairs and the admin's commands on the local
# cluster (docs/provisioning.md), one compute group g of 3 nodes:
#   1. its lifecycle script, a deep health check (auto-resume-healthcheck's
#      cpu stress check) before the node takes jobs, fails (the node's
#      recorded baseline is out of reach): each failure is an event with
#      the host, the script and its log's end, the instance is terminated,
#      and after max_bootstrap_failures in a row the group stops;
#      `lifecycle-log` shows the log; once the baseline is right, `group
#      retry` brings the 3 nodes;
#   2. `Action:Replace` on g-2: the same node name comes back as a new
#      instance (two metering records for g-2);
#   3. `group roll g --batch 2` with a job on g-1: g-2 and g-3 are replaced
#      together while the job runs; g-1 is drained, and replaced once its
#      job ends;
#   4. an instance the provider lists and the controller never made (an
#      orphan) is terminated after orphan_timeout;
#   5. `events --follow`, started with the controller, printed the group's
#      events as they came, each once and in order.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

group_slots 4 g
cluster_up --nodes 1 "${SLOTS[@]}" >/dev/null
cd "$WORK" || exit

mkdir -p groups "$CLUSTER/provider"
cat >lifecycle.sh <<SCRIPT
#!/bin/sh
# The deep health check, dry: a failure fails the script (exit 1), and the
# provider terminates the instance.
"$AR_HEALTHCHECK" --check cpu --stress-seconds 1 --baseline-file "$WORK/baseline" --dry-run || exit 1
echo "lifecycle ok"
SCRIPT
chmod +x lifecycle.sh
echo 1000000000000 >baseline  # bogo ops/s no node reaches
printf 'count=3\nmax_count=4\npartitions=pg\nlifecycle_script=%s\n' "$WORK/lifecycle.sh" \
  >groups/g.conf
provisioning_up "max_bootstrap_failures=2
orphan_timeout=3"
# `events --follow`, from now on, for the whole test: checked at the end.
"$AR_CLI" events --follow --group g >follow.txt 2>follow.err &
follow_pid=$!
on_exit "kill $follow_pid 2>/dev/null"

idle() { [[ $(sinfo -h -n "$1" -N -o '%T' 2>/dev/null | head -n 1) == idle ]]; }
all_idle() {
  local n
  for n in "$@"; do idle "$n" || return 1; done
}
# records NODE: how many of NODE's metering records have an instance.
records() {
  "$AR_CLI" --json usage --group g |
    python3 -c 'import json,sys; print(sum(1 for i in json.load(sys.stdin)["instances"] if i["node"] == sys.argv[1] and i["started"]))' "$1"
}
# ended NODE REASON: NODE has a metering record ended for REASON.
ended() {
  "$AR_CLI" --json usage --group g |
    python3 -c 'import json,sys; sys.exit(not any(i["node"] == sys.argv[1] and i["end_reason"] == sys.argv[2] for i in json.load(sys.stdin)["instances"]))' "$1" "$2"
}

# 1. The lifecycle script fails: the group stops after 2 in a row.
wait_until 60 "group g to stop" event_seen 'group g group_stopped \(error\): [23] lifecycle failures in a row'
"$AR_CLI" events --group g --level error >errors.txt
assert_contains errors.txt "group g node (g-[1-3]) lifecycle_failed \(error\): the lifecycle script failed.*host \1.*$WORK/lifecycle\.sh.*would mark \1 FAIL: Action:Replace cpu: " \
  "a lifecycle failure's event (host, script, the log's end)"
"$AR_CLI" group status >status.txt
assert_contains status.txt '^g +compute +Failed .*stopped after [23] lifecycle failures in a row \(auto-resume group retry g\)' \
  "group status of the stopped group"
failed=$(grep -o 'node g-[1-3] lifecycle_failed' errors.txt | head -n 1 | cut -d' ' -f2)
"$AR_CLI" lifecycle-log "$failed" >log.txt
assert_contains log.txt "^cpu: fail: cpu throughput [0-9]+ bogo ops/s is below 50% of this node's baseline 1000000000000$" \
  "lifecycle-log $failed"
wait_until 30 "the failed instances terminated" ended "$failed" bootstrap
for n in g-1 g-2 g-3; do ! idle "$n" || fail "$n is idle although its lifecycle script failed"; done

rm baseline
"$AR_CLI" group retry g >retry.txt
assert_contains retry.txt "group g creates again \(it was stopped after [23] lifecycle failures" "group retry"
wait_until 60 "g-1, g-2 and g-3 idle after the retry" all_idle g-1 g-2 g-3
"$AR_CLI" lifecycle-log g-1 >log.txt
assert_contains log.txt "^lifecycle ok$" "lifecycle-log g-1 after the retry"

# 2. Action:Replace on g-2: the same name, a new instance.
before=$(records g-2)
scontrol update nodename=g-2 state=fail reason="Action:Replace bad memory"
wait_until 60 "g-2 terminated for its replacement" event_seen 'group g node g-2 instance_terminated: replace'
wait_until 60 "g-2 back, idle" idle g-2
assert_eq "$(records g-2)" $((before + 1)) "g-2's instances after its replacement"
ended g-2 replace || fail "g-2's first instance has no record ended by the replacement"

# 3. A rolling update, 2 at a time, with a job on g-1.
job=$(sbatch --parsable -p pg -w g-1 -o /dev/null --wrap "until [ -e $WORK/end-job ]; do sleep 0.2; done")
job_state() { scontrol -o show job "$job" | grep -o ' JobState=[^ ]*' | cut -d= -f2; }
job_runs() { [[ $(job_state) == RUNNING ]]; }
wait_until 30 "job $job to run on g-1" job_runs
"$AR_CLI" group roll g --batch 2 >roll.txt
assert_contains roll.txt "group g: 3 instance\(s\) to replace, 2 at a time" "group roll"
wait_until 60 "g-2 and g-3 replaced" \
  eval "event_seen 'group g node g-2 instance_terminated: roll' && event_seen 'group g node g-3 instance_terminated: roll'"
# Both went before either came back: two at once.
"$AR_CLI" events --group g >events.txt
sed -n '/roll_started/,$p' events.txt >after-roll.txt
first_back=$(grep -n 'instance_created' after-roll.txt | head -n 1 | cut -d: -f1 || true)
for n in g-2 g-3; do
  gone_at=$(grep -n "node $n instance_terminated: roll" after-roll.txt | cut -d: -f1)
  [[ -z $first_back ]] || ((gone_at < first_back)) ||
    fail "$n was not replaced together with the other: $(cat after-roll.txt)"
done
wait_until 60 "g-2 and g-3 back, idle" all_idle g-2 g-3
assert_eq "$(job_state)" RUNNING "the job on g-1 while the others were replaced"
g1_state=$(sinfo -h -n g-1 -N -o '%T' | head -n 1)
[[ $g1_state == draining ]] || fail "g-1 is $g1_state, not draining, while its job runs"
touch end-job
wait_until 60 "g-1 replaced once its job ended" event_seen 'group g node g-1 instance_terminated: roll'
wait_until 60 "g-1 back, idle" idle g-1
in_service() { "$AR_CLI" group status | grep -qE '^g +compute +InService +3 +0 +4 +3 +0 +0 +[0-9]+ *$'; }
wait_until 30 "group g InService after the roll" in_service

# 4. An orphan: an instance of g-4 under a token the controller never gave.
orphan=$CLUSTER/provider/instances/g:g-4:9
echo "i-0rphan g-4 g" >"$orphan"
wait_until 30 "the orphan terminated" event_seen 'group g node g-4 orphan_terminated \(warning\): instance i-0rphan'
[[ ! -e $orphan ]] || fail "the orphan's instance is still there"
assert_eq "$(records g-4)" 0 "g-4's metering records (the orphan was never the controller's)"

# 5. What events --follow printed as it came: the group's events from its
# start on, each once, in order, through to the orphan's termination.
wait_until 10 "events --follow to print the orphan's termination" grep -q 'orphan_terminated' follow.txt
kill "$follow_pid"
wait "$follow_pid" 2>/dev/null || true
"$AR_CLI" events --group g >all-events.txt
python3 - follow.txt all-events.txt <<'PY' || fail "events --follow: $(cat follow.txt follow.err)"
import sys
follow = open(sys.argv[1]).read().splitlines()
every = open(sys.argv[2]).read().splitlines()
assert len(follow) >= 10, follow
n = len(follow)
assert any(every[i:i + n] == follow for i in range(len(every) - n + 1)), (follow, every)
PY
note "ok"
