#!/usr/bin/env bash
# slurmctld stopped (SIGSTOP) for 20 s under a protected step, the node
# agents running: a libslurm call then waits MessageTimeout for nothing,
# and the controller must not (docs/design.md, "Who waits where"). While
# slurmctld does not answer, the controller's looks go on with the last
# node list: no stall, no heartbeat deadline started again, nothing asked
# of slurmctld. node3, killed meanwhile (slurmd, tasks and agent), is taken
# at the first looks after slurmctld answers, on what the probes and the
# heartbeat watch counted meanwhile, and the step resumes once, in place.
# No look of the controller's takes 1 s or more meanwhile (2.5 s under
# the sanitizers; its metrics' auto_resume_look_seconds): a fault found
# then waits no longer than without the stop, give or take a second.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

# SlurmdTimeout=30: once slurmctld goes on, Slurm's own ping rounds would
# set node3 DOWN (and end the job) within about SlurmdTimeout; the
# controller's repair comes before that, as without the stop.
cluster_up --nodes 4 --slurmd-timeout 30
METRICS=127.0.0.1:$(free_port)
CONTROLLER_CONF="metrics_listen=$METRICS" controller_up
cd "$WORK" || exit
agents_up node1 node2 node3 node4
wait_until 20 "heartbeats from all four nodes" heard 4
make_training_step
make_training_job 4000
job=$(sbatch --parsable -N3 -w 'node[1-3]' -o job.out job.sh)
wait_until 60 "attempt 0 on 3 nodes" started 0 3
wait_until 30 "attempt 0 to make progress" past 3

looks_mark
ctld=$(<"$CLUSTER/run/slurmctld.pid")
on_exit "kill -CONT $ctld 2>/dev/null"
kill -STOP "$ctld"
stopped=$SECONDS
"$CLUSTER_CMD" kill-node "$CLUSTER" node3 >/dev/null
said_away() { grep -qE "slurmctld has not answered for the node list|cannot load the nodes from slurmctld" controller.log; }
wait_until 15 "the controller to say that slurmctld does not answer" said_away
# The fault is slurmctld stopped for 20 s: its length is the point.
left=$((20 - (SECONDS - stopped)))
((left <= 0)) || sleep "$left"
"$AR_CLI" events >events.txt
assert_not_contains events.txt "job $job [^ ]+ (detected|node_out)" "the step's events while slurmctld was stopped"
kill -CONT "$ctld"
answered=$SECONDS
note "slurmctld stopped for $((answered - stopped)) s, node3 killed meanwhile"

wait_until 60 "node3 to be taken" event_seen "job $job [^ ]+ detected: .*node3"
note "node3 taken $((SECONDS - answered)) s after slurmctld went on"
wait_until 90 "attempt 1 on 3 nodes" started 1 3
assert_no_slow_looks "from the stop to attempt 1" "while slurmctld was stopped and after"
# The looks went on while slurmctld was stopped: the controller never
# stood still, and no heartbeat deadline was started again.
assert_not_contains controller.log "stood still" "the controller's log"
"$AR_CLI" events >events.txt
assert_not_contains events.txt " stalled: " "the events"
# A slow Slurm is said as a slow Slurm, once each way.
assert_contains events.txt " slurm_slow: (slurmctld has not answered for the node list|cannot load the nodes from slurmctld)" "the events"
assert_contains events.txt " slurm_back: slurmctld answers again after [0-9]+ s" "the events"
assert_eq "$(grep -c " slurm_slow: " events.txt)" 1 "slurm_slow events"
assert_eq "$(grep -c "job $job [^ ]* relaunch: " events.txt)" 1 "relaunches"
assert_eq "$(job_field JobState)" RUNNING "the job's state"
assert_eq "$(job_field Restarts)" 0 "the job's restart count"
note "ok"
