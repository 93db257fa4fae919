#!/usr/bin/env bash
# Fast detection by the node agents' heartbeats, with Slurm's SlurmdTimeout
# left long (300 s): a frozen node (its slurmd, its agent and its steps
# SIGSTOPped: no connection drops, so the controller's TCP probes still see
# it) is marked FAIL with "Action:Replace heartbeat: ..." within
# heartbeat_timeout, the auto-resume step on it is resumed on the other
# nodes, and the node is replaced and back idle. DCGM's policy listener in
# the agent marks a node on an XID, and an agent speaking for another node
# from its own address hides nothing. Before the mark, the agents of two
# other nodes deep-probe the frozen node (a second vantage point) and
# cannot reach it either. The false-positive guards:
# the controller stopped for longer than the timeout marks nothing when it
# continues; most nodes silent at once marks nothing and says why.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

cluster_up --nodes 5 --slurmd-timeout 300
CONTROLLER_CONF=$'heartbeat_timeout=4\nend_window=1' controller_up
cd "$WORK" || exit
agents_up node1 node2 node3 node4 node5
wait_until 20 "heartbeats from all five nodes" heard 5
# An agent with a node name slurmctld does not know is told so: by
# slurmctld when it looks up the node's NodeAddr, and by the controller when
# it sends from any address.
"$AR_AGENT" --node nosuchnode --interval 1 >bogus-agent.log 2>&1 &
bogus=$!
"$AR_AGENT" --node nosuchnode --source any --interval 1 >bogus-any-agent.log 2>&1 &
bogus_any=$!
wait_until 10 "the unknown node's NodeAddr not found" grep -q "heartbeat not taken: slurmctld does not know node 'nosuchnode'" bogus-agent.log
wait_until 10 "the unknown node's heartbeat refused" grep -q "heartbeat not taken: bad_request: slurmctld does not know node 'nosuchnode'" bogus-any-agent.log
kill -TERM "$bogus" "$bogus_any"
wait "$bogus" "$bogus_any" || true
# The agents send from their nodes' NodeAddr (127.0.0.1X on this cluster).
assert_contains "$WORK/agent-node2.log" "heartbeats go from 127\.0\.0\.12$" "node2's agent's log"
none_failed() { [[ -z $(sinfo -h -N -t fail,down,drain -o '%N') ]] || fail "nodes marked: $(sinfo -N -t fail,down,drain -o '%N %T %E')"; }

# 1. The controller itself stands still for longer than heartbeat_timeout
# (SIGSTOP is the fault; its length is the point of this check): when it
# goes on, every deadline starts again and no node is marked.
kill -STOP "$CONTROLLER_PID"
sleep 6
kill -CONT "$CONTROLLER_PID"
wait_until 20 "the controller to notice its stall" event_seen "node - stalled: the controller stood still for [0-9.]+ s"
wait_until 20 "fresh heartbeats from all five nodes after the stall" heard 5
none_failed
"$AR_CLI" events >events.txt
assert_not_contains events.txt " marked FAIL" "the events after the stall"

# 2. Most nodes fall silent at once (three of five agents stopped): nothing
# is marked, and an event says why.
kill -STOP "${AGENT_PID[node1]}" "${AGENT_PID[node2]}" "${AGENT_PID[node3]}"
wait_until 30 "the crowd event" event_seen "node - heartbeat_crowd: 3 of 5 nodes are silent at once \(node1,node2,node3\)"
none_failed
kill -CONT "${AGENT_PID[node1]}" "${AGENT_PID[node2]}" "${AGENT_PID[node3]}"
wait_until 20 "fresh heartbeats again" heard 5
none_failed

# 3. One agent stopped while its slurmd answers: late, not marked.
kill -STOP "${AGENT_PID[node5]}"
wait_until 30 "the late heartbeat event" event_seen "node node5 heartbeat_late: no heartbeat from node5 for [0-9]+ s, but its slurmd answers"
none_failed
kill -CONT "${AGENT_PID[node5]}"
wait_until 20 "node5's heartbeat again" heard 5

# 4. DCGM reports an XID on node5: the agent's policy listener (dcgmi is a
# stub that prints output written by hand once told to) marks node5 at once,
# and the node is replaced and back idle.
cat >dcgmi <<STUB
#!/bin/bash
[[ "\$*" == "policy --reg" ]] || { echo "Error: unexpected arguments: \$*"; exit 1; }
echo "Listening for violations."
while [ ! -e $WORK/xid ]; do sleep 0.1; done
echo "Timestamp: Tue Mar  4 12:00:05 2025"
echo "XID error 79 detected."
exec sleep 300
STUB
chmod +x dcgmi
AR_CLUSTER_NODE="$CLUSTER:node5" setsid "$AR_AGENT" --node node5 --interval 1 --dcgm-policy \
  --dcgmi "$WORK/dcgmi" >>agent-node5-dcgm.log 2>&1 &
dcgm_agent=$!
on_exit "kill -TERM $dcgm_agent 2>/dev/null"
touch xid
xid_marked() { [[ $(scontrol -o show node node5) == *"Reason=Action:Replace dcgm: XID 79: GPU has fallen off the bus"* ]]; }
wait_until 20 "node5 marked by the DCGM listener" xid_marked
assert_contains agent-node5-dcgm.log "^auto-resume-agent: dcgm: marked node5 FAIL: Action:Replace dcgm: XID 79" "the agent's log"
wait_until 60 "node5 replaced" event_seen "node node5 replaced: node5 is back in service"
wait_until 20 "node5 idle" node_is node5 idle
agents_up node5  # the replacement killed the old node's agents, as a real one would
wait_until 20 "heartbeats from all five nodes" heard 5

# 5. A frozen node under a running auto-resume step.
make_training_step
make_training_job 400
job=$(sbatch --parsable -N4 -w node[1-4] -o job.out job.sh)
wait_until 60 "attempt 0 on 4 nodes" started 0
wait_until 30 "attempt 0 to reach step 3" past 3
# An agent on node1 started with a copied --node node3 (issue 10, hole 6):
# its heartbeats are refused, so they hide nothing when node3 freezes.
"$AR_AGENT" --node node3 --source 127.0.0.11 --interval 1 >copied-agent.log 2>&1 &
copied=$!
on_exit "kill -TERM $copied 2>/dev/null"
wait_until 10 "the copied agent's heartbeats refused" grep -q "heartbeat not taken: forbidden: a heartbeat for node3 from 127.0.0.11, which is not the node's address: node3 is at 127.0.0.13 (NodeAddr)" copied-agent.log
"$CLUSTER_CMD" freeze-node "$CLUSTER" node3 >/dev/null
frozen_at=$SECONDS
marked() { [[ $(scontrol -o show node node3) == *"Reason=Action:Replace heartbeat: no heartbeat for "*" s and slurmd does not answer"* ]]; }
# heartbeat_timeout (4 s) plus the controller's half-second look and the
# one-second deep probe, then the cross-check: the agents of two other
# nodes deep-probe node3 at their next heartbeat (1 s) for at most 1 s.
wait_until 12 "node3 marked by the heartbeat path" marked
note "node3 marked $((SECONDS - frozen_at)) s after the freeze (heartbeat_timeout=4)"
kill -TERM "$copied"
wait_until 60 "attempt 1 on 4 nodes" started 1
assert_contains step.out "^0: attempt=1 .* nodes=node1,node2,node4,node5 " "attempt 1's nodes (node3 out, node5 in)"
"$AR_CLI" events >events.txt
assert_contains events.txt "node node3 marked: node3 marked FAIL: Action:Replace heartbeat: no heartbeat for [0-9]+ s and slurmd does not answer \(the agents? of [a-z0-9, ]+ cannot reach it either\)" "the mark's event (cross-checked by other nodes' agents)"
assert_contains events.txt "job $job [^ ]+ detected: step $job\.0 attempt 0: node3: a health check failed: Action:Replace heartbeat:" "the step's detection"
# The frozen node is replaced by the local provider and comes back idle.
wait_until 90 "node3 replaced" event_seen "node node3 replaced: node3 is back in service"
wait_until 20 "node3 idle" node_is node3 idle
scancel "$job"
wait_until 60 "the job to end" job_ended
note "ok"
