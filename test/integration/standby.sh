#!/usr/bin/env bash
# The controller's availability (docs/operations.md), on a real cluster:
# 1. auto-resumed runs as its shipped unit says: a supervisor that does
#    what systemd does with the unit the build installs (its ExecStart,
#    Restart= and RestartSec=). SIGKILLed in the middle of a repair (the
#    provider still bringing node3 back), it is started again RestartSec
#    later, with no one's help, on the same state: the repair completes and
#    the step is relaunched exactly once.
# 2. The cold standby move: the controller stopped, its state_dir copied
#    to another folder (the standby host's disk) and a controller started
#    on that copy with the same listen address. The standby knows the run
#    and its history, and the step is still protected: node2's loss is
#    repaired by it, and the job completes, never requeued.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

cluster_up --nodes 4 --accounting
cd "$WORK" || exit
# The unit as `cmake --install` writes it (at install time, for its prefix).
DESTDIR=$WORK/root cmake --install "$(dirname "$AR_DAEMON")/.." --component units --prefix /usr \
  >install.out 2>&1 || fail "cmake --install --component units failed: $(cat install.out)"
unit=$WORK/root/usr/lib/systemd/system/auto-resumed.service
[[ -f $unit ]] || fail "no installed unit at $unit: $(cat install.out)"
restart=$(sed -n 's/^Restart=//p' "$unit")
restart_sec=$(sed -n 's/^RestartSec=//p' "$unit")
[[ $restart =~ ^(always|on-failure|on-abnormal)$ ]] ||
  fail "the unit does not restart the controller after a SIGKILL (Restart=$restart)"
[[ $restart_sec =~ ^[0-9]+$ ]] || fail "the unit's RestartSec '$restart_sec' is not a number of seconds"
# A provider that takes a few seconds, so that the controller dies mid-repair.
cat >slow-restart.sh <<SCRIPT
#!/bin/bash
touch $WORK/provider-started
sleep 3
exec $CLUSTER_CMD restart-node $CLUSTER "\$1" --kill
SCRIPT
chmod +x slow-restart.sh
CONTROLLER_RESTART_COMMAND="$WORK/slow-restart.sh {node}" controller_up
controller_down
make_training_step
make_training_job 400

# supervise CONF: what systemd does with the unit: start the daemon, and
# after it ends start it again RestartSec later, as Restart= says (a
# SIGKILL counts as a failure for on-failure and on-abnormal too), until
# $WORK/stopping exists (systemctl stop).
supervise() {
  local rc
  while :; do
    "$AR_DAEMON" --config "$1" >>"$WORK/controller.log" 2>&1 &
    echo $! >"$WORK/controller.pid"
    rc=0
    wait $! || rc=$?
    [[ ! -e $WORK/stopping ]] || return 0
    [[ $restart == always ]] || ((rc != 0)) || return 0
    sleep "$restart_sec"  # the unit's RestartSec, the policy itself
  done
}
supervise "$WORK/auto-resumed.conf" &
supervisor=$!
on_exit "touch '$WORK/stopping'; kill -TERM \$(cat '$WORK/controller.pid') 2>/dev/null"
pid() { cat "$WORK/controller.pid" 2>/dev/null; }
answers() { "$AR_CLI" hello >/dev/null 2>&1; }
wait_until 20 "the supervised controller to answer" answers
event() { "$AR_CLI" events | grep -qE "job $job [^ ]+ $1"; }

job=$(sbatch --parsable -N4 -o job.out job.sh)
wait_until 60 "attempt 0 to reach step 5" past 5

# 1. SIGKILL in the middle of the repair; the restart policy brings it back.
"$CLUSTER_CMD" kill-node "$CLUSTER" node3 >/dev/null
wait_until 30 "node3 to be taken out" event "node_out: node3 set FAIL"
wait_until 30 "the provider's call for node3 to start" test -e "$WORK/provider-started"
first=$(pid)
kill -KILL "$first"
killed=$SECONDS
restarted() { [[ -n $(pid) && $(pid) != "$first" ]] && answers; }
wait_until $((restart_sec + 20)) "the restart policy to start the controller again" restarted
note "controller SIGKILLed mid-repair; pid $(pid) answered $((SECONDS - killed)) s later (RestartSec=$restart_sec)"
wait_until 90 "attempt 1 on 4 nodes" started 1
"$AR_CLI" events >events.txt
assert_eq "$(grep -c "job $job [^ ]* relaunch: relaunching run [^ ]* as attempt 1 " events.txt)" 1 "relaunches to attempt 1"

# 2. The cold standby move: stop, copy state_dir, start on the copy.
touch "$WORK/stopping"
kill -TERM "$(pid)"
wait "$supervisor" || fail "the supervisor ended badly"
cp -a "$WORK/state" "$WORK/standby-state"
sed "s|^state_dir=.*|state_dir=$WORK/standby-state|" "$WORK/auto-resumed.conf" >standby.conf
"$AR_DAEMON" --config standby.conf >>standby.log 2>&1 &
standby=$!
on_exit "kill -TERM $standby 2>/dev/null"
wait_until 20 "the standby controller to answer" answers
"$AR_CLI" events >standby-events.txt
assert_eq "$(grep -c "job $job [^ ]* relaunch: " standby-events.txt)" 1 "relaunches in the standby's history"
past_now=$(checkpoint)
wait_until 30 "attempt 1 to make progress" past $((past_now + 3))
"$CLUSTER_CMD" kill-node "$CLUSTER" node2 >/dev/null
wait_until 90 "attempt 2 on 4 nodes (repaired by the standby)" started 2
assert_contains standby.log "relaunching run $job\.0-[0-9a-f]{8} as attempt 2 " "the standby's log"
scancel "$job"
wait_until 30 "the job to end" job_ended
assert_eq "$(job_field Restarts)" 0 "the job's restart count"
kill -TERM "$standby"
wait "$standby" || fail "the standby controller exited badly: $(tail -n 20 standby.log)"
note "ok"
