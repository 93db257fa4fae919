#!/usr/bin/env bash
# scripts/cluster up's options, composed on one cluster: --accounting (slurmdbd
# with its own MariaDB: sacct, and a job resized twice, which fails without
# slurmdbd, shown on a second, plain cluster), --gpus (fake GPUs as GRES),
# --cred-expire, --controller and --agents (auto-resumed on a port of its own
# named by the plugin line, `env`'s AUTO_RESUME_* exports enough for the CLI,
# an agent per node that kill-node takes down and the controller's
# replacement of the node starts again); down stops slurmdbd, MariaDB, the
# controller and the agents too; bad values are refused.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$WORK" || exit

# Help: the overview lists the commands and says where their options are;
# each command's -h and --help print its own usage and exit 0.
"$CLUSTER_CMD" --help >help.txt || fail "cluster --help failed: $(cat help.txt)"
assert_contains help.txt "cluster COMMAND --help" "cluster --help"
mapfile -t commands < <(sed -n '/^Commands:$/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p' help.txt)
((${#commands[@]} > 0)) || fail "no commands in cluster --help: $(cat help.txt)"
# Every command with a help in scripts/cluster.d/ is in the overview.
mapfile -t helps < <(sed -n 's/^help_\([a-z_]*\)() {$/\1/p' "$AR_SOURCE_DIR"/scripts/cluster.d/*.sh | tr _ - | sort)
assert_eq "${helps[*]}" "$(printf '%s\n' "${commands[@]}" | sort | paste -sd' ')" \
  "the commands of cluster --help against the help_COMMAND functions"
for cmd in "${commands[@]}"; do
  for flag in --help -h; do
    rc=0
    "$CLUSTER_CMD" "$cmd" "$flag" >help.txt 2>&1 || rc=$?
    assert_eq "$rc" 0 "exit status of cluster $cmd $flag"
    assert_contains help.txt "^Usage: cluster $cmd( |$)" "cluster $cmd $flag"
  done
done
# Where an option may stand, after the arguments too; not as an option's value.
"$CLUSTER_CMD" restart-node "$WORK/none" node1 --kill --help >help.txt || fail "restart-node ... --help failed"
assert_contains help.txt "^Usage: cluster restart-node " "cluster restart-node DIR NODE --kill --help"
rc=0
"$CLUSTER_CMD" up "$WORK/bad" --no-plugin --conf-line --help --gpus 9 >out.txt 2>&1 || rc=$?
assert_eq "$rc" 2 "exit status of up --conf-line --help --gpus 9"
assert_contains out.txt "--gpus .*'9'" "up --conf-line --help --gpus 9"
rc=0
"$CLUSTER_CMD" no-such-command --help >out.txt 2>&1 || rc=$?
assert_eq "$rc" 2 "exit status of cluster no-such-command --help"
assert_contains out.txt "unknown command 'no-such-command'" "cluster no-such-command --help"

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
# The controller's options: --agents and --controller-conf need --controller,
# which writes the plugin line's controller= and munge_socket=.
refused() {  # EXPECTED-MESSAGE UP-OPTIONS...
  local want=$1 rc=0
  shift
  "$CLUSTER_CMD" up "$WORK/bad" --plugin "$AR_PLUGIN" "$@" >out.txt 2>&1 || rc=$?
  assert_eq "$rc" 2 "exit status of up $*"
  assert_contains out.txt "$want" "up $*"
}
refused "^cluster: --agents needs --controller$" --agents
refused "^cluster: --controller-conf needs --controller$" --controller-conf end_window=1
refused "'controller=127.0.0.1:1' sets controller, which --controller writes" \
  --controller --plugstack-arg controller=127.0.0.1:1
refused "'munge_socket=/x' sets munge_socket, which --controller writes" \
  --controller --plugstack-arg munge_socket=/x
[[ ! -e $WORK/bad ]] || fail "a refused up created $WORK/bad"
# A config line the controller refuses fails up before any daemon starts,
# with the controller's own message.
rc=0
"$CLUSTER_CMD" up "$WORK/bad" --no-plugin --controller --controller-bin "$AR_DAEMON" --cli-bin "$AR_CLI" \
  --controller-conf 'no_such_key=1' >out.txt 2>&1 || rc=$?
assert_eq "$rc" 1 "exit status of up --controller-conf no_such_key=1"
assert_contains out.txt "auto-resumed refuses its config $WORK/bad/etc/auto-resumed.conf" "up --controller-conf no_such_key=1"
assert_contains out.txt "unknown key 'no_such_key'" "up --controller-conf no_such_key=1"
[[ -z $(live_pids "$WORK/bad") ]] || fail "a refused --controller-conf started processes: $(live_pids "$WORK/bad")"
rm -rf "$WORK/bad"

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
# up empties a reused folder's record of injected faults: the tests' fault
# counts would hold its old kills against this cluster's nodes.
mkdir -p "$plain"
echo "1 kill-node node1" >"$plain/faults.log"
cluster_up_at "$plain" --nodes 2 >/dev/null
[[ ! -s $plain/faults.log ]] || fail "up kept a reused folder's faults.log: $(cat "$plain/faults.log")"
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
cluster_up --nodes 2 --accounting --gpus 2 --cred-expire 10 --controller --agents \
  --controller-bin "$AR_DAEMON" --agent-bin "$AR_AGENT" --cli-bin "$AR_CLI" >up.out
note "up with --accounting --gpus 2 --cred-expire 10 --controller --agents took $((SECONDS - start))s"

# --controller: auto-resumed answers on its own port, which the plugin line
# names; `env` exports what the CLI needs.
port=$(sed -n 's/^listen=127\.0\.0\.1:\([0-9]*\)$/\1/p' "$CLUSTER/etc/auto-resumed.conf")
[[ -n $port ]] || fail "no listen=127.0.0.1:PORT in $CLUSTER/etc/auto-resumed.conf: $(cat "$CLUSTER/etc/auto-resumed.conf")"
assert_contains "$CLUSTER/etc/plugstack.conf" \
  "^required $AR_PLUGIN controller=127\.0\.0\.1:$port munge_socket=$CLUSTER/munge/munge\.sock progress_dir=$CLUSTER/progress$" "plugstack.conf"
unset AUTO_RESUME_CONTROLLER AUTO_RESUME_MUNGE_SOCKET
"$CLUSTER_CMD" env "$CLUSTER" >env.out
eval "$(cat env.out)"
assert_eq "${AUTO_RESUME_CONTROLLER:-}" "127.0.0.1:$port" "AUTO_RESUME_CONTROLLER after eval \"\$(cluster env)\""
assert_eq "${AUTO_RESUME_MUNGE_SOCKET:-}" "$CLUSTER/munge/munge.sock" \
  "AUTO_RESUME_MUNGE_SOCKET after eval \"\$(cluster env)\""
"$AR_CLI" status >status.out 2>&1 || fail "auto-resume status after eval \"\$(cluster env)\" failed: $(cat status.out)"
assert_contains status.out "^controller: mode act" "auto-resume status"
# A protected step registers with it through the plugin line (the task
# variables are set only for a registered step).
run_id=$(timeout 60 salloc -N1 srun --auto-resume=1 printenv AUTO_RESUME_RUN_ID 2>protected.err) ||
  fail "a protected srun in salloc failed: $(cat protected.err)"
[[ $run_id =~ ^[0-9]+\.0-. ]] || fail "a protected step got no run id from the controller: '$run_id'"
# --agents: the controller hears an agent per node (up waited for it).
wait_until 10 "fresh heartbeats from both nodes" heard 2
controller_pid=$(<"$CLUSTER/run/auto-resumed.pid")
# Its environment names the cluster for scripts/local-provider (continuous
# provisioning's local route, docs/provisioning.md).
tr '\0' '\n' <"/proc/$controller_pid/environ" >controller.env
assert_contains controller.env "^AR_LOCAL_CLUSTER=$CLUSTER$" "auto-resumed's environment"
agent1=$(<"$CLUSTER/run/auto-resume-agent-node1.pid")
agent2=$(<"$CLUSTER/run/auto-resume-agent-node2.pid")
# proc_id PID: PID and its start time. A PID freed by a process that ended
# may be another's a moment later on a busy machine (pid_max 32768; a CI
# run once found node2's killed agent's PID alive: another process's).
proc_id() { echo "$1:$(awk '{ print $22 }' "/proc/$1/stat" 2>/dev/null)"; }
# gone PID[:START]: that process is a zombie or gone (its PID free, or
# another process's).
gone() {
  local pid=${1%%:*} start='' stat
  [[ $1 != *:* ]] || start=${1#*:}
  stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 0
  read -r -a fields <<<"${stat##*) }"
  [[ ${fields[0]} == Z || (-n $start && ${fields[19]} != "$start") ]]
}
controller_id=$(proc_id "$controller_pid") agent1_id=$(proc_id "$agent1") agent2_id=$(proc_id "$agent2")
"$CLUSTER_CMD" status "$CLUSTER" >cluster-status.out
assert_contains cluster-status.out "^auto-resumed on 127\.0\.0\.1:$port: pid $controller_pid " "cluster status"
assert_contains cluster-status.out "^agents: node1 pid $agent1, node2 pid $agent2$" "cluster status"

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

# An agent goes down with its node (kill-node), and comes back with the
# node's replacement (the controller's restart-node --kill, a reboot).
"$CLUSTER_CMD" kill-node "$CLUSTER" node2 >/dev/null
# Recorded to the millisecond, for the fault counts.
assert_contains "$CLUSTER/faults.log" "^[0-9]{10}\.[0-9]{3} kill-node node2$" "kill-node's record"
gone "$agent2_id" || fail "kill-node node2 left its agent (pid $agent2) running"
gone "$agent1_id" && fail "kill-node node2 took node1's agent (pid $agent1) down"
wait_until 60 "node2 replaced by the controller" event_seen "node node2 replaced: node2 is back in service"
agent2_started() {
  local pid
  pid=$(<"$CLUSTER/run/auto-resume-agent-node2.pid")
  [[ $pid =~ ^[0-9]+$ && $pid != "$agent2" ]] && ! gone "$pid"
}
wait_until 10 "a new agent on node2" agent2_started
wait_until 20 "fresh heartbeats from both nodes after node2's replacement" heard 2
agent2=$(<"$CLUSTER/run/auto-resume-agent-node2.pid")
agent2_id=$(proc_id "$agent2")

# down stops slurmdbd, MariaDB, the controller and the agents with the rest.
daemons=$(ps -o comm= -p "$(live_pids "$CLUSTER" | paste -sd,)" | sort -u | tr '\n' ' ')
for daemon in mariadbd slurmdbd auto-resumed auto-resume-age; do
  [[ $daemons == *" $daemon "* || $daemons == "$daemon "* ]] || fail "no $daemon among the cluster's processes: $daemons"
done
"$CLUSTER_CMD" down "$CLUSTER" >/dev/null
for id in "$controller_id" "$agent1_id" "$agent2_id"; do
  gone "$id" || fail "down left pid ${id%%:*} running: $(ps -o pid,args -p "${id%%:*}")"
done
[[ -z $(ss -Hltn "sport = :$port") ]] || fail "something still listens on the controller's port $port after down"
left=$(live_pids "$CLUSTER")
[[ -z $left ]] || fail "processes left after down: $(ps -o pid,args -p "${left//$'\n'/,}")"
# The controller stopped cleanly (SIGTERM), its agents said goodbye first.
assert_contains "$CLUSTER/log/auto-resumed.log" "signal 15: stopping" "the controller's log"
assert_contains "$CLUSTER/log/agent-node1.log" "signal 15: stopped" "node1's agent's log"
assert_not_contains "$CLUSTER/log/agent-node1.log" "goodbye not taken" "node1's agent's log"
note "ok"
