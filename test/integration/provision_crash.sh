#!/usr/bin/env bash
# Continuous provisioning across crashes (docs/provisioning.md), one compute
# group g on the local cluster whose instances take 8 s to boot:
#   1. auto-resumed is SIGKILLed while it creates g's 3 instances: the
#      provider's calls go on without it, and each slot registers drained
#      (its drain was written before the create), so a job in g's partition
#      pends; once the controller is back, the same creates are asked again
#      with the same tokens and the nodes are released;
#   2. the controller is SIGKILLed again while g-4 (a count raised to 4) is
#      launching, and slurmctld restarts meanwhile: g-4 too registers
#      drained, and is released once the controller is back.
# No slot ever gets two instances: one provider record and one metering
# record per node.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

group_slots 4 g
cluster_up --nodes 1 "${SLOTS[@]}" >/dev/null
cd "$WORK" || exit

mkdir -p groups "$CLUSTER/provider"
printf 'count=3\nmax_count=4\npartitions=pg\n' >groups/g.conf
export AR_BOOT_SECONDS=8  # the provider's creates: time enough to kill the controller
provisioning_up

records_dir=$CLUSTER/provider/instances
# provider_records NODE: how many instances the provider keeps for NODE.
provider_records() {
  local record count=0 node
  for record in "$records_dir"/*; do
    [[ -f $record ]] || continue
    read -r _ node _ <"$record"
    [[ $node != "$1" ]] || count=$((count + 1))
  done
  echo "$count"
}
has_record() { [[ $(provider_records "$1") -ge 1 ]]; }
state_of() { sinfo -h -n "$1" -N -o '%T' 2>/dev/null | head -n 1; }
# joined_drained NODE: NODE's slurmd registered, and NODE is drained; a
# registered NODE taking jobs fails the test.
joined_drained() {
  local state
  state=$(state_of "$1")
  case $state in
    idle* | mixed* | allocated* | completing*) fail "$1 joined undrained: $state" ;;
  esac
  [[ $state == drained ]]
}
all() {
  local check=$1 n
  shift
  for n in "$@"; do "$check" "$n" || return 1; done
}
idle() { [[ $(state_of "$1") == idle ]]; }
kill_controller() {
  kill -KILL "$CONTROLLER_PID"
  wait "$CONTROLLER_PID" 2>/dev/null || true
}
# metered NODE: NODE's metering records with an instance.
metered() {
  "$AR_CLI" --json usage --group g |
    python3 -c 'import json,sys; print(sum(1 for i in json.load(sys.stdin)["instances"] if i["node"] == sys.argv[1] and i["started"]))' "$1"
}

# 1. The controller dies with g's 3 creates in flight.
wait_until 60 "g's 3 creates in flight" all has_record g-1 g-2 g-3
kill_controller
job=$(sbatch --parsable -p pg -N3 -o /dev/null --wrap 'srun true')
job_state() { scontrol -o show job "$job" | grep -o ' JobState=[^ ]*' | cut -d= -f2; }
wait_until 60 "g-1, g-2 and g-3 to register, drained, without the controller" \
  all joined_drained g-1 g-2 g-3
assert_eq "$(job_state)" PENDING "the job in g's partition while g's nodes are held"
note "1: the controller SIGKILLed during the creates; g-1, g-2 and g-3 registered drained"
provisioning_up
job_went() { [[ $(job_state) == RUNNING || $(job_state) == COMPLETED ]]; }
wait_until 60 "job $job to run on g's 3 nodes" job_went
for n in g-1 g-2 g-3; do
  assert_eq "$(provider_records "$n")" 1 "the provider's instances of $n"
done

# 2. The controller dies again while g-4 launches, and slurmctld restarts.
"$AR_CLI" group set g count=4 >/dev/null
wait_until 60 "g-4's create in flight" has_record g-4
kill_controller
"$CLUSTER_CMD" restart-slurmctld "$CLUSTER" --wait --timeout 60 >/dev/null
wait_until 60 "g-4 to register, drained, without the controller" joined_drained g-4
note "2: slurmctld restarted while g-4 launched; it registered drained"
provisioning_up
wait_until 60 "g-1 to g-4 idle" all idle g-1 g-2 g-3 g-4
for n in g-1 g-2 g-3 g-4; do
  assert_eq "$(provider_records "$n")" 1 "the provider's instances of $n"
  assert_eq "$(metered "$n")" 1 "the metering records of $n"
done
note "ok"
