#!/usr/bin/env bash
# A provider create that hangs (docs/provisioning.md, create_timeout): one
# compute group g (count 1) whose first create never returns in time. With
# create_timeout=15 the controller abandons it after 15 s, the slot tries
# again with a new token (after create_backoff, 1 s here) and g-1 is in
# service within create_timeout, the backoff and a boot (4 s), not after
# provision_timeout (900 s); the hung call makes no second instance.
# create_timeout leaves the second try's own create (the 4 s boot and the
# slurmd's start) room on a loaded machine: at 5 s it was abandoned too.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

group_slots 2 g
cluster_up --nodes 1 "${SLOTS[@]}" >/dev/null
cd "$WORK" || exit

mkdir -p groups "$CLUSTER/provider"
echo 1 >"$CLUSTER/provider/hang"
printf 'count=1\nmax_count=2\npartitions=pg\n' >groups/g.conf
start=$SECONDS
provisioning_up "create_timeout=15"
calls=$CLUSTER/provider/calls.log

wait_until 20 "g-1's first create to hang" grep -qx "hung g g-1 g:g-1:1" "$calls"
wait_until 40 "the hung create abandoned" event_seen "group g node g-1 create_abandoned \(warning\): create \(token g:g-1:1\): no answer within create_timeout=15 s: abandoned for another try"
in_service() { [[ $(sinfo -h -n g-1 -N -o '%T' 2>/dev/null | head -n 1) == idle ]]; }
wait_until 60 "g-1 in service" in_service
note "g-1 in service $((SECONDS - start)) s after the controller started (create_timeout=15, a 4 s boot)"
assert_contains "$calls" "^create g g-1 g:g-1:2$" "the second try's create, with a new token"
"$AR_CLI" group status >status.txt
assert_contains status.txt '^g +compute +InService +1 ' "g's status"
# One instance for g-1: the new try's (the hung call sleeps on; it is
# stopped with the controller).
assert_eq "$(ls "$CLUSTER/provider/instances")" "g:g-1:2" "the provider's instances"
note "ok"
