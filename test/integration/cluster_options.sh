#!/usr/bin/env bash
# scripts/cluster up's options, composed on one cluster: --accounting (slurmdbd
# with its own MariaDB: sacct, and a job resized twice, which fails without
# slurmdbd, shown on a second, plain cluster), --gpus (fake GPUs as GRES),
# --cred-expire; down stops slurmdbd and MariaDB too; bad values are refused.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$WORK" || exit

# Bad values exit 2 naming the value, before anything is created.
for bad in "--gpus 9" "--gpus x" "--gpus -1" "--cred-expire 0" "--cred-expire 4" "--cred-expire abc" \
  "--plugin-line maybe"; do
  read -r opt value <<<"$bad"
  rc=0
  "$CLUSTER_CMD" up "$WORK/bad" --no-plugin "$opt" "$value" >out.txt 2>&1 || rc=$?
  assert_eq "$rc" 2 "exit status of up $bad"
  assert_contains out.txt "$opt .*'$value'" "up $bad"
done
rc=0
"$CLUSTER_CMD" up "$WORK/bad" --no-plugin --cred-expire 10 --conf-line 'authinfo=socket=/x' >out.txt 2>&1 || rc=$?
assert_eq "$rc" 2 "exit status of up --cred-expire with an AuthInfo --conf-line"
assert_contains out.txt "'authinfo=socket=/x' sets AuthInfo, which --cred-expire writes" "up --cred-expire --conf-line AuthInfo"
[[ ! -e $WORK/bad ]] || fail "a refused up created $WORK/bad"

# alloc SALLOC_ARGS...: a job allocation without a shell (salloc is granted at
# once where sbatch waits for the scheduler's next pass); prints its id.
alloc() {
  timeout 30 salloc --no-shell "$@" >salloc.out 2>&1 || fail "salloc $* failed: $(cat salloc.out)"
  sed -n 's/.*Granted job allocation \([0-9]*\).*/\1/p' salloc.out | grep . ||
    fail "no job id in salloc's output: $(cat salloc.out)"
}
job_nodes() { squeue -h -j "$1" -o %N; }
job_nodes_are() { [[ $(squeue -h -j "$1" -o %D) == "$2" ]]; }

# resize_twice SECONDS: shrink a 2-node job J to 1 node (the first update),
# then grow it back onto the freed node through a helper allocation that
# depends on it (the second update: scontrol update jobid=J NumNodes=ALL, tried
# for SECONDS, its last output in resize.out). Succeeds if that second update does.
resize_twice() {
  local job nodes freed helper deadline
  job=$(alloc -N2)
  nodes=$(job_nodes "$job")
  scontrol update jobid="$job" NumNodes=1 >resize.out 2>&1 || fail "the first resize failed: $(cat resize.out)"
  wait_until 10 "job $job on one node" job_nodes_are "$job" 1
  freed=$(scontrol show hostnames "$nodes" | grep -vxF "$(job_nodes "$job")")
  helper=$(alloc -N1 -w "$freed" --dependency="expand:$job")
  scontrol update jobid="$helper" NumNodes=0 >helper.out 2>&1 ||
    fail "giving away the helper's node failed: $(cat helper.out)"
  # slurmdbd sets the resized job's new DB index asynchronously: retry a little.
  deadline=$((SECONDS + $1))
  until scontrol update jobid="$job" NumNodes=ALL >resize.out 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
  wait_until 10 "job $job back on two nodes" job_nodes_are "$job" 2
  assert_eq "$(job_nodes "$job")" "$nodes" "nodes of job $job after the second resize"
  scancel "$job" "$helper"
}

# Control: without accounting, the second update after a resize is refused.
plain=$WORK/p
# shellcheck disable=SC2016 # expanded when the test ends
on_exit '"$CLUSTER_CMD" down "$plain" >/dev/null 2>&1'
cluster_up_at "$plain" --nodes 2 >/dev/null
if SLURM_CONF=$plain/etc/slurm.conf resize_twice 2; then
  fail "a second resize worked without accounting: the control shows nothing"
fi
assert_contains resize.out "the DB index is being set" "the second resize without accounting"
# Such a cluster has no slurmdbd to stop or start.
for cmd in stop-slurmdbd start-slurmdbd; do
  rc=0
  "$CLUSTER_CMD" "$cmd" "$plain" >out.txt 2>&1 || rc=$?
  assert_eq "$rc" 1 "$cmd on a cluster without --accounting"
  assert_contains out.txt "the cluster in '$plain' was started without --accounting: it has no slurmdbd" "$cmd's error"
done
"$CLUSTER_CMD" down "$plain" >/dev/null

start=$SECONDS
cluster_up --nodes 2 --accounting --gpus 2 --cred-expire 10 >up.out
note "up with --accounting --gpus 2 --cred-expire 10 took $((SECONDS - start))s"

# --accounting: a finished job shows in sacct; a job can be resized twice.
job=$(srun -N1 printenv SLURM_JOB_ID) || fail "a plain srun failed"
sacct_completed() { [[ $(sacct -X -n -j "$job" -o JobID,State | awk '{ print $1, $2 }') == "$job COMPLETED" ]]; }
wait_until 20 "job $job COMPLETED in sacct" sacct_completed
resize_twice 10 || fail "the second resize failed with accounting: $(cat resize.out)"

# --gpus 2: every node has two GPUs; a step gets the ones it asks for.
scontrol show node node1 >node.txt
assert_contains node.txt '^ *Gres=gpu:2$' "scontrol show node node1"
assert_eq "$(srun -N1 --gres=gpu:1 printenv CUDA_VISIBLE_DEVICES)" 0 "CUDA_VISIBLE_DEVICES of a --gres=gpu:1 step"
assert_eq "$(srun -N2 --gres=gpu:2 printenv CUDA_VISIBLE_DEVICES | tr '\n' ' ')" "0,1 0,1 " \
  "CUDA_VISIBLE_DEVICES of a 2-node --gres=gpu:2 step"
if srun -N1 --gres=gpu:3 true >gpu3.out 2>&1; then fail "a --gres=gpu:3 step ran on 2-GPU nodes"; fi

# --cred-expire 10.
scontrol show config | grep -i '^AuthInfo' >authinfo.txt
assert_contains authinfo.txt "^AuthInfo += socket=$CLUSTER/munge/munge.sock,cred_expire=10$" "AuthInfo"

# down stops slurmdbd and MariaDB with the rest.
daemons=$(ps -o comm= -p "$(live_pids "$CLUSTER" | paste -sd,)" | sort -u | tr '\n' ' ')
[[ $daemons == *mariadbd* && $daemons == *slurmdbd* ]] || fail "no mariadbd or slurmdbd among the cluster's processes: $daemons"
"$CLUSTER_CMD" down "$CLUSTER" >/dev/null
left=$(live_pids "$CLUSTER")
[[ -z $left ]] || fail "processes left after down: $(ps -o pid,args -p "${left//$'\n'/,}")"
note "ok"
