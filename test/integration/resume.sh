#!/usr/bin/env bash
# In-place resume on a real cluster: a batch job's `srun --auto-resume=1`
# step (a stand-in training that checkpoints the step it reached) loses a
# node that is not the batch host, is relaunched on a repaired allocation,
# loses another node, is relaunched again, runs past the minute in which
# Slurm would still send the rejoined nodes an abort of the job, and
# completes from its checkpoints: the job is never requeued, the step's output file keeps every
# attempt's lines, and each attempt's NODE_LIST and MASTER_ADDR match the
# live allocation. Then, in a job flagged with sbatch --auto-resume=1: an
# application failure (exit 3, no node at fault) is not resumed and srun
# exits 3; a step that opted out is not registered at all. The controller's
# Prometheus endpoint (metrics_listen) is scraped before, during and after
# the resumes: its counters moved by exactly the two resumes.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

# Accounting: Slurm 22.05 refuses a second resize of a job without it.
cluster_up --nodes 4 --accounting
METRICS=127.0.0.1:$(free_port)
# The provider brings a failed node back 15 s after it is asked: past the
# 10 s in which slurmctld's first send of the job's abort to the dead node
# fails (see below).
cat >"$WORK/slow-restart.sh" <<SCRIPT
#!/bin/bash
sleep 15
exec $CLUSTER_CMD restart-node $CLUSTER "\$1" --kill
SCRIPT
chmod +x "$WORK/slow-restart.sh"
CONTROLLER_RESTART_COMMAND="$WORK/slow-restart.sh {node}"
CONTROLLER_CONF=$'backoff=1\nend_window=2\nmetrics_listen='$METRICS controller_up
cd "$WORK" || exit
scrape() { "$(dirname "$0")/scrape.py" "http://$METRICS$1" "${@:2}"; }
# metric FILE SERIES: the series' value in a scrape (0 when absent).
metric() { awk -v s="$2" '$1 == s { v = $2 } END { print v == "" ? 0 : v }' "$1"; }
scrape /metrics >metrics.0 2>metrics.0.headers || fail "no metrics at $METRICS: $(cat metrics.0)"
assert_contains metrics.0.headers "text/plain; version=0.0.4" "the metrics' content type"
assert_eq "$(metric metrics.0 'auto_resume_verdicts_total{verdict="relaunch"}')" 0 "relaunches before any fault"

make_training_step
# The user's own MASTER_PORT is kept across relaunches. 160 steps (40 s):
# room for the second kill while attempt 1 runs, on a loaded machine too
# (with 60, attempt 1 once finished before the test killed its node).
make_training_job 160 'export MASTER_PORT=31234'

# Two tasks per node (8 in all): a replacement node must hold the job's 2
# CPUs per node.

# Each failed node comes back as a new instance and rejoins the job (the
# cluster has no other node). The shrink that took it out made slurmctld send
# it an abort of the job; the send to the dead node fails, and Slurm sends it
# again every 60 s until a slurmd takes it, unless the node is DOWN when a
# send fails: the controller sets the node DOWN once out of the job. The
# step is held running (ckpt.hold) past that window, so an abort still sent
# would kill attempt 2's tasks on a rejoined node (srun exit 137).
touch ckpt.hold
job=$(sbatch --parsable -N4 --ntasks-per-node=2 -o job.out job.sh)
wait_until 60 "attempt 0 on 4 nodes" started 0 8
wait_until 30 "attempt 0 to reach step 5" past 5
[[ $(job_field BatchHost) == node1 ]] || fail "batch host is $(job_field BatchHost), not node1"
"$CLUSTER_CMD" kill-node "$CLUSTER" node3 >/dev/null
killed=$SECONDS
scrape /metrics >metrics.1 2>/dev/null || fail "no metrics during the repair: $(cat metrics.1)"
wait_until 90 "attempt 1 on 4 nodes" started 1 8
note "node3 killed: attempt 1 running $((SECONDS - killed)) s later"
first_resume_at=$(checkpoint)
wait_until 30 "attempt 1 to make progress" past $((first_resume_at + 5))
"$CLUSTER_CMD" kill-node "$CLUSTER" node2 >/dev/null
killed=$SECONDS
wait_until 90 "attempt 2 on 4 nodes" started 2 8
note "node2 killed: attempt 2 running $((SECONDS - killed)) s later"
# Slurm's resend interval (60 s) and its connect timeout (10 s) after the
# second shrink, which came after the kill: the time itself is the fault.
held=$((killed + 85 - SECONDS))
((held <= 0)) || sleep "$held"
assert_eq "$(grep -c "attempt=3 " step.out)" 0 "attempts after the second relaunch"
rm ckpt.hold
wait_until 120 "the job to end" job_ended

cat job.out step.out
assert_eq "$(job_field JobState)" COMPLETED "job state"
assert_eq "$(job_field Restarts)" 0 "the job's restart count (a requeue is not a resume)"
assert_contains job.out "^srun exit 0$" "the batch script's output"
assert_contains job.out "relaunching step $job\.0 of run $job\.0-[0-9a-f]{8} as attempt 1 on " "srun's stderr"
assert_contains job.out "relaunching step $job\.1 of run $job\.0-[0-9a-f]{8} as attempt 2 on " "srun's stderr"
# Every attempt's lines are in the step's output file (opened in append mode).
for attempt in 0 1 2; do
  assert_eq "$(grep -c "attempt=$attempt " step.out)" 8 "tasks of attempt $attempt in step.out"
done
assert_contains step.out "^[0-9]: done at step 160$" "step.out"
# Each relaunch started from the checkpoint, not from zero.
resumed1=$(grep -o "^0: attempt=1 .* start=[0-9]*" step.out | grep -o '[0-9]*$')
resumed2=$(grep -o "^0: attempt=2 .* start=[0-9]*" step.out | grep -o '[0-9]*$')
((resumed1 >= 5 && resumed2 > resumed1)) || fail "attempts started at steps $resumed1 and $resumed2"
# The last attempt saw the live allocation.
live=$(scontrol show hostnames "$(job_field NodeList)" | paste -sd,)
first=$(scontrol show hostnames "$(job_field NodeList)" | head -n 1)
assert_contains step.out "^0: attempt=2 restarts=0 rank=0 node=[a-z0-9]+ nodes=$live master=$(node_addr "$first"):31234 " "attempt 2's environment"
# The job's AdminComment tells its resumes, in scontrol and in sacct.
story="\[auto-resume\] attempt 0: node3 failed, relaunch on node\[1-4\]; attempt 1: node2 failed, relaunch on node\[1-4\]"
scontrol show job "$job" >job.txt
assert_contains job.txt "^ *AdminComment=$story *$" "the job's AdminComment"
sacct -n -X -j "$job" -o AdminComment%300 | sed 's/ *$//' >sacct-comment.txt
assert_contains sacct-comment.txt "^ *$story$" "sacct's AdminComment"
# sacct keeps a record per resize (documented in docs/resume.md).
sacct -n -X -j "$job" -o State | tr -d ' ' >sacct.txt
assert_eq "$(tail -n 1 sacct.txt)" COMPLETED "sacct's last record of the job"
assert_eq "$(sort -u sacct.txt | paste -sd,)" COMPLETED,RESIZING "sacct's records of the job"

"$AR_CLI" events >events.txt
for kind in detected node_out merged expanded relaunch; do
  assert_contains events.txt "job $job [^ ]+ $kind: " "the controller's events"
done
# No idle node: each failed node came back as a new instance and rejoined.
for node in node3 node2; do
  assert_contains events.txt "node $node provider: asking the local provider to replace $node" "the node keeper's events"
  assert_contains events.txt "node $node replaced: $node is back in service" "the node keeper's events"
done
assert_eq "$(grep -c "job $job [^ ]* relaunch: " events.txt)" 2 "relaunches in the events"
assert_contains events.txt "detected: step $job\.0 attempt 0: node3: " "the first detection"
assert_contains events.txt "detected: step $job\.1 attempt 1: node2: " "the second detection"
assert_contains events.txt "after a backoff of 1 s" "the second relaunch"
# The log has a line per event, its facts as key=value fields.
assert_contains "$WORK/controller.log" " auto-resumed event: kind=relaunch level=info job=$job run=$job\.0-[0-9a-f]{8} node=- group=- uid=0 detail=\"relaunching run " "the controller's log"
assert_contains "$WORK/controller.log" " auto-resumed event: kind=replaced level=info job=0 run=- node=node3 group=- uid=0 detail=" "the controller's log"

# The metrics counted the two resumes, each fault to running again once.
scrape /metrics >metrics.2 2>/dev/null || fail "no metrics after the resumes: $(cat metrics.2)"
for series in 'auto_resume_verdicts_total{verdict="relaunch"}' auto_resume_recovery_seconds_count \
  auto_resume_nodes_replaced_total 'auto_resume_provider_calls_total{op="replace",outcome="ok"}' \
  'auto_resume_events_total{kind="detected"}'; do
  assert_eq "$(metric metrics.2 "$series")" 2 "$series after two resumes"
done
assert_eq "$(metric metrics.2 'auto_resume_verdicts_total{verdict="give_up"}')" 0 "give_up verdicts"
assert_eq "$(awk '/^auto_resume_steps\{/ { n += $2 } END { print n }' metrics.2)" 3 "steps in the store (the job's three attempts)"
(($(metric metrics.2 'auto_resume_requests_total{op="register",outcome="ok"}') >= 3)) ||
  fail "fewer than 3 registrations counted: $(grep requests_total metrics.2)"
# Each srun kept one session for its verdict asks (one a second while its
# step ran): far fewer sessions (srun's, the agents', the slurmstepds'
# reports, the CLI's) than verdict asks.
verdicts=$(metric metrics.2 'auto_resume_requests_total{op="verdict",outcome="ok"}')
sessions=$(metric metrics.2 'auto_resume_sessions_total{outcome="opened"}')
note "$verdicts verdict asks on $sessions sessions"
((verdicts >= 60 && sessions * 2 < verdicts)) ||
  fail "$sessions sessions opened for $verdicts verdict asks: $(grep -E 'sessions_total|requests_total' metrics.2)"
assert_eq "$(metric metrics.2 'auto_resume_sessions_total{outcome="failed"}')" 0 "sessions not authenticated"
awk '$1 == "auto_resume_recovery_seconds_sum" && $2 > 0 && $2 < 120 { ok = 1 } END { exit !ok }' metrics.2 ||
  fail "recovery time not between 0 and 120 s: $(grep recovery_seconds metrics.2)"
(($(metric metrics.2 auto_resume_store_bytes) > 0)) || fail "no store size in the metrics"
# No series names a job or a node (a large cluster would make millions).
labels=$(grep -oE '[{,][a-z_]+=' metrics.2 | tr -d '{,=' | sort -u | paste -sd' ')
for label in $labels; do
  [[ " group kind le op outcome state verdict version " == *" $label "* ]] ||
    fail "a series labelled '$label': only fixed sets are labels, never a job, node, run or user ($labels)"
done
# docs/metrics.md names every metric served and no other; the examples use
# only those.
python3 - "$AR_SOURCE_DIR" metrics.2 <<'PY' || fail "docs/metrics.md or the examples disagree with the metrics served"
import re, sys
source, scraped = sys.argv[1], open(sys.argv[2]).read()
served = dict(re.findall(r"^# TYPE (\S+) (\S+)$", scraped, re.M))
documented = set(re.findall(r"^\| `(auto_resume_\w+)` \|", open(source + "/docs/metrics.md").read(), re.M))
bad = [f"served, not in docs/metrics.md: {n}" for n in sorted(set(served) - documented)]
bad += [f"in docs/metrics.md, not served: {n}" for n in sorted(documented - set(served))]
for example in ("prometheus-alerts.yml", "grafana-dashboard.json"):
    for name in set(re.findall(r"auto_resume_\w+", open(f"{source}/examples/{example}").read())):
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if name not in served and served.get(base) != "histogram":
            bad.append(f"examples/{example} uses {name}, which is not served")
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
assert_eq "$(scrape /nothing)" "HTTP 404" "an unknown path"
assert_eq "$(scrape /metrics POST)" "HTTP 405" "a POST"

# An application failure is not resumed; opted-out steps are not registered;
# a second protected step while one runs is refused, and runs unprotected.
cat >app.sh <<SCRIPT
#!/bin/bash
#SBATCH --auto-resume=1
srun true; echo "plain \$?"
srun --auto-resume=0 true; echo "opted out \$?"
srun bash -c 'exit 3'; echo "failing \$?"
srun -N2 bash -c 'touch $WORK/first.started; sleep 4' &
until [[ -f $WORK/first.started ]]; do sleep 0.1; done
srun -N2 true; echo "second \$?"
wait
SCRIPT
job=$(sbatch --parsable -N4 -o app.out app.sh)
wait_until 60 "the application job to end" job_ended
cat app.out
assert_contains app.out "^plain 0$" "app.out"
assert_contains app.out "^opted out 0$" "app.out"
assert_contains app.out "^failing 3$" "app.out"
assert_contains app.out "^second 0$" "app.out"
assert_contains app.out "auto_resume: warning: auto-resume protection is OFF for step $job\.4: the controller at [^ ]+ refused it \(bad_request: job $job already has a protected step running \($job\.3, run $job\.3-[0-9a-f]{8}\); auto-resume protects one step per job at a time\)" "the refused second step"
assert_not_contains app.out "relaunching" "app.out"
"$AR_CLI" status --job "$job" --json >app-status.json
assert_eq "$(python3 -c 'import json,sys; print(sorted((s["step_id"], s["verdict"]) for s in json.load(sys.stdin)["steps"]))' <app-status.json)" \
  "[(0, 'no_fault'), (2, 'no_fault'), (3, 'no_fault')]" "the application job's protected steps and verdicts"
note "ok"
