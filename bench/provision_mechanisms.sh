#!/usr/bin/env bash
# How a provisioned node comes and goes on Slurm 22.05 (docs/provisioning.md):
# two mechanisms side by side, each on a fresh local cluster (2 nodes and
# slots whose slurm.conf NodeAddr, slotN.invalid, resolves nowhere: a new
# instance's address is in nobody's files):
#   cloud:  State=CLOUD slots, power saving on (ResumeProgram and
#           SuspendProgram do nothing, SuspendTime=INFINITE on the slots'
#           partition), the slot drained before anything else, its address
#           given with `scontrol update nodeaddr=`, then POWER_UP; scale-in
#           with POWER_DOWN_ASAP;
#   future: a static slot (State=FUTURE, or the write-ahead State=UNKNOWN
#           line), its address given the same way.
# Prints one row per mechanism and criterion (visibility, drain across a
# slurmctld restart and a reconfigure, the address reaching srun and the
# other slurmds, states that stick, the cost of a change), with seconds
# measured here, and a last line: the steps that spanned a slot, per
# mechanism. The main scheduler runs every second (sched_interval=1; at
# Slurm's 60 s a released slot's pending job waited 20 s and more once).
# --runs N repeats each timed cycle N times (medians);
# --mechanisms 'cloud future' (the default) chooses which run.
#   bench/provision_mechanisms.sh [--runs N] [--mechanisms LIST]
# Defaults: 3 runs, both mechanisms. Needs no build (no plugin: the clusters run without one).
set -euo pipefail
runs=3 mechanisms='cloud future'
while (($#)); do
  case $1 in
    --runs) runs=$2; shift ;;
    --mechanisms) mechanisms=$2; shift ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "provision_mechanisms: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "provision_mechanisms: --runs '$runs' is not a positive number" >&2; exit 2; }
for m in $mechanisms; do
  [[ $m == cloud || $m == future ]] || { echo "provision_mechanisms: unknown mechanism '$m' (cloud, future)" >&2; exit 2; }
done
wanted() { [[ " $mechanisms " == *" $1 "* ]]; }

NAME=provision_mechanisms no_build=1 wait_poll=0.05  # its waits are timed
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_state() { show slot1; }
row() { printf '%-7s %-44s %s\n' "$1" "$2" "$3"; }
yes_no() { if "$@"; then echo yes; else echo no; fi; }

# free_port: a slot's Port=, below the ephemeral range (scripts/cluster free-ports).
free_port() { "$cluster_cmd" free-ports 1; }
host=$(hostname -s)
# show NODE: scontrol's one-line record of NODE (empty if hidden or unknown:
# scontrol then prints "Node NODE not found" on stdout and exits 1).
show() { scontrol -o show node "$1" 2>/dev/null | grep "^NodeName=$1 " || true; }
field() { show "$1" | grep -o " $2=[^ ]*" | cut -d= -f2-; }
state_has() { [[ $(field "$1" State) == *"$2"* ]]; }
# held_for NODE REASON: NODE registered, drained with REASON.
held_for() { state_is "$1" IDLE+CLOUD+DRAIN && reason_is "$1" "$2"; }
state_is() { [[ $(field "$1" State) == "$2" ]]; }
hidden() { [[ -z $(show "$1") ]] && ! sinfo -h -N -o %N | grep -qx "$1"; }
shown() { ! hidden "$1"; }
listed() { sinfo -h -N -o %N | grep -qx "$1"; }
reason_is() { [[ $(show "$1") == *" Reason=$2 ["* ]]; }
job_state() { scontrol -o show job "$1" | grep -o ' JobState=[^ ]*' | cut -d= -f2; }
job_done() { [[ ! $(job_state "$1") =~ ^(PENDING|CONFIGURING|RUNNING|COMPLETING)$ ]]; }
job_is() { [[ $(job_state "$1") == "$2" ]]; }
# boot_slot: start slot1's slurmd 4 s after it was seen powering up (Slurm's
# boot times are whole seconds: scripts/cluster start-slot says why); t is
# then the slurmd's start.
booted() { (($(date +%s) >= powering_up + 4)); }
boot_slot() {
  wait_for 10 "slot1's boot" booted
  t=$(now)
  "$cluster_cmd" start-slot "$dir/c" slot1 >/dev/null
}
restart_ctld() { "$cluster_cmd" restart-slurmctld "$dir/c" --wait >/dev/null; }
# step_spans OUT: srun -N3 across node1, node2 and slot1 printed all three names.
step_spans() { [[ $(grep -cE '^[0-2]: (node1|node2|slot1)$' "$1") == 3 ]]; }

memory=$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  machine: $(nproc) cores, $memory, $(. /etc/os-release && echo "$PRETTY_NAME"), $(slurmd -V)"
row mech criterion figure

# ---------------------------------------------------------------- cloud
cloud_case() {
slot_port=$(free_port)
"$cluster_cmd" up "$dir/c" --nodes 2 --no-plugin \
  --conf-line 'SuspendProgram=/bin/true' --conf-line 'ResumeProgram=/bin/true' \
  --conf-line 'SuspendTime=3600' --conf-line 'SuspendExcParts=debug' \
  --conf-line 'ResumeTimeout=10' --conf-line 'SuspendTimeout=2' \
  --conf-line 'SlurmctldParameters=power_save_interval=1,power_save_min_interval=0' \
  --conf-line 'SchedulerParameters=permit_job_expansion,sched_interval=1' \
  --conf-line "NodeName=slot1 NodeHostname=$host NodeAddr=slot1.invalid Port=$slot_port CPUs=2 State=CLOUD" \
  --conf-line 'PartitionName=prov Nodes=node[1-2],slot1 SuspendTime=INFINITE' >/dev/null
eval "$("$cluster_cmd" env "$dir/c")"
row cloud "hidden before provisioning (sinfo, show node)" "$(yes_no hidden slot1)"
scontrol update nodename=slot1 state=drain reason=unprovisioned ||
  fail "drain of a powered-down CLOUD slot refused"
row cloud "drain of the hidden slot accepted" yes
job=$(sbatch --parsable -N3 -p prov -o "$dir/job.out" --wrap 'srun -l printenv SLURMD_NODENAME')
wait_for 10 "job $job pending with a reason" job_is "$job" PENDING
sleep_reason=$(squeue -h -j "$job" -o %R)
row cloud "3-node job pends; its reason names the slot" "$(yes_no grep -q slot1 <<<"$sleep_reason")"
t=$(now)
restart_ctld
row cloud "slurmctld restart (s)" "$(since "$t" 2)"
hidden slot1 || fail "the slot shows after a restart"

# provision: address, POWER_UP, wait for POWERING_UP, the instance, release.
ups=() regs=() starts=()
for ((r = 1; r <= runs; r++)); do
  t=$(now)
  scontrol update nodename=slot1 nodeaddr=127.0.1.1 nodehostname="$host"
  scontrol update nodename=slot1 state=power_up
  wait_for 15 "slot1 POWERING_UP" state_has slot1 POWERING_UP
  powering_up=$(date +%s)
  ups+=("$(since "$t" 2)")
  if ((r == 1)); then
    row cloud "drain kept across the restart (seen powering up)" "$(yes_no state_has slot1 DRAIN)"
    row cloud "Reason kept by POWER_UP" "$(yes_no reason_is slot1 unprovisioned)"
  fi
  # The drain's Reason is gone once powering up: set it again.
  scontrol update nodename=slot1 state=drain reason=provisioning
  boot_slot
  wait_for 15 "slot1 registered (drained, not powering up)" state_is slot1 IDLE+CLOUD+DRAIN
  regs+=("$(since "$t" 2)")
  if ((r == 1)); then
    scontrol reconfigure
    row cloud "registered slot: drain+Reason across a reconfigure" "$(yes_no held_for slot1 provisioning)"
  fi
  t=$(now)
  scontrol update nodename=slot1 state=resume
  if ((r == 1)); then
    wait_for 20 "job $job running" job_is "$job" RUNNING
    starts+=("$(since "$t" 2)")
    wait_for 20 "job $job done" job_done "$job"
    [[ $(job_state "$job") == COMPLETED ]] || fail "job $job: $(job_state "$job"): $(cat "$dir/job.out")"
    row cloud "step across node1,node2,slot1 (file: unresolvable)" "$(yes_no step_spans "$dir/job.out")"
    restart_ctld
    row cloud "NodeAddr after restart" "$(field slot1 NodeAddr)"
    scontrol reconfigure
    row cloud "NodeAddr after reconfigure" "$(field slot1 NodeAddr)"
    srun -N3 -p prov -l printenv SLURMD_NODENAME >"$dir/step2.out" 2>&1 || true
    row cloud "step across the slot after both" "$(yes_no step_spans "$dir/step2.out")"
  fi
  # scale-in: drain, instance gone, POWER_DOWN_ASAP (it clears the drain when
  # it starts powering down), drained again while POWERING_DOWN.
  scontrol update nodename=slot1 state=drain reason=scale-in
  "$cluster_cmd" stop-slot "$dir/c" slot1 >/dev/null
  t=$(now)
  scontrol update nodename=slot1 state=power_down_asap reason=scale-in
  wait_for 15 "slot1 POWERING_DOWN" state_has slot1 POWERING_DOWN
  if ((r == 1)); then
    row cloud "drain left by POWER_DOWN_ASAP once powering down" "$(yes_no state_has slot1 DRAIN)"
  fi
  scontrol update nodename=slot1 state=drain reason=unprovisioned
  wait_for 15 "slot1 hidden" hidden slot1
  downs+=("$(since "$t" 2)")
done
row cloud "POWER_UP to POWERING_UP (s, median)" "$(median "${ups[@]}")"
row cloud "slurmd start to registered, drained (s, median)" "$(median "${regs[@]}")"
row cloud "release to the pending job running (s)" "${starts[0]}"
row cloud "POWER_DOWN_ASAP to hidden (s, median)" "$(median "${downs[@]}")"

# A slot powered up whose instance never registers: ResumeTimeout (10 s).
t=$(now)
scontrol update nodename=slot1 state=power_up
wait_for 15 "slot1 POWERING_UP" state_has slot1 POWERING_UP
wait_for 30 "slot1 hidden again (ResumeTimeout)" hidden slot1
row cloud "no instance: hidden again after (s; ResumeTimeout 10)" "$(since "$t" 2)"
# Its state, seen by name once powered up again: DOWN, the drain gone.
scontrol update nodename=slot1 state=power_up
wait_for 15 "slot1 POWERING_UP" state_has slot1 POWERING_UP
powering_up=$(date +%s)
row cloud "after ResumeTimeout: state, drain kept" "$(field slot1 State | cut -d+ -f1), $(yes_no state_has slot1 DRAIN)"
boot_slot
wait_for 15 "slot1 registered" state_is slot1 DOWN+CLOUD
row cloud "registered after it: state (needs state=resume)" "$(field slot1 State)"
scontrol update nodename=slot1 state=resume
scontrol update nodename=slot1 state=drain reason=held
wait_for 10 "slot1 drained" state_is slot1 IDLE+CLOUD+DRAIN
row cloud "state=resume, drain: back to (no admin)" "$(field slot1 State)"
"$cluster_cmd" down "$dir/c" >/dev/null
}

# ---------------------------------------------------------------- future
future_case() {
# slot1: the address case (its line's NodeAddr resolves nowhere); slot2: a
# FUTURE line; slot3: the write-ahead line (State=UNKNOWN, address resolvable).
slot_port=$(free_port) slot2_port=$(free_port) slot3_port=$(free_port)
t=$(now)
"$cluster_cmd" up "$dir/c" --nodes 2 --no-plugin \
  --conf-line "NodeName=slot1 NodeHostname=$host NodeAddr=slot1.invalid Port=$slot_port CPUs=2 State=UNKNOWN" \
  --conf-line "NodeName=slot2 NodeHostname=$host NodeAddr=127.0.1.2 Port=$slot2_port CPUs=2 State=FUTURE" \
  --conf-line "NodeName=slot3 NodeHostname=$host NodeAddr=127.0.1.3 Port=$slot3_port CPUs=2 State=UNKNOWN" \
  --conf-line 'PartitionName=prov Nodes=node[1-2],slot[1-3]' >/dev/null
row future "cluster up, one NodeAddr unresolvable (s)" "$(since "$t" 2)"
eval "$("$cluster_cmd" env "$dir/c")"
row future "FUTURE slot hidden (sinfo, show node)" "$(yes_no hidden slot2)"
row future "write-ahead (UNKNOWN) slot listed in sinfo" "$(yes_no listed slot3)"
row future "unresolvable slot shown (sinfo, show node)" "$(yes_no shown slot1)"
scontrol update nodename=slot3 state=drain reason=unprovisioned
t=$(now)
restart_ctld
row future "slurmctld restart, one NodeAddr unresolvable (s)" "$(since "$t" 2)"
row future "write-ahead slot: drain+Reason across the restart" "$(yes_no reason_is slot3 unprovisioned)"
scontrol update nodename=slot1 nodeaddr=127.0.1.1 nodehostname="$host"
"$cluster_cmd" start-slot "$dir/c" slot1 >/dev/null
# slot1 stays hidden (its file address does not resolve); srun -w allocates it all the same.
t=$(now)
rc=0
timeout 60 srun -N3 -w node1,node2,slot1 -p prov -l printenv SLURMD_NODENAME >"$dir/step3.out" 2>&1 || rc=$?
row future "step across node1,node2,slot1 (nodeaddr by scontrol)" "$(yes_no step_spans "$dir/step3.out") (srun exit $rc after $(since "$t" 2) s)"
if grep -q "Can't find an address" "$dir/step3.out"; then
  row future "srun's error" "Can't find an address, check slurm.conf"
fi
scontrol update nodename=slot3 nodeaddr=127.0.0.1
restart_ctld
row future "NodeAddr set by scontrol, after a restart" "$(field slot3 NodeAddr) (file: 127.0.1.3)"
"$cluster_cmd" down "$dir/c" >/dev/null
}

cloud=- future=-
if wanted cloud; then cloud_case; cloud=$(yes_no step_spans "$dir/job.out"); fi
if wanted future; then future_case; future=$(yes_no step_spans "$dir/step3.out"); fi
echo "step across a slot whose address is in no file: cloud $cloud, future $future"
