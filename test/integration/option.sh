#!/usr/bin/env bash
# The --auto-resume option: listed in srun --help, bad values refused before
# any task starts, sbatch's value reaching the job's steps, srun's own value
# winning, the task variables only for a registered step, the controller-down
# message (warning, or a step that does not run with required=1, under a
# `required` and an `optional` plugstack line), and bad plugstack lines.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

cluster_up --nodes 2
cd "$WORK" || exit
# No controller listens here: the plugin's default is 127.0.0.1:7860, which a
# developer's machine may use, so point it at a port nobody holds.
dead_port=$(free_port)
set_plugstack "controller=127.0.0.1:$dead_port connect_timeout=1"

# --help lists the option with its argument and the plugin's tag.
srun --help >help.txt
assert_contains help.txt '--auto-resume=0\|1 +\[auto_resume\]' "srun --help"

# Bad values fail the srun before any task runs, naming the value.
for bad in banana 2 ""; do
  rm -f ran
  if srun -N1 --auto-resume="$bad" touch ran >out.txt 2>&1; then fail "srun accepted --auto-resume='$bad'"; fi
  assert_contains out.txt "invalid --auto-resume value '$bad'" "srun --auto-resume='$bad'"
  [[ ! -e ran ]] || fail "a task ran despite --auto-resume='$bad'"
  if sbatch --auto-resume="$bad" --wrap true >out.txt 2>&1; then fail "sbatch accepted --auto-resume='$bad'"; fi
  assert_contains out.txt "invalid --auto-resume value '$bad'" "sbatch --auto-resume='$bad'"
  if salloc -N1 --auto-resume="$bad" true >out.txt 2>&1; then fail "salloc accepted --auto-resume='$bad'"; fi
  assert_contains out.txt "invalid --auto-resume value '$bad'" "salloc --auto-resume='$bad'"
done
assert_eq "$(squeue -h | wc -l)" 0 "jobs left by refused submissions"

# A plain srun is untouched; a flagged one warns once that protection is off,
# and its tasks run as a plain step's: no AUTO_RESUME, no NODE_LIST.
srun -N2 printenv AUTO_RESUME >plain.out 2>plain.err || true
assert_eq "$(cat plain.out)" "" "AUTO_RESUME in a plain step"
assert_not_contains plain.err 'auto_resume' "a plain srun's stderr"
# shellcheck disable=SC2016 # expanded by the tasks
salloc -N2 srun -N2 --auto-resume=1 bash -c 'echo "[${AUTO_RESUME:-}${NODE_LIST:-}]"' >flag.out 2>flag.err ||
  fail "flagged srun failed: $(cat flag.err)"
assert_eq "$(tr '\n' ' ' <flag.out)" "[] [] " "AUTO_RESUME and NODE_LIST in an unprotected flagged step's two tasks"
assert_contains flag.err "auto-resume protection is OFF for step [0-9]+\.0: the controller at 127\.0\.0\.1:$dead_port cannot be reached" "flagged srun"
assert_eq "$(grep -c 'protection is OFF' flag.err)" 1 "number of protection warnings"

# A flagged srun outside any allocation cannot be relaunched, and says so.
srun -N1 --auto-resume=1 true 2>standalone.err || fail "a flagged standalone srun failed"
assert_contains standalone.err "protection is OFF .*made its own allocation.*inside sbatch or salloc" "a flagged standalone srun"

# A controller that accepts the step: no warning.
controller_up connect_timeout=1
salloc -N1 srun --auto-resume=1 true 2>up.err || fail "flagged srun failed with a controller up: $(cat up.err)"
# Only the line that says why srun waits a moment after its step.
assert_eq "$(grep -c auto_resume up.err)" 1 "srun's auto_resume lines with the controller up"
assert_contains up.err "^auto_resume: step [0-9]+\.0 ended; waiting for the controller's verdict" "srun with the controller up"
# sbatch --auto-resume=1 is the default for every srun of the job;
# srun --auto-resume=0 opts one step out.
cat >job.sh <<'SCRIPT'
#!/bin/bash
srun -N2 printenv AUTO_RESUME > inherited.out 2> inherited.err
srun -N2 --auto-resume=0 printenv AUTO_RESUME > optout.out 2> optout.err
true
SCRIPT
sbatch --wait -N2 --auto-resume=1 -o job.log job.sh >/dev/null || fail "flagged batch job failed: $(cat job.log)"
assert_eq "$(tr '\n' ' ' <inherited.out)" "1 1 " "AUTO_RESUME in a step of an sbatch --auto-resume=1 job"
assert_eq "$(grep -c auto_resume inherited.err)" 1 "auto_resume lines of the inherited step"
assert_eq "$(cat optout.out)" "" "AUTO_RESUME in an --auto-resume=0 step"
assert_not_contains optout.err "auto_resume" "opted-out step's stderr"
# ... and from salloc the same way.
salloc -N1 --auto-resume=1 srun printenv AUTO_RESUME >salloc.out 2>salloc.err || fail "salloc failed: $(cat salloc.err)"
assert_eq "$(cat salloc.out)" "1" "AUTO_RESUME under salloc --auto-resume=1"

# The tasks of a protected step learn the live allocation: NODE_LIST, the
# first node's address as MASTER_ADDR, a MASTER_PORT unless the user set one.
# shellcheck disable=SC2016 # expanded by the tasks
salloc -N2 srun -N2 --auto-resume=1 bash -c 'echo "$SLURM_JOB_ID $NODE_LIST $MASTER_ADDR $MASTER_PORT"' \
  >env.out 2>/dev/null || fail "flagged srun failed: $(cat env.out)"
read -r env_job env_nodes env_addr env_port < <(head -n 1 env.out)
assert_eq "$(sort -u env.out | wc -l)" 1 "distinct task environments"
assert_eq "$env_nodes $env_addr" "node1,node2 127.0.0.11" "NODE_LIST and MASTER_ADDR"
assert_eq "$env_port" $((29500 + (env_job % 1000) * 8)) "MASTER_PORT"
salloc -N1 -w node2 srun --auto-resume=1 printenv MASTER_ADDR NODE_LIST >env2.out 2>/dev/null
assert_eq "$(tr '\n' ' ' <env2.out)" "127.0.0.12 node2 " "MASTER_ADDR and NODE_LIST on node2 alone"
MASTER_PORT=4242 salloc -N1 srun --auto-resume=1 printenv MASTER_PORT >env3.out 2>/dev/null
assert_eq "$(cat env3.out)" 4242 "a MASTER_PORT the user set"
srun -N1 printenv NODE_LIST >env4.out 2>/dev/null || true
assert_eq "$(cat env4.out)" "" "NODE_LIST in a plain step"
# required=1 under an optional line, the controller up: a registered step
# runs, also under srun --export=NONE (which keeps AUTO_RESUME from its tasks:
# the nodes go by a SLURM_* marker, which Slurm always passes).
PLUGSTACK_LINE=optional set_plugstack "controller=$AUTO_RESUME_CONTROLLER connect_timeout=1 required=1"
rm -f ran
salloc -N1 srun --auto-resume=1 --export=NONE /usr/bin/touch "$WORK/ran" 2>export.err ||
  fail "a registered step under srun --export=NONE with required=1 failed: $(cat export.err)"
[[ -e ran ]] || fail "the task of a registered step under srun --export=NONE did not run"
salloc -N1 srun --auto-resume=1 printenv AUTO_RESUME >req_up.out 2>req_up.err ||
  fail "a registered step with required=1 failed: $(cat req_up.err)"
assert_eq "$(cat req_up.out)" 1 "AUTO_RESUME of a registered step with required=1"
set_plugstack "controller=$AUTO_RESUME_CONTROLLER connect_timeout=1"
# One that does not answer within connect_timeout: the step runs, unprotected.
kill -STOP "$CONTROLLER_PID"
salloc -N1 srun --auto-resume=1 true 2>stopped.err || fail "flagged srun failed with a hung controller"
assert_contains stopped.err "protection is OFF .*timed out after 1000 ms" "srun with a hung controller"
kill -CONT "$CONTROLLER_PID"

# required=1 and no controller: a flagged step does not run, under a
# `required` plugstack line as under an `optional` one, the README's: the
# nodes refuse the tasks, which lack AUTO_RESUME=1, and they exit 69; a
# plain one still runs, in the same allocation at once (a srun stopped
# between its step's creation and launch would leave slurmctld holding the
# step, and the next srun would wait for its CPUs until the allocation
# ended: the 30 s below is a deadline, not a measure).
for PLUGSTACK_LINE in required optional; do
  set_plugstack "controller=127.0.0.1:$dead_port connect_timeout=1 required=1"
  rm -f ran
  # shellcheck disable=SC2016 # expanded by salloc's shell
  salloc -N1 bash -c 'srun --auto-resume=1 touch ran; echo "flagged exit $?"; timeout 30 srun true; echo "plain exit $?"' >req.out 2>&1 || true
  assert_contains req.out "cannot be reached .*required=1" "srun with required=1 ($PLUGSTACK_LINE line)"
  assert_contains req.out "^flagged exit 69$" "a refused srun's exit with required=1 ($PLUGSTACK_LINE line)"
  assert_contains req.out "^plain exit 0$" "a plain srun after a refused one in the same allocation ($PLUGSTACK_LINE line)"
  if srun -N1 --auto-resume=1 touch ran >req.out 2>&1; then fail "flagged standalone srun ran with required=1 ($PLUGSTACK_LINE line)"; fi
  assert_contains req.out "made its own allocation.*required=1" "standalone srun with required=1 ($PLUGSTACK_LINE line)"
  # The option from sbatch, through the job's environment.
  sbatch --wait -N1 --auto-resume=1 -o req_job.log --wrap 'srun touch ran; echo "srun exit $?"' >/dev/null || true
  assert_contains req_job.log "^srun exit [1-9]" "a batch job's srun with required=1 ($PLUGSTACK_LINE line)"
  [[ ! -e ran ]] || fail "a task ran although the controller was required and down ($PLUGSTACK_LINE line)"
  srun -N1 true 2>plain.err || fail "a plain srun failed with required=1 ($PLUGSTACK_LINE line): $(cat plain.err)"
done
assert_contains req.out "task 0 of step [0-9]+\.0 does not start: .*required=1" "a refused task under an optional line"
# required=0 under an optional line: the flagged step runs unprotected, as a
# plain step.
set_plugstack "controller=127.0.0.1:$dead_port connect_timeout=1"
# shellcheck disable=SC2016 # expanded by the task
salloc -N1 srun --auto-resume=1 bash -c 'echo "[${AUTO_RESUME:-}]"' >opt.out 2>opt.err ||
  fail "flagged srun failed with required=0 under an optional line: $(cat opt.err)"
assert_eq "$(cat opt.out)" "[]" "AUTO_RESUME of an unprotected step under an optional line"
assert_contains opt.err "protection is OFF" "flagged srun with required=0 under an optional line"

# A bad plugstack.conf argument is an error naming it. Under a `required`
# line every srun fails; under an `optional` one a plain srun says so and
# runs, and any command with --auto-resume=1 fails.
PLUGSTACK_LINE=required
set_plugstack "socket=/run/x"
if srun -N1 true >bad.out 2>&1; then fail "srun ran with an unknown plugstack argument"; fi
assert_contains bad.out "unknown plugstack.conf argument 'socket'" "srun with a bad plugstack.conf"
set_plugstack "required=maybe"
if srun -N1 true >bad.out 2>&1; then fail "srun ran with required=maybe"; fi
assert_contains bad.out "invalid value 'maybe' for required" "srun with required=maybe"
PLUGSTACK_LINE=optional
set_plugstack "socket=/run/x"
srun -N1 true >typo.out 2>&1 || fail "a plain srun failed under an optional line with a typo: $(cat typo.out)"
assert_contains typo.out "bad plugstack.conf line: unknown plugstack.conf argument 'socket'" "a plain srun under an optional line with a typo"
rm -f ran
if salloc -N1 srun --auto-resume=1 touch ran >typo.out 2>&1; then fail "a flagged srun ran under an optional line with a typo"; fi
assert_contains typo.out "--auto-resume=1 cannot be honoured: bad plugstack.conf line: unknown plugstack.conf argument 'socket'" "a flagged srun under an optional line with a typo"
if sbatch -N1 --auto-resume=1 --wrap 'touch ran' >typo.out 2>&1; then fail "sbatch --auto-resume=1 ran under an optional line with a typo"; fi
assert_contains typo.out "cannot be honoured: bad plugstack.conf line" "sbatch --auto-resume=1 under an optional line with a typo"
[[ ! -e ran ]] || fail "a flagged task ran under an optional line with a typo"
controller_down
note "ok"
