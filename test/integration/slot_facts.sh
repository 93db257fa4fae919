#!/usr/bin/env bash
# The Slurm 22.05 behaviours that continuous provisioning builds on
# (docs/provisioning.md, "How nodes come and go"): a group's slot is a
# State=CLOUD node with power saving on, its slurm.conf NodeAddr resolving
# nowhere (slot1.invalid), so that its instance's address is in no host's
# files. Asserted, each with a deadline:
#   - a powered-down CLOUD slot is hidden (sinfo, scontrol show node), can
#     be drained while hidden, and a job needing it pends (never starts);
#   - the drain survives a reconfigure and a slurmctld restart, and
#     POWER_UP, so the slot joins drained (POWER_UP drops the Reason); a
#     registered slot's drain and Reason survive a reconfigure;
#   - the address given with `scontrol update nodeaddr=` before POWER_UP
#     reaches srun and the other slurmds (the job's alias list): a step
#     spanning node1 and the slot succeeds, before and after a slurmctld
#     restart and a reconfigure, which keep the address;
#   - POWER_DOWN_ASAP clears the drain when the slot starts powering down;
#     a drain set then lasts until the next POWER_UP;
#   - a slot powered up whose instance never registers goes DOWN at
#     ResumeTimeout, hidden, its drain gone; the reconciler clears it itself
#     (state=resume, then drain): no admin needed.
# And scripts/cluster's start-slot (a slot declared in an included file;
# a declared slot only, not twice) and down (which stops a slot's slurmd
# too).
# The main scheduler runs every second (sched_interval=1), so that a
# released slot's pending job starts within the deadlines.
# Runs no code of the project's (plain build only).
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

host=$(hostname -s)
slot_port=$("$CLUSTER_CMD" free-ports 1)
! getent hosts slot1.invalid >/dev/null || fail "slot1.invalid resolves here: the test needs a name that does not"
# The slot's line in an included file, as the provisioner will write it.
echo "NodeName=slot1 NodeHostname=$host NodeAddr=slot1.invalid Port=$slot_port CPUs=2 State=CLOUD" >"$WORK/slots.conf"
power_saving 8
"$CLUSTER_CMD" up "$CLUSTER" --nodes 2 --no-plugin "${POWER_SAVING[@]}" \
  --conf-line "Include $WORK/slots.conf" \
  --conf-line 'PartitionName=prov Nodes=node[1-2],slot1 SuspendTime=INFINITE' >/dev/null
eval "$("$CLUSTER_CMD" env "$CLUSTER")"
cd "$WORK" || exit

# show NODE: scontrol's record of NODE, empty if hidden ("not found").
show() { scontrol -o show node "$1" 2>/dev/null | grep "^NodeName=$1 " || true; }
field() { show "$1" | grep -o " $2=[^ ]*" | cut -d= -f2-; }
hidden() { [[ -z $(show "$1") ]] && ! sinfo -h -N -o %N | grep -qx "$1"; }
state_is() { [[ $(field "$1" State) == "$2" ]]; }
state_has() { [[ $(field "$1" State) == *"$2"* ]]; }
reason_is() { [[ $(show "$1") == *" Reason=$2 ["* ]]; }
# booted: 4 s have passed since $powering_up (slurmctld counts boot times in
# whole seconds; scripts/cluster start-slot says why a slot boots that late).
booted() { (($(date +%s) >= powering_up + 4)); }
boot_slot() {
  wait_until 10 "slot1's boot" booted
  "$CLUSTER_CMD" start-slot "$CLUSTER" slot1 >/dev/null
}
restart_ctld() { "$CLUSTER_CMD" restart-slurmctld "$CLUSTER" --wait >/dev/null; }
# step_on_slot: srun -N2 across node1 and the slot; each task prints its node.
step_on_slot() {
  timeout 60 srun -N2 -w node1,slot1 -p prov -l printenv SLURMD_NODENAME >step.out 2>&1 ||
    fail "srun -N2 across node1 and slot1 failed: $(cat step.out)"
  assert_eq "$(sort step.out | tr '\n' ' ')" "0: node1 1: slot1 " "the step's tasks ($1)"
}

# scripts/cluster start-slot takes only a declared slot (usage: exit 2).
for bad in node1 slot9; do
  rc=0
  "$CLUSTER_CMD" start-slot "$CLUSTER" "$bad" >out.txt 2>&1 || rc=$?
  assert_eq "$rc" 2 "start-slot $bad ($(cat out.txt))"
done

# Hidden while powered down; drained while hidden; a job needing it pends.
hidden slot1 || fail "a powered-down CLOUD slot shows: $(show slot1)"
scontrol update nodename=slot1 state=drain reason=unprovisioned ||
  fail "drain of a hidden CLOUD slot refused"
# shellcheck disable=SC2016 # expanded in the job
job=$(sbatch --parsable -N3 -p prov -o "$WORK/job.out" \
  --wrap 'srun -l printenv SLURMD_NODENAME; echo "aliases=$SLURM_NODE_ALIASES"')
job_state() { scontrol -o show job "$job" | grep -o ' JobState=[^ ]*' | cut -d= -f2; }
job_reason() { scontrol -o show job "$job" | grep -o ' Reason=[^ ]*' | cut -d= -f2; }
job_over() { [[ ! $(job_state) =~ ^(PENDING|CONFIGURING|RUNNING|COMPLETING)$ ]]; }
considered() { [[ -n $(job_reason) && $(job_reason) != None ]]; }
wait_until 20 "the scheduler to consider job $job" considered
assert_eq "$(job_state)" PENDING "job $job with the slot drained and hidden"

scontrol reconfigure
restart_ctld
hidden slot1 || fail "the slot shows after a reconfigure and a slurmctld restart: $(show slot1)"
assert_eq "$(job_state)" PENDING "job $job after the restart"

# Provision: the address first, then POWER_UP; the instance once powering up.
scontrol update nodename=slot1 nodeaddr=127.0.1.1 nodehostname="$host"
scontrol update nodename=slot1 state=power_up
wait_until 15 "slot1 powering up" state_has slot1 POWERING_UP
powering_up=$(date +%s)
state_has slot1 DRAIN || fail "the drain did not survive the restart and POWER_UP: $(show slot1)"
scontrol update nodename=slot1 state=drain reason=provisioning
boot_slot
wait_until 15 "slot1 registered, still drained" state_is slot1 IDLE+CLOUD+DRAIN
rc=0
"$CLUSTER_CMD" start-slot "$CLUSTER" slot1 >out.txt 2>&1 || rc=$?
assert_eq "$rc" 1 "start-slot of a running slot ($(cat out.txt))"
scontrol reconfigure
if ! state_is slot1 IDLE+CLOUD+DRAIN || ! reason_is slot1 provisioning; then
  fail "a registered, drained slot changed at a reconfigure: $(show slot1)"
fi
reason_is slot1 provisioning || fail "the Reason set while powering up is gone: $(show slot1)"
assert_eq "$(job_state)" PENDING "job $job with the slot registered but drained"

# Release: the job starts on node1, node2 and slot1, with the slot's address.
scontrol update nodename=slot1 state=resume
wait_until 30 "job $job to end" job_over
assert_eq "$(job_state)" COMPLETED "job $job ($(cat "$WORK/job.out"))"
assert_eq "$(grep -E '^[0-9]: ' job.out | sort | tr '\n' ' ')" "0: node1 1: node2 2: slot1 " "job $job's tasks"
assert_contains job.out "^aliases=slot1:\[127\.0\.1\.1\]:$host$" "job $job's SLURM_NODE_ALIASES"
step_on_slot "address from scontrol"

restart_ctld
assert_eq "$(field slot1 NodeAddr)" 127.0.1.1 "slot1's NodeAddr after a slurmctld restart"
scontrol reconfigure
assert_eq "$(field slot1 NodeAddr)" 127.0.1.1 "slot1's NodeAddr after a reconfigure"
wait_until 15 "slot1 idle after the reconfigure" state_is slot1 IDLE+CLOUD
step_on_slot "after a restart and a reconfigure"

# Scale-in: drained, instance gone, POWER_DOWN_ASAP; drained again while
# powering down, which lasts (seen at the next POWER_UP).
scontrol update nodename=slot1 state=drain reason=scale-in
"$CLUSTER_CMD" stop-slot "$CLUSTER" slot1 >/dev/null
scontrol update nodename=slot1 state=power_down_asap reason=scale-in
wait_until 15 "slot1 powering down" state_has slot1 POWERING_DOWN
! state_has slot1 DRAIN || fail "POWER_DOWN_ASAP left the drain on (the reconciler re-drains): $(show slot1)"
scontrol update nodename=slot1 state=drain reason=unprovisioned
wait_until 15 "slot1 hidden once powered down" hidden slot1
scontrol update nodename=slot1 state=power_up
wait_until 15 "slot1 powering up" state_has slot1 POWERING_UP
state_has slot1 DRAIN || fail "the drain set while powering down is gone: $(show slot1)"

# No instance: DOWN at ResumeTimeout (8 s), hidden, its drain gone.
wait_until 30 "slot1 hidden after ResumeTimeout" hidden slot1
scontrol update nodename=slot1 state=power_up
wait_until 15 "slot1 powering up" state_has slot1 POWERING_UP
powering_up=$(date +%s)
state_has slot1 DOWN || fail "after ResumeTimeout the slot is not DOWN: $(show slot1)"
! state_has slot1 DRAIN || fail "ResumeTimeout left the drain on: $(show slot1)"
boot_slot
wait_until 15 "slot1 registered, still DOWN" state_is slot1 DOWN+CLOUD
scontrol update nodename=slot1 state=resume
scontrol update nodename=slot1 state=drain reason=provisioning
wait_until 15 "slot1 back, drained" state_is slot1 IDLE+CLOUD+DRAIN

# scripts/cluster down stops a slot's slurmd too.
"$CLUSTER_CMD" down "$CLUSTER" >/dev/null
left=$(live_pids "$CLUSTER" slot1)
[[ -z $left ]] || fail "down left slot1's processes: $left"
note "ok"
