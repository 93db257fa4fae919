#!/usr/bin/env bash
# Where Slurm cannot repair a job in place, auto-resume requeues it: the
# batch host itself killed (the batch script dies with it), and a job holding
# GRES (Slurm refuses to give it nodes) with no spare node left
# (test/integration/gres_spares.sh has the jobs that have one). Both restart from their batch
# script and complete from their checkpoint, SLURM_RESTART_COUNT=1. A GRES
# job submitted with --no-requeue is not requeued: its step ends and srun
# exits 75 (give_up) with a clear message, and the batch script goes on; the
# same when too little of the job's time limit is left for a relaunch.
# Each requeue and give_up runs notify_command (as Slurm runs MailProg).
# cred_expire 5 and a scheduler pass every second keep the requeued job's
# hold short (Slurm's default would hold it 121 s).
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

cluster_up --nodes 5 --gpus 1 --cred-expire 5 \
  --conf-line 'SchedulerParameters=permit_job_expansion,sched_interval=1'
cat >"$WORK/notify" <<SCRIPT
#!/bin/sh
{ echo "\$*|\$AUTO_RESUME_EVENT|\$AUTO_RESUME_JOB_ID|\$AUTO_RESUME_USER"; cat; } >>$WORK/notified
SCRIPT
chmod +x "$WORK/notify"
CONTROLLER_CONF="end_window=1
notify_command=$WORK/notify" controller_up
cd "$WORK" || exit
make_training_step
# kill_worker: kill a node of $job other than its batch host.
kill_worker() {
  local victim
  victim=$(scontrol show hostnames "$(job_field NodeList)" | grep -vx "$(job_field BatchHost)" | head -n 1)
  "$CLUSTER_CMD" kill-node "$CLUSTER" "$victim" >/dev/null
}
# give_up_case OUT SBATCH_ARGS...: a job of gres.sh that loses a worker node
# after step 3, and whose batch script goes on after srun's give_up.
# The step is held past its last step (ckpt.hold) until srun is done, so
# that it still runs when the kill is seen on a loaded machine.
give_up_case() {
  local out=$1
  shift
  rm -f ckpt
  touch ckpt.hold
  job=$(sbatch --parsable -N2 -o "$out" "$@" gres.sh)
  wait_until 60 "job $job to reach step 3" past 3
  kill_worker
  wait_until 120 "the batch script to go on after srun" grep -q "^srun exit" "$out"
  rm ckpt.hold
  cat "$out"
  assert_contains "$out" "^srun exit 75$" "srun's exit status after give_up"
}

# 1. The batch host dies: requeued.
cat >host.sh <<SCRIPT
#!/bin/bash
echo "batch script on \$SLURMD_NODENAME, restart \${SLURM_RESTART_COUNT:-0}"
srun --auto-resume=1 -l $WORK/step.sh $WORK/ckpt 40
echo "srun exit \$?"
SCRIPT
job=$(sbatch --parsable -N3 --open-mode=append -o host.out host.sh)
wait_until 60 "the first run to reach step 5" past 5
batch_host=$(job_field BatchHost)
"$CLUSTER_CMD" kill-node "$CLUSTER" "$batch_host" >/dev/null
wait_until 180 "the requeued job to end" job_ended
cat host.out
assert_eq "$(job_field JobState)" COMPLETED "the requeued job's state"
assert_eq "$(job_field Restarts)" 1 "the job's restart count"
assert_contains host.out "^batch script on node[0-9], restart 1$" "the second run's batch script"
assert_contains host.out "^0: attempt=0 restarts=1 .* start=([5-9]|[1-9][0-9]+)$" "the second run resuming from the checkpoint"
assert_contains host.out "^0: done at step 40$" "the second run"
"$AR_CLI" events >events.txt
assert_contains events.txt "job $job [^ ]+ requeued: the batch host $batch_host failed: job $job was requeued" "the controller's events"
scontrol show job "$job" >job.txt
assert_contains job.txt "^ *AdminComment=\[auto-resume\] attempt 0: [a-z0-9,]*${batch_host}[a-z0-9,]* failed, requeued: the batch host $batch_host failed" "the requeued job's AdminComment"

# 2. A GRES job loses a node other than its batch host: requeued.
rm -f ckpt
cat >gres.sh <<SCRIPT
#!/bin/bash
srun --auto-resume=1 -l $WORK/step.sh $WORK/ckpt 40
echo "srun exit \$?"
SCRIPT
job=$(sbatch --parsable -N2 --gres=gpu:1 --open-mode=append -o gres.out gres.sh)
wait_until 60 "the GRES job to reach step 5" past 5
kill_worker
wait_until 180 "the requeued GRES job to end" job_ended
cat gres.out
assert_eq "$(job_field JobState)" COMPLETED "the GRES job's state"
assert_eq "$(job_field Restarts)" 1 "the GRES job's restart count"
assert_contains gres.out "^0: attempt=0 restarts=1 .* start=([5-9]|[1-9][0-9]+)$" "the GRES job's second run"
"$AR_CLI" events >events.txt
assert_contains events.txt "job $job [^ ]+ requeued: job $job holds GRES, which Slurm cannot move to other nodes, and has no spare node left \(its 2-node step, 1 healthy node in the job\): job $job was requeued" "the controller's events"

# 3. The same with --no-requeue: not requeued, and srun says why.
give_up_case norequeue.out --gres=gpu:1 --no-requeue
assert_contains norequeue.out "auto_resume: step $job\.0 \(run $job\.0-[0-9a-f]{8}, attempt 0\): give_up: job $job holds GRES, which Slurm cannot move to other nodes, and has no spare node left \(its 2-node step, 1 healthy node in the job\); the job was submitted with --no-requeue" "srun's message"
assert_eq "$(job_field Restarts)" 0 "the --no-requeue job's restart count"

# 4. Too little of the time limit left for a relaunch (min_time_left's
# default is 120 s, the job has 60): give_up, and the node still leaves.
give_up_case short.out --time=1
assert_contains short.out "give_up: only [0-9]+ s of job $job's time limit are left \(min_time_left=120 s\); the failed node left the job" "srun's message"
assert_eq "$(job_field NodeList)" "$(job_field BatchHost)" "the short job's nodes after give_up"

# notify_command heard of each: two requeues, then two give_ups, in order.
all_notified() { [[ $(grep -c '^-s ' notified 2>/dev/null) == 4 ]]; }
wait_until 30 "four notifications" all_notified
cat notified
assert_eq "$(grep '^-s ' notified | cut -d'|' -f2 | paste -sd,)" requeued,requeued,give_up,give_up "the notified events"
assert_contains notified "^-s auto-resume: job $job give_up \(run $job\.0-[0-9a-f]{8}\) root\|give_up\|$job\|root$" "the last notification"
assert_contains notified "^only [0-9]+ s of job $job's time limit are left" "the last notification's text (its stdin)"
note "ok"
