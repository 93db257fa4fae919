#!/usr/bin/env bash
# Merge mode of continuous provisioning (docs/provisioning.md, "The include
# file"): the controller writes the groups' lines into one include file and
# leaves the admin's slurm.conf byte-for-byte as it was.
#   1. without slurmctld_restart_command a new group's slots are staged
#      (FILE.next) with a restart_required event; nothing restarts, the
#      group waits;
#   2. with one, slurmctld restarts once, the slots are drained and then put
#      in the group's partition (a reconfigure); a job runs on the group;
#   3. `group plan`: a count change needs no restart, a new max_count does;
#   4. raising max_count restarts slurmctld once; a running job survives;
#   5. a failing restart command: the previous include file is put back.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

power_saving 60
include=$WORK/nodes.conf
printf '# empty until the controller writes it\n' >"$include"
cluster_up --nodes 1 "${POWER_SAVING[@]}" --conf-line "PartitionName=admin Nodes=node1 MaxTime=60" \
  --conf-line "Include $include" >/dev/null
cd "$WORK" || exit
conf=$CLUSTER/etc/slurm.conf
cp "$conf" slurm.conf.before
base=$(free_port_range 4)
mkdir -p groups
printf 'count=1\nmax_count=2\npartitions=pg\nnode_conf=CPUs=2\nslot_port_base=%s\n' "$base" \
  >groups/g.conf
cat >restart.sh <<SCRIPT
#!/bin/bash
echo "restart \$(date +%s.%N)" >>"$WORK/restarts.log"
[[ ! -e "$WORK/restart-fails" ]] || { echo "restart refused for the test" >&2; exit 1; }
exec "$CLUSTER_CMD" restart-slurmctld "$CLUSTER" --wait
SCRIPT
chmod +x restart.sh
merge_lines="slurm_conf=$conf
slurm_conf_include=$include"

restarts() { [[ -f restarts.log ]] && wc -l <restarts.log || echo 0; }
restarted_twice() { (($(restarts) >= 2)); }
has_event() { "$AR_CLI" events | grep -q "$1"; }
ctld_pid() { cat "$CLUSTER/run/slurmctld.pid"; }
job_is() { [[ $(scontrol -o show job "$1" | grep -o ' JobState=[^ ]*' | cut -d= -f2) == "$2" ]]; }

# 1. No restart command: staged, restart_required, no restart.
pid_before=$(ctld_pid)
provisioning_up "$merge_lines"
wait_until 30 "a restart_required event" has_event restart_required
assert_contains "$include.next" '^NodeName=g-1 CPUs=2 Port='"$base"' State=CLOUD$' "the staged include"
assert_contains "$include.next" '^PartitionName=pg SuspendTime=INFINITE State=UP$' "the staged partition"
assert_eq "$(cat "$include")" "# empty until the controller writes it" "the include without a restart"
"$AR_CLI" group plan >plan.txt
assert_contains plan.txt '^\+NodeName=g-2 CPUs=2 Port=' "group plan for a new group"
assert_contains plan.txt 'slurmctld restart' "group plan says a restart"
"$AR_CLI" group status >status.txt
if grep -q '^g ' status.txt; then fail "group g started before its slots were declared: $(cat status.txt)"; fi
assert_eq "$(ctld_pid)" "$pid_before" "slurmctld's pid (no restart without a command)"

# 2. With the command: one restart, then the slots drained, then partition pg.
kill "$CONTROLLER_PID"
wait "$CONTROLLER_PID" || true
provisioning_up "$merge_lines
slurmctld_restart_command=$WORK/restart.sh
slurmctld_restart_timeout=60"
wait_until 60 "g-1 idle" node_is g-1 idle
assert_eq "$(restarts)" 1 "slurmctld restarts for the new group"
has_event slurmctld_restarted || fail "no slurmctld_restarted event"
assert_contains "$include" '^NodeSet=g Nodes=g-\[1-2\]$' "the group's NodeSet (its slots drained)"
assert_contains "$include" '^PartitionName=pg Nodes=g SuspendTime=INFINITE State=UP$' "partition pg"
grep -q "^# Written by auto-resumed" "$include" || fail "the include has no header"
srun -p pg -N1 printenv SLURMD_NODENAME >ran.txt || fail "a step in partition pg failed"
assert_eq "$(cat ran.txt)" g-1 "the node of a step in pg"

# 3. group plan: a count change needs no restart; a new max_count does.
sed -i 's/^count=1/count=2/' groups/g.conf
"$AR_CLI" group plan >plan.txt
assert_contains plan.txt ': no change$' "group plan for a count change"
wait_until 60 "g-2 idle" node_is g-2 idle
# The controller held (a pause) while the change is planned: it would
# otherwise restart slurmctld for it within a second.
"$AR_CLI" pause --reason "group plan before the change" >/dev/null
sed -i 's/^count=2/count=1/; s/^max_count=2/max_count=3/' groups/g.conf
"$AR_CLI" group plan >plan.txt || true
assert_contains plan.txt '^\+NodeName=g-3 CPUs=2 Port=' "group plan for a new max_count"
assert_contains plan.txt 'slurmctld restart' "group plan says a restart for max_count"

# 4. The restart for max_count=3 (step 3's edit, once the controller acts
# again) leaves a running job alone.
job=$(sbatch --parsable -p pg -N1 -w g-1 -o job.out --wrap 'echo started; sleep 300')
wait_until 30 "job $job running" job_is "$job" RUNNING
# RUNNING is slurmctld's word; a restart before slurmd started the batch
# script loses its launch, and Slurm requeues the job (seen on a loaded
# host): the restart under test comes once the script runs.
wait_until 30 "job $job's script running on g-1" grep -qx started job.out
assert_eq "$(restarts)" 1 "slurmctld restarts while the controller was paused"
"$AR_CLI" unpause >/dev/null
wait_until 60 "a second restart" restarted_twice
wait_until 60 "g-3 in the group's NodeSet" grep -qx 'NodeSet=g Nodes=g-\[1-3\]' "$include"
assert_eq "$(restarts)" 2 "slurmctld restarts for max_count 3"
job_is "$job" RUNNING || fail "job $job did not survive the restart: $(scontrol show job "$job")"
"$AR_CLI" group status >status.txt
assert_contains status.txt '^g +compute +[A-Za-z]+ +[0-9]+ +[0-9]+ +3 ' "g's max_count after the restart"

# 5. A failing restart command: the previous file is back.
cp "$include" include.before
touch restart-fails
sed -i 's/^max_count=3/max_count=4/' groups/g.conf
wait_until 60 "a slurmctld_restart_failed event" has_event slurmctld_restart_failed
cmp -s "$include" include.before || fail "the include was not put back: $(diff include.before "$include")"
assert_eq "$(restarts)" 4 "restarts tried (the failed one and the one with the previous file)"
has_event "the previous file is back" || fail "the failure event does not say the file is back"
job_is "$job" RUNNING || fail "job $job did not survive"
scancel "$job"

cmp -s "$conf" slurm.conf.before || fail "the admin's slurm.conf changed: $(diff slurm.conf.before "$conf")"
note "ok"
