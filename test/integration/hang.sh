#!/usr/bin/env bash
# Hung steps (docs/resume.md, "Hangs and crashes"), with the node agents
# reading the progress files:
#  1. a PyTorch DDP training (examples/train.py, gloo, 3 nodes) whose rank 2
#     stops for good once step 12 is done (the others block in the next
#     all_reduce): `hung` names node3, rank 2's, as the one that stopped
#     first; with --auto-resume-hang-signal=USR1 every rank prints its
#     Python stacks; the nodes' agents run their quick checks, which pass
#     (a node that failed one would leave the job, as after a crash); the
#     step is relaunched in place from its checkpoint and the training
#     completes, the job never requeued;
#  2. never a false positive: a step beating slowly (an interval just under
#     the timeout), one inside an announced section longer than the
#     timeout, one that never beats, and one whose node holds a folder an
#     earlier step with the same ids left (a requeued job numbers its steps
#     from 0 again: the step daemon clears it) all run on, never called hung;
#  3. hangs with no progress between them: with max_hang_restarts=1 the
#     second hang at the same step ends in give_up.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

[[ -x /usr/bin/torchrun ]] || fail "no /usr/bin/torchrun: install python3-torch (scripts/bootstrap does)"

cluster_up --nodes 4
CONTROLLER_CONF=$'end_window=1\nmax_hang_restarts=1\nhang_signal_grace=5' controller_up
cd "$WORK" || exit
mkdir tmp
agents_up node1 node2 node3 node4
wait_until 20 "heartbeats from all four nodes" heard 4
entry=$AR_SOURCE_DIR/examples/train_auto_resume.sh

job_state() { scontrol -o show job "$1" | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
ended() { [[ $(job_state "$1") =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL)$ ]]; }

# 1. The DDP training, rank 2 hung after step 12.
start=$SECONDS
job=$(TMPDIR=$WORK/tmp MASTER_PORT=$(free_port) sbatch --parsable -N3 --ntasks-per-node=1 \
  --exclusive -o ddp.out --wrap "srun --auto-resume=1 --auto-resume-hang-timeout=10 \
  --auto-resume-hang-signal=USR1 $entry --steps 30 --checkpoint-every 5 --step-seconds 0.3 \
  --checkpoint-dir $WORK/ckpt --hang-at-step 12 --hang-rank 2 --hang-once; echo srun exit \$?")
wait_until 300 "job $job (DDP, hung once) to end" ended "$job"
note "DDP on 3 nodes, hung once: $((SECONDS - start)) s"
[[ $(job_state "$job") == COMPLETED ]] || { cat ddp.out >&2; fail "job $job ended $(job_state "$job")"; }
[[ $(scontrol -o show job "$job") == *" Restarts=0 "* ]] || fail "job $job was requeued"
assert_contains ddp.out "rank 2 hangs at step 12" "the training's output"
assert_contains ddp.out "^training done at step 30$" "the training's output"
assert_contains ddp.out "^resumed from step 10$" "the training's output"
assert_contains ddp.out "most recent call first" "the stacks the hang signal printed"
assert_contains ddp.out "srun exit 0" "the batch script's output"
"$AR_CLI" events >events.out
assert_contains events.out "hung: rank 2 on node3 \(last beat [0-9]+ s ago, at step 11\) stopped beating first; 2 other ranks (beat since|stopped later), last [0-9]+ s ago, at step 12 \(hang timeout 10 s\)" "the hung event"
assert_contains events.out "hang_signal: SIGUSR1 sent to every task of step $job\.0" "the hang signal's event"
assert_contains events.out "checked: quick checks after the step hung: passed on node\[1-3\]" "the nodes' quick checks after the hang"
assert_contains events.out "relaunching run $job\.0-[0-9a-f]+ as attempt 1 on node\[1-3\]; the step hung" "the relaunch"
assert_not_contains events.out "marked|set FAIL" "the events (no healthy node is taken for a hang)"

# 2. Never a false positive (timeout 6 s), three jobs side by side: beats 4 s
# apart; a section of 30 s announced, then 12 s without a beat; no beat at
# all for 12 s.
cat >slow.sh <<'SCRIPT'
#!/bin/bash
[[ -n $AUTO_RESUME_PROGRESS ]] || { echo "no AUTO_RESUME_PROGRESS"; exit 3; }
for step in 1 2 3 4 5; do echo "$step" >"$AUTO_RESUME_PROGRESS"; sleep 4; done
echo "slow done"
SCRIPT
cat >section.sh <<'SCRIPT'
#!/bin/bash
echo 1 >"$AUTO_RESUME_PROGRESS"; sleep 1
echo "1 checkpoint:30" >"$AUTO_RESUME_PROGRESS"; sleep 12
echo 2 >"$AUTO_RESUME_PROGRESS"; sleep 1
echo "section done"
SCRIPT
cat >silent.sh <<'SCRIPT'
#!/bin/bash
sleep 12
echo "silent done"
SCRIPT
cat >stale.sh <<'SCRIPT'
#!/bin/bash
[[ -e $(dirname "$AUTO_RESUME_PROGRESS")/7 ]] && echo "stale file kept" || echo "stale file gone"
for step in 1 2 3; do echo "$step" >"$AUTO_RESUME_PROGRESS"; sleep 1; done
echo "stale done"
SCRIPT
chmod +x slow.sh section.sh silent.sh stale.sh
declare -A quiet_job
for kind in slow section silent; do
  quiet_job[$kind]=$(sbatch --parsable -N1 -o "$kind.out" --wrap \
    "srun --auto-resume=1 --auto-resume-hang-timeout=6 $WORK/$kind.sh; echo srun exit \$?")
done
# The stale job's srun waits until its node holds an old folder of step
# JOB.0, its rank 7 beaten 10 minutes ago.
quiet_job[stale]=$(sbatch --parsable -N1 -o stale.out --wrap \
  "while [ ! -e $WORK/planted ]; do sleep 0.2; done
  srun --auto-resume=1 --auto-resume-hang-timeout=6 $WORK/stale.sh; echo srun exit \$?")
stale_running() { [[ $(job_state "${quiet_job[stale]}") == RUNNING ]]; }
wait_until 60 "the stale job to start" stale_running
stale_node=$(squeue -h -j "${quiet_job[stale]}" -o %N)
[[ -d $CLUSTER/progress/$stale_node ]] || mkdir -m 0755 "$CLUSTER/progress/$stale_node"
mkdir -m 0700 "$CLUSTER/progress/$stale_node/${quiet_job[stale]}.0"
echo 999 >"$CLUSTER/progress/$stale_node/${quiet_job[stale]}.0/7"
touch -d '10 minutes ago' "$CLUSTER/progress/$stale_node/${quiet_job[stale]}.0/7"
touch "$WORK/planted"
for kind in slow section silent stale; do
  wait_until 90 "the $kind job to end" ended "${quiet_job[$kind]}"
  assert_contains "$kind.out" "^$kind done$" "the $kind job's output"
  assert_contains "$kind.out" "^srun exit 0$" "the $kind job's output"
done
assert_contains stale.out "^stale file gone$" "the stale job's output"
"$AR_CLI" events >events.out
for kind in slow section silent stale; do
  assert_not_contains events.out "job ${quiet_job[$kind]} [^ ]+ (hung|hang_signal|relaunch):" "the events of the $kind job"
done
# The step daemons removed their steps' progress folders.
assert_eq "$(find "$CLUSTER/progress" -mindepth 2 | wc -l)" 0 "progress folders left"

# 3. A step that hangs at the same step every time: relaunched once, then
# (max_hang_restarts=1) given up.
cat >stuck.sh <<'SCRIPT'
#!/bin/bash
for step in 1 2 3 4 5; do echo "$step" >"$AUTO_RESUME_PROGRESS"; sleep 0.2; done
echo "attempt ${AUTO_RESUME_ATTEMPT} stuck at step 5"
sleep 600
SCRIPT
chmod +x stuck.sh
stuck=$(sbatch --parsable -N2 -o stuck.out --wrap \
  "srun --auto-resume=1 --auto-resume-hang-timeout=4 $WORK/stuck.sh; echo srun exit \$?")
wait_until 120 "the stuck job to end" ended "$stuck"
assert_contains stuck.out "attempt 0 stuck at step 5" "the stuck job's output"
assert_contains stuck.out "attempt 1 stuck at step 5" "the stuck job's output"
assert_contains stuck.out "^srun exit 75$" "the stuck job's output (give_up)"
"$AR_CLI" events >events.out
assert_contains events.out "give_up: run $stuck\.0-[0-9a-f]+ hung 2 times in a row with no new highest step between the hangs \(max_hang_restarts=1\); step $stuck\.1 was cancelled" "the give_up"
