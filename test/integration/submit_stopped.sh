#!/usr/bin/env bash
# Who waits where (docs/design.md): an expand helper's submit runs as the
# job's owner, who can stop it (SIGSTOP) for up to its 30 s timeout; the
# engine never waits for it. Two protected jobs: A on node[1-2], B on
# node[3-4], node5 and node6 idle. node2 is killed: A's repair chooses an
# idle node and submits its helper through an auto-resume-submit that stops
# itself the first time (as its owner could). While that submit is
# stopped, node4 is killed: B's fault is detected and B is relaunched
# before A's submit ends (a controller that waited on it would stand still
# for 30 s). A's submit is then killed at its timeout, tried again, and A
# is relaunched too. Without slurmdbd, slurmctld also refuses each of the
# repairs' AdminComment updates for 5 s ("the DB index is being set"): no
# look of the controller's takes 1 s or more meanwhile (2.5 s under the
# sanitizers; its metrics' auto_resume_look_seconds), so B's fault waits no
# longer than it would without them, give or take a second.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

cluster_up --nodes 6 --slurmd-timeout 60 --message-timeout 3
cd "$WORK" || exit
# The controller runs the auto-resume-submit next to it: here one that
# stops itself at its first run, then runs the real one.
mkdir -m 755 stopper
cp "${AR_DAEMON:?}" stopper/
real_submit=$(dirname "$AR_DAEMON")/auto-resume-submit
cat >stopper/auto-resume-submit <<SCRIPT
#!/bin/bash
if mkdir "$WORK/submit-stopped" 2>/dev/null; then kill -STOP \$\$; fi
exec "$real_submit" "\$@"
SCRIPT
chmod 755 stopper/auto-resume-submit
AR_DAEMON=$WORK/stopper/$(basename "$AR_DAEMON")
METRICS=127.0.0.1:$(free_port)
CONTROLLER_CONF=$'backoff=0\nend_window=1\nmetrics_listen='$METRICS controller_up

for name in a b; do
  # shellcheck disable=SC2016 # expanded by the step's shell
  printf '#!/bin/bash\nsrun --auto-resume=1 -o %s/%s.out bash -c %q\necho "srun exit $?"\n' \
    "$WORK" "$name" 'echo "attempt=$AUTO_RESUME_ATTEMPT rank=$SLURM_PROCID"; sleep 1000' >"$name.sh"
done
a=$(sbatch --parsable -N2 -w node[1-2] -o a.job.out a.sh)
b=$(sbatch --parsable -N2 -w node[3-4] -o b.job.out b.sh)
attempt_started() { [[ $(grep -c "^attempt=$2 " "$1.out" 2>/dev/null) == 2 ]]; }
wait_until 60 "job A's step" attempt_started a 0
wait_until 60 "job B's step" attempt_started b 0

looks_mark
"$CLUSTER_CMD" kill-node "$CLUSTER" node2 >/dev/null
# stopped_submit: the PID of the stopped auto-resume-submit, if one is.
stopped_submit() {
  local pid
  for pid in $(pgrep -f "^/bin/bash $WORK/stopper/auto-resume-submit" || true); do
    [[ $(ps -o stat= -p "$pid" 2>/dev/null) == T* ]] && echo "$pid"
  done
  return 0
}
submit_is_stopped() { [[ -n $(stopped_submit) ]]; }
wait_until 60 "job A's helper submit to be stopped" submit_is_stopped
"$CLUSTER_CMD" kill-node "$CLUSTER" node4 >/dev/null
killed_at=$(date +%s)  # at the latest
relaunched() { "$AR_CLI" events | grep -qE "job $1 [^ ]+ relaunch: "; }
wait_until 60 "job B relaunched" relaunched "$b"
# A's submit is killed at its timeout (30 s) and tried again.
wait_until 60 "job A's stopped submit killed at its timeout" \
  grep -q "stopper/auto-resume-submit did not finish within 30 s" "$WORK/controller.log"
# B went its whole way while A's submit stood stopped, as the controller's
# own log tells (the test's own polling may lag on a loaded machine).
# log_time PATTERN: the time of the log's first line matching PATTERN.
log_time() { date -d "$(grep -m1 -E -- "$1" "$WORK/controller.log" | cut -d' ' -f1)" +%s; }
b_relaunched=$(log_time "event: kind=relaunch .* job=$b ")
a_timeout=$(log_time "stopper/auto-resume-submit did not finish within 30 s")
note "node4 killed $((a_timeout - killed_at)) s and job B relaunched $((a_timeout - b_relaunched)) s before job A's stopped submit was killed"
((killed_at < a_timeout)) ||
  fail "node4 was killed too late to tell (at $killed_at, A's submit killed at $a_timeout)"
((b_relaunched < a_timeout)) ||
  fail "job B was relaunched at $b_relaunched, only once job A's stopped submit ended at $a_timeout: the engine waited for it"
# (B may have taken the idle node A chose: A's helper then waits 30 s for
# it before another is chosen.)
wait_until 120 "job A relaunched" relaunched "$a"
wait_until 60 "job B's attempt 1" attempt_started b 1
wait_until 60 "job A's attempt 1" attempt_started a 1
assert_no_slow_looks "from node2's kill to A's attempt 1" "while A's submit was stopped and its AdminComment updates refused"
assert_contains "$WORK/controller.log" "cannot write its resume into its AdminComment" "the controller's log (the refused AdminComment updates)"
assert_contains "$WORK/controller.log" "auto-resume-submit did not finish within 30 s" "the controller's log"
"$AR_CLI" events >events.txt
assert_contains events.txt "job $a [^ ]+ expand_helper: helper job [0-9]+ allocates node[56] for job $a" "job A's helper"
assert_not_contains "$WORK/controller.log" "the controller stood still" "the controller's log (it never stood still; no agent runs here, so it would say so in its log only, not as an event)"
scancel "$a" "$b"
note "ok"
