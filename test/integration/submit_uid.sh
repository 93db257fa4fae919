#!/usr/bin/env bash
# The expand helper reaches slurmctld as the job's owner, not as root: an
# unprivileged user's (nobody's) protected step loses a node, and the
# controller grows the job by a replacement through auto-resume-submit, run
# as that user. slurmctld's job_submit/logging plugin logs each submission
# with its submitter: the helper's shows the user's uid. The step is
# relaunched on the grown job and completes.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"
share_with_users  # nobody's job, and the submit helper run as nobody

cluster_up --nodes 3 --conf-line JobSubmitPlugins=logging
CONTROLLER_CONF=$'end_window=1\nbackoff=1' controller_up
cd "$WORK" || exit

user_uid=$(id -u nobody)
user_gid=$(id -g nobody)
mkdir user
chown nobody: user
as_user() { (cd "$WORK/user" && setpriv --reuid=nobody --regid="$user_gid" --clear-groups "$@"); }

# hold.sh: each task adds a line to started, then waits for finish.
cat >hold.sh <<'SCRIPT'
#!/bin/bash
echo "attempt=${AUTO_RESUME_ATTEMPT:-none} rank=$SLURM_PROCID node=$SLURMD_NODENAME" >>started
for ((i = 0; i < 1200; i++)); do
  [[ -f finish ]] && exit 0
  sleep 0.2
done
exit 1
SCRIPT
chmod 755 hold.sh
started() { [[ $(grep -c "^attempt=$1 " user/started 2>/dev/null) == "$2" ]]; }

job=$(as_user sbatch --parsable -N2 -w node1,node2 -o job.out \
  --wrap "srun --auto-resume=1 $WORK/hold.sh; echo \"srun exit \$?\"")
wait_until 30 "the protected step on node1 and node2" started 0 2
"$CLUSTER_CMD" kill-node "$CLUSTER" node2 >/dev/null
wait_until 90 "the step relaunched as attempt 1 on 2 nodes" started 1 2
as_user touch finish
wait_until 30 "job $job to end" job_ended

cat user/job.out user/started
assert_eq "$(job_field JobState)" COMPLETED "the user's job"
assert_contains user/job.out "relaunching step $job\.0 of run $job\.0-[0-9a-f]{8} as attempt 1 on " "srun's stderr"
assert_contains user/job.out "^srun exit 0$" "the batch script's output"
assert_contains user/started "^attempt=1 rank=[01] node=node3$" "the relaunched step's tasks"

"$AR_CLI" events >events.txt
assert_contains events.txt "job $job [^ ]+ expand_helper: helper job [0-9]+ allocates node3 for job $job$" \
  "the controller's events"
helper=$(grep -oE "expand_helper: helper job [0-9]+ " events.txt | grep -oE '[0-9]+' | head -n 1)
# job_submit/logging: "Job submit request: ... dependency:D name:N ...
# submit_uid:U time_limit:T user_id:U".
grep -E "Job submit request: .*dependency:expand:$job name:auto-resume-expand-$job " \
  "$CLUSTER/log/slurmctld.log" >submissions.txt ||
  fail "slurmctld logged no submission of the helper: $(grep 'Job submit request' "$CLUSTER/log/slurmctld.log")"
assert_eq "$(wc -l <submissions.txt)" 1 "helper submissions logged (helper job $helper)"
assert_contains submissions.txt " submit_uid:$user_uid time_limit:[0-9]+ user_id:$user_uid( |$)" \
  "the helper's submission, as the job_submit plugin saw it"
note "helper job $helper submitted as uid $user_uid, not root"
