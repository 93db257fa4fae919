#!/usr/bin/env bash
# srun's wait for the verdict after a protected step is bounded: a controller
# that answers `wait` all along (a long end_window) is left at
# verdict_timeout, one that accepts connections and never answers (stopped
# with SIGSTOP) at unreachable_timeout; either way srun says why and keeps the
# step's own exit status. And a registration whose reply was lost is tried
# again: the controller answers `duplicate`, and the step is protected; a
# relaunch keeps trying while the controller does not answer for a while.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

cluster_up --nodes 1
CONTROLLER_CONF='end_window=600' controller_up connect_timeout=1 verdict_timeout=3
cd "$WORK" || exit
gone() { ! kill -0 "$1" 2>/dev/null; }
# verdict_of JOB: the verdict of the job's protected step.
verdict_of() {
  "$AR_CLI" status --job "$1" --json |
    python3 -c 'import json,sys; s=json.load(sys.stdin)["steps"]; print(s[-1].get("verdict", "") if s else "")'
}
srun_status() {  # PID: its exit status
  local rc=0
  wait "$1" || rc=$?
  echo "$rc"
}

# 1. The controller answers `wait` (end_window=600): srun stops waiting at
# verdict_timeout=3, says so, tells the controller, and exits with the step's
# status.
salloc -N1 srun --auto-resume=1 bash -c 'exit 3' >wait.out 2>&1 &
pid=$!
wait_until 90 "srun to stop waiting for a verdict the controller keeps deferring" gone "$pid"
assert_eq "$(srun_status "$pid")" 3 "salloc's status after srun stopped waiting"
assert_contains wait.out "no verdict from the controller at 127\.0\.0\.1:$CONTROLLER_PORT within verdict_timeout=3 s; not relaunching step [0-9]+\.0, which keeps its own exit status" "srun at verdict_timeout"
job=$(grep -oE 'step [0-9]+\.0 ended' wait.out | grep -oE '[0-9]+' | head -n 1)
assert_eq "$(verdict_of "$job")" cancelled "the controller's verdict for a step srun stopped waiting for"

# 2. The controller stops answering (SIGSTOP: connections are accepted and
# never answered) while the step runs: after the step, srun asks until
# unreachable_timeout=3, then exits with the step's status.
set_plugstack "controller=$AUTO_RESUME_CONTROLLER connect_timeout=1 unreachable_timeout=3"
# shellcheck disable=SC2016 # run by the task
salloc -N1 srun --auto-resume=1 bash -c 'touch started; until [[ -e go ]]; do sleep 0.1; done; exit 4' \
  >half.out 2>&1 &
pid=$!
wait_until 60 "the protected step to start" test -e started
kill -STOP "$CONTROLLER_PID"
on_exit "kill -CONT $CONTROLLER_PID 2>/dev/null"
touch go
wait_until 90 "srun to stop asking a controller that does not answer" gone "$pid"
kill -CONT "$CONTROLLER_PID"
assert_eq "$(srun_status "$pid")" 4 "salloc's status after srun gave up on the controller"
assert_contains half.out "no answer from the controller at 127\.0\.0\.1:$CONTROLLER_PORT for [0-9]+ s .*unreachable_timeout=3 s\); not relaunching step [0-9]+\.0, which keeps its own exit status" "srun at unreachable_timeout"
assert_not_contains half.out "protection is OFF" "srun of a step registered before the controller stopped"

# 3. The reply to a registration is lost (a proxy drops it; the controller
# did register the step): srun registers again, the controller answers
# `duplicate`, and the step runs protected.
proxy_port=$(free_port)
python3 "$AR_SOURCE_DIR/test/integration/drop_reply.py" "$proxy_port" "$CONTROLLER_PORT" >proxy.log 2>&1 &
on_exit "kill $! 2>/dev/null"
wait_until 20 "the proxy to listen" grep -q listening proxy.log
set_plugstack "controller=127.0.0.1:$proxy_port connect_timeout=1 verdict_timeout=3"
salloc -N1 srun --auto-resume=1 printenv AUTO_RESUME >retry.out 2>retry.err ||
  fail "a flagged srun whose registration reply was lost failed: $(cat retry.err)"
assert_contains proxy.log "dropped the reply to register" "the proxy"
assert_contains proxy.log 'forwarded the reply to register: .*"duplicate": ?true' "the proxy"
assert_not_contains retry.err "protection is OFF" "srun whose registration reply was lost"
assert_eq "$(cat retry.out)" 1 "AUTO_RESUME of a step registered on the second try"

# 4. A relaunch (the marker its srun inherits from the one the controller
# told to relaunch) while the controller does not answer for 5 s (SIGSTOP):
# it keeps trying to register, says so once, and runs protected (a new run
# would have given up after its second try: docs/operations.md).
set_plugstack "controller=$AUTO_RESUME_CONTROLLER connect_timeout=1 verdict_timeout=3 unreachable_timeout=30"
kill -STOP "$CONTROLLER_PID"
stopped=$SECONDS
# shellcheck disable=SC2016 # expanded inside the allocation
salloc -N1 bash -c 'AUTO_RESUME_RELAUNCH="$SLURM_JOB_ID.0-0000abcd 1 0" srun --auto-resume=1 printenv AUTO_RESUME_ATTEMPT' \
  >relaunch.out 2>relaunch.err &
pid=$!
wait_until 30 "the relaunch's first try to time out" grep -q "cannot register the relaunch" relaunch.err
# The outage: 5 s of a controller that accepts connections and never answers.
((SECONDS - stopped >= 5)) || sleep $((5 - (SECONDS - stopped)))
kill -CONT "$CONTROLLER_PID"
wait_until 90 "the relaunched srun to end" gone "$pid"
cat relaunch.err
assert_contains relaunch.err "cannot register the relaunch of step [0-9]+\.0 yet: the controller at [^ ]+ cannot be reached \(timed out after 1000 ms\); trying again for up to 30 s \(unreachable_timeout\)" "the relaunch's srun"
assert_not_contains relaunch.err "protection is OFF" "the relaunch's srun"
assert_eq "$(cat relaunch.out)" 1 "AUTO_RESUME_ATTEMPT of the relaunch, registered after the outage"
controller_down
note "ok"
