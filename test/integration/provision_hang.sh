#!/usr/bin/env bash
# A provider create that hangs does not hold a protected step
# (docs/provisioning.md, create_timeout): group g (count 2, a third slot
# free) runs a 2-node protected step on g-1 and g-2. g-2 is killed: the
# resume engine takes it out of the job and marks it, the provisioner
# terminates it and creates it again, and that create hangs (the local
# provider's injected hang: 600 s). With create_timeout=15 the controller
# abandons it after 15 s, the slot tries again with a new token (after
# create_backoff, 1 s here), g-2's new instance boots (4 s), and the step
# runs again on it: within create_timeout, the backoff and a boot of the
# repair's own time, not after provision_timeout (900 s). The hung call
# makes no second instance.
# create_timeout leaves the second try's own create (the 4 s boot and the
# slurmd's start) room on a loaded machine: at 5 s it was abandoned too.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

group_slots 3 g
cluster_up --nodes 1 "${SLOTS[@]}" >/dev/null
cd "$WORK" || exit

mkdir -p groups "$CLUSTER/provider"
printf 'count=2\nmax_count=3\npartitions=pg\n' >groups/g.conf
provisioning_up $'create_timeout=15\nbackoff=0\nend_window=1'
calls=$CLUSTER/provider/calls.log
in_service() { [[ $(sinfo -h -n "$1" -N -o '%T' 2>/dev/null | head -n 1) == idle ]]; }
wait_until 90 "g-1 and g-2 in service" eval 'in_service g-1 && in_service g-2'

# shellcheck disable=SC2016 # expanded by the step's shell
printf '#!/bin/bash\nsrun --auto-resume=1 -o %s/step.out bash -c %q\necho "srun exit $?"\n' \
  "$WORK" 'echo "attempt=$AUTO_RESUME_ATTEMPT rank=$SLURM_PROCID node=$SLURMD_NODENAME"; sleep 1000' \
  >job.sh
job=$(sbatch --parsable -N2 -p pg -o job.out job.sh)
attempt_on() { grep -q "^attempt=$1 .* node=$2\$" step.out 2>/dev/null; }
wait_until 60 "the step on g-1 and g-2" eval 'attempt_on 0 g-1 && attempt_on 0 g-2'

# The next create hangs: g-2's own, once it is replaced.
echo 1 >"$CLUSTER/provider/hang"
"$CLUSTER_CMD" kill-node "$CLUSTER" g-2 >/dev/null
killed=$SECONDS
wait_until 60 "g-2's create to hang" grep -qx "hung g g-2 g:g-2:[0-9]*" "$calls"
hung_token=$(sed -n 's/^hung g g-2 //p' "$calls" | head -n 1)
wait_until 40 "the hung create abandoned" event_seen \
  "group g node g-2 create_abandoned \(warning\): create \(token $hung_token\): no answer within create_timeout=15 s: abandoned for another try"
# The step runs again on g-1 and g-2's new instance: create_timeout (15 s),
# the backoff (1 s) and a boot (4 s) after the repair began, where it
# waited provision_timeout (900 s) before.
wait_until 60 "the step running again on g-1 and g-2" eval 'attempt_on 1 g-1 && attempt_on 1 g-2'
note "the step ran again $((SECONDS - killed)) s after g-2 was killed (create_timeout=15, a 4 s boot)"
"$AR_CLI" events >events.txt
assert_contains events.txt "job $job [^ ]+ relaunch: " "the events (the step's relaunch)"
new_token=$(grep -o "^create g g-2 g:g-2:[0-9]*\$" "$calls" | tail -n 1 | cut -d' ' -f4)
[[ $new_token != "$hung_token" ]] ||
  fail "g-2's last create ($new_token) is the hung one's token: no new try was made"
# One instance for each of g-1 and g-2: the new try's for g-2 (the hung
# call sleeps on; it is stopped with the controller). g-1's is its last
# create's: on a loaded machine its first create may pass create_timeout
# too, and the instance an abandoned create makes is terminated.
g1_token=$(grep -o "^create g g-1 g:g-1:[0-9]*\$" "$calls" | tail -n 1 | cut -d' ' -f4)
instances=$(cd "$CLUSTER/provider/instances" && printf '%s ' *)
assert_eq "$instances" "$g1_token $new_token " "the provider's instances"
"$AR_CLI" group status >status.txt
assert_contains status.txt '^g +compute +InService +2 ' "g's status"
scancel "$job"
note "ok"
