#!/usr/bin/env bash
# The `command` provider (provider_command, run as `PROGRAM replace NODE`):
# a script that works replaces the node (it comes back idle as a new
# instance); one that fails, or hangs past provider_timeout, is tried
# provider_retries times with a backoff, then reported (its output kept in
# the events) and the node stays out, until an admin asks again or puts the
# node back by hand; and an auto-resume step whose failed
# node cannot be replaced, with no idle node to take, gets give_up (exit 75)
# instead of waiting for ever.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

cluster_up --nodes 4
cd "$WORK" || exit
# The site's script: what it does to a node is read from WORK/mode-NODE.
cat >provider.sh <<SCRIPT
#!/bin/bash
[[ \$1 == replace && -n \$2 ]] || { echo "usage: \$0 replace NODE" >&2; exit 2; }
echo "\$(date +%s) \$*" >>$WORK/provider-calls
case \$(cat $WORK/mode-\$2 2>/dev/null) in
  fail) echo "no capacity for \$2 in zone-a" >&2; exit 3 ;;
  hang) exec sleep 300 ;;
  *) exec $CLUSTER_CMD restart-node $CLUSTER "\$2" --kill ;;
esac
SCRIPT
chmod +x provider.sh
# provider_timeout: a restart-node (the script that works) takes over 2 s
# on a loaded machine, and CI's once took over 5 s twice in a row; the hang
# below costs two of it.
CONTROLLER_PROVIDER="provider=command
provider_command=$WORK/provider.sh
provider_timeout=15
provider_retries=2
provider_backoff=1"
CONTROLLER_CONF='end_window=1' controller_up
calls() { grep -c " replace $1\$" "$WORK/provider-calls" 2>/dev/null || echo 0; }

# 1. A script that works.
before=$(slurmd_started node3)
scontrol update node=node3 state=fail reason="Action:Replace"
wait_until 60 "node3 replaced" event_seen "node node3 replaced: node3 is back in service"
wait_until 20 "node3 idle" node_is node3 idle
[[ $(slurmd_started node3) != "$before" ]] || fail "node3's slurmd was not restarted"

# 2. A script that fails: tried twice, then reported with its output.
echo fail >mode-node3
scontrol update node=node3 state=fail reason="Action:Replace"
wait_until 30 "node3's replacement to fail" event_seen "node node3 replace_failed: the replacement of node3 failed after 2 tries"
"$AR_CLI" events >events.txt
assert_contains events.txt "node node3 provider_failed: replacing node3 failed \(try 1 of 2; again in 1 s\): $WORK/provider.sh exited 3; output: no capacity for node3 in zone-a" "the first failure, with the script's output"
assert_contains events.txt "node node3 replace_failed: .*exited 3; output: no capacity for node3 in zone-a" "the report"
assert_eq "$(calls node3)" 3 "provider calls for node3 (1 that worked, 2 that failed)"
[[ $(node_state node3) == fail ]] || fail "node3 is $(node_state node3), not left out (fail)"
"$AR_CLI" nodes >nodes.out
assert_contains nodes.out "^node3 failed \(wait, 2 provider tries" "auto-resume nodes"

# The admin takes over: a failed replacement may be asked for again, and a
# node put back in service by hand is no longer the controller's.
rm mode-node3
"$AR_CLI" replace node3 >again.out
assert_contains again.out "^node3 marked FAIL with reason 'Action:Replace'" "a second replace after a failed one"
wait_until 60 "node3 replaced at last" event_seen "node node3 replaced: node3 is back in service"
wait_until 20 "node3 idle" node_is node3 idle
echo fail >mode-node3
scontrol update node=node3 state=fail reason="Action:Replace"
failed_twice() { [[ $("$AR_CLI" events | grep -c "node node3 replace_failed") == 2 ]]; }
wait_until 30 "node3's replacement to fail again" failed_twice
scontrol update node=node3 state=resume
wait_until 20 "the failed replacement to be dropped" event_seen "node node3 replace_dropped: node3 was put back in service after its replacement failed"
scontrol update node=node3 state=drain reason="maintenance"  # out of the way of part 4

# 3. A script that hangs: killed after provider_timeout, tried again, reported.
# Other tests run `sleep 300` beside this one: count_tasks counts only this
# cluster's (by its SLURM_CONF, which the controller's provider calls
# inherit), and is seen to count the hung script's while it runs.
echo hang >mode-node2
scontrol update node=node2 state=fail reason="Action:Replace"
wait_until 30 "node2's provider script to hang" tasks_are 1 "sleep 300"
wait_until 60 "node2's replacement to fail" event_seen "node node2 replace_failed: the replacement of node2 failed after 2 tries; .*did not finish within 15 s"
assert_eq "$(calls node2)" 2 "provider calls for node2"
tasks_are 0 "sleep 300" ||
  fail "the hung provider script was not killed: $(count_tasks "sleep 300") of its sleeps still run"

# 4. An auto-resume step on node1 and node4 loses node4: no idle node (node2
# is out, node3 drained) and the provider fails: give_up, not an endless wait.
echo fail >mode-node4
make_training_step
make_training_job 400
job=$(sbatch --parsable -N2 -w node1,node4 -o job.out job.sh)
wait_until 60 "attempt 0" started 0 2
scontrol update node=node4 state=fail reason="Action:Replace gpu: test fault"
wait_until 60 "the job to end" job_ended
assert_contains job.out "^srun exit 75$" "srun's give_up status"
assert_contains job.out "no node can replace node4 \(no idle node in partition [a-z]+, and the provider failed: .*no capacity for node4" "srun's message"
note "ok"
