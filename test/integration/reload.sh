#!/usr/bin/env bash
# SIGHUP reloads auto-resumed's configuration while a protected step runs:
# a bad file, or a new listen port someone else holds, is refused (the
# controller keeps running on its old settings),
# an unchanged one changes nothing, and a changed one restarts the
# controller in place (the same pid, as `systemctl reload` expects) on the
# same state: the step registered before the reload is still protected,
# loses a node, and resumes; the new setting (a metrics endpoint) is live.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

cluster_up --nodes 3
CONTROLLER_CONF=$'backoff=1\nend_window=2' controller_up
cd "$WORK" || exit
conf=$WORK/auto-resumed.conf
log=$WORK/controller.log
make_training_step
make_training_job 80
job=$(sbatch --parsable -N3 -o job.out job.sh)
wait_until 60 "attempt 0 on 3 nodes" started 0 3
starts() { grep -c ' listening on ' "$log"; }
assert_eq "$(starts)" 1 "controller starts before any SIGHUP"

# 1. A bad file: refused, named in the log; the controller runs on.
cp "$conf" conf.good
echo 'max_attempts=lots' >>"$conf"
kill -HUP "$CONTROLLER_PID"
wait_until 10 "the bad file's refusal in the log" grep -q "SIGHUP: reload refused, the running configuration stays: .*invalid value 'lots' for max_attempts" "$log"
controller_answers || fail "the controller does not answer after a refused reload"
assert_eq "$(starts)" 1 "controller starts after a refused reload"

# 1b. A new listen port someone holds: refused before the restart (which
# would fail to bind it and leave no controller), named in the log.
coproc HOLDER { exec python3 -c 'import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(600)'; }
read -r held <&"${HOLDER[0]}"
on_exit "kill $HOLDER_PID 2>/dev/null"
sed "s/^listen=.*/listen=127.0.0.1:$held/" conf.good >"$conf"
kill -HUP "$CONTROLLER_PID"
wait_until 10 "the taken port's refusal in the log" grep -q \
  "SIGHUP: reload refused, the running configuration stays: listen=127.0.0.1:$held: " "$log"
controller_answers || fail "the controller does not answer after a reload refused for its port"
assert_eq "$(starts)" 1 "controller starts after a reload refused for its port"

# 2. The same settings again: nothing to do.
cp conf.good "$conf"
kill -HUP "$CONTROLLER_PID"
wait_until 10 "'nothing to reload' in the log" grep -q "SIGHUP: $conf is unchanged: nothing to reload" "$log"
assert_eq "$(starts)" 1 "controller starts after an unchanged reload"

# 3. A new setting: restarted in place, same pid, same state.
METRICS=127.0.0.1:$(free_port)
echo "metrics_listen=$METRICS" >>"$conf"
# Twice at once: the second comes while the first restarts the daemon (it
# must wait for the new one, which finds nothing more to reload).
kill -HUP "$CONTROLLER_PID"
kill -HUP "$CONTROLLER_PID"
restarted() { (($(starts) == 2)); }
wait_until 20 "the controller to start again after the reload" restarted
assert_contains "$log" "SIGHUP: $conf changed: restarting in place on the same state" "the controller's log"
wait_until 20 "the reloaded controller to answer" controller_answers
kill -0 "$CONTROLLER_PID" || fail "the controller's pid $CONTROLLER_PID is gone after the reload"
metrics() { "$(dirname "$0")/scrape.py" "http://$METRICS/metrics" >metrics.txt 2>/dev/null; }
wait_until 10 "the new metrics endpoint to answer" metrics
"$AR_CLI" status --job "$job" --json >status.json
assert_eq "$(python3 -c 'import json,sys; print([(s["attempt"], s["state"]) for s in json.load(sys.stdin)["steps"]])' <status.json)" \
  "[(0, 'registered')]" "the job's steps in the reloaded controller's store"

# The step is still protected: a node lost now is repaired as before.
"$CLUSTER_CMD" kill-node "$CLUSTER" node3 >/dev/null
wait_until 60 "attempt 1 on 3 nodes" started 1 3
wait_until 60 "the job to end" job_ended
cat job.out
assert_eq "$(job_field JobState)" COMPLETED "job state"
assert_contains job.out "^srun exit 0$" "the batch script's output"
metrics || fail "no metrics after the resume"
assert_eq "$(awk '$1 == "auto_resume_verdicts_total{verdict=\"relaunch\"}" { print $2 }' metrics.txt)" 1 \
  "relaunches counted by the reloaded controller"
controller_down
note "ok"
