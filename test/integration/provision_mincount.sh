#!/usr/bin/env bash
# Continuous provisioning's priority and MinCount on the local cluster
# (docs/provisioning.md), a service group `login` (hosts without slurmd)
# and a compute group m (count 3, min_count 3) whose provider has capacity
# for 2:
#   1. priority: login's first two creates fail (75) and the third works;
#      no create of m before login has its instance;
#   2. MinCount: m's 2 nodes are held drained (a 3-node job in m's
#      partition pends); an update of the group restarts the MinCount
#      timer, and at the deadline the operation rolls back (m's nodes are
#      terminated, hidden again);
#   3. with min_count asked again (and a long timeout), capacity returns:
#      the third node comes and the three are released together; the job
#      runs on them.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

group_slots 4 m
cluster_up --nodes 1 "${SLOTS[@]}" >/dev/null
cd "$WORK" || exit

timeout=45  # min_count_timeout: it runs from the operation's start, login's tier first
mkdir -p groups "$CLUSTER/provider"
echo 2 >"$CLUSTER/provider/flaky"
echo 2 >"$CLUSTER/provider/capacity-m"
printf 'type=service\ncount=1\n' >groups/login.conf
printf 'count=3\nmin_count=3\nmax_count=4\npartitions=pm\n' >groups/m.conf
provisioning_up "capacity_backoff=5
min_count_timeout=$timeout"

job=$(sbatch --parsable -N3 -p pm -o "$WORK/job.out" --wrap 'srun -l printenv SLURMD_NODENAME')
job_state() { scontrol -o show job "$job" | grep -o ' JobState=[^ ]*' | cut -d= -f2; }
state_of() { sinfo -h -n "$1" -N -o '%T' 2>/dev/null | head -n 1; }
reason_of() { sinfo -h -n "$1" -N -o '%E' 2>/dev/null | head -n 1; }
held() { [[ $(state_of "$1") == drained && $(reason_of "$1") == *"ready, held until released"* ]]; }
# Two of m's first three slots held (whichever creates found capacity).
two_held() {
  local n count=0
  for n in m-1 m-2 m-3; do ! held "$n" || count=$((count + 1)); done
  ((count == 2))
}
shown() { sinfo -h -N -o %N | sort -u | grep -x "$1" >/dev/null; }
# at KIND: the Unix time of group m's last KIND event.
at() {
  "$AR_CLI" --json events --group m |
    python3 -c 'import json,sys; print([e["at"] for e in json.load(sys.stdin)["events"] if e["kind"] == sys.argv[1]][-1])' "$1"
}

# 1. Priority: login first, through two failed creates.
wait_until 60 "two of m's nodes held drained" two_held
"$AR_CLI" events >events.txt
assert_eq "$(grep -c 'group login node login-1 create_failed' events.txt)" 2 "login's failed creates"
login_up=$(grep -n 'group login node login-1 instance_created' events.txt | head -n 1 | cut -d: -f1)
first_m=$(grep -n 'group m node m-[0-9] \(instance_created\|create_failed\|capacity_unavailable\)' events.txt |
  head -n 1 | cut -d: -f1)
if [[ -z $login_up || -z $first_m ]] || ((login_up > first_m)); then
  fail "a create of m came before login's instance: $(cat events.txt)"
fi
"$AR_CLI" group status >status.txt
assert_contains status.txt '^login +service +InService +1 ' "login's status"

# 2. MinCount: held while short; an update restarts the timer; rollback.
assert_eq "$(job_state)" PENDING "the 3-node job while m has 2 of min_count 3"
first_op=$(at operation_started)
"$AR_CLI" group set m count=4 >/dev/null  # a new operation: the timer starts again
second_op=$(at operation_started)
((second_op > first_op)) || fail "group set started no operation"
wait_until $((timeout + 30)) "m's rollback" event_seen 'group m rollback_started'
rolled=$(at rollback_started)
((rolled >= second_op + timeout - 1)) ||
  fail "the rollback at $rolled came before the restarted deadline ($second_op + $timeout)"
wait_until 60 "the rollback to complete" event_seen 'group m rollback_completed'
gone() { ! shown m-1 && ! shown m-2 && ! shown m-3; }
wait_until 30 "m's nodes terminated and hidden" gone
assert_eq "$(job_state)" PENDING "the 3-node job after the rollback"

# 3. Capacity returns while min_count is asked again: released together.
# The timeout that made step 2 short would race this step's creates on a
# loaded machine (it runs from the operation's start): a long one, by a
# reload (SIGHUP restarts the controller in place on the new setting).
starts() { grep -c ' listening on ' "$WORK/controller.log"; }
before=$(starts)
sed -i "s/^min_count_timeout=.*/min_count_timeout=600/" "$WORK/auto-resumed.conf"
kill -HUP "$CONTROLLER_PID"
restarted() { (($(starts) > before)); }
wait_until 30 "the controller's restart on min_count_timeout=600" restarted
wait_until 30 "the reloaded controller to answer" controller_answers
"$AR_CLI" group set m count=3 min_count=3 >/dev/null
wait_until 60 "two of m's nodes held drained again" two_held
rm "$CLUSTER/provider/capacity-m"
job_over() { [[ ! $(job_state) =~ ^(PENDING|CONFIGURING|RUNNING|COMPLETING)$ ]]; }
wait_until 60 "job $job to run on m's three nodes" job_over
assert_eq "$(job_state)" COMPLETED "job $job ($(cat "$WORK/job.out"))"
assert_eq "$(grep -E '^[0-9]: ' "$WORK/job.out" | sort | tr '\n' ' ')" "0: m-1 1: m-2 2: m-3 " \
  "job $job's tasks"
"$AR_CLI" events --group m >m-events.txt
assert_contains m-events.txt 'min_count_reached: 3 of min_count 3 ready: released together' \
  "the release of m's nodes"
note "ok"
