#!/usr/bin/env bash
# auto-resume-healthcheck as slurmd's HealthCheckProgram, the way the README
# ("Health checks") tells admins to install it, on nodes with 2 GPUs (GRES
# gpu:2) whose nvidia-smi is a stub printing the unit tests' fixtures.
# The test never runs the program itself: slurmd does, every 2 s.
# Shows: slurmd runs it on every node (it is the program's parent) and a
# healthy node passes and stays idle; a GPU lost on node3 (the stub prints
# lost-gpu.xml) makes slurmd's next run mark node3 FAIL with the reason
# "Action:Replace gpu: ..."; the controller sees the mark and has node3
# replaced (the local provider: a new GPU, then a reboot); the new instance
# passes slurmd's checks and stays idle.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"
: "${AR_HEALTHCHECK:?set AR_HEALTHCHECK to the built auto-resume-healthcheck}"

fixtures=$AR_SOURCE_DIR/test/unit/fixtures/nvidia-smi
# The nvidia-smi stub: node N's GPUs are healthy unless $WORK/gpu-lost-N
# exists. slurmd gives its HealthCheckProgram SLURMD_NODENAME, which tells
# the nodes of this one-machine cluster apart.
cat >"$WORK/nvidia-smi" <<STUB
#!/bin/sh
if [ -e $(printf %q "$WORK")/gpu-lost-\$SLURMD_NODENAME ]; then
  exec cat $(printf %q "$fixtures/lost-gpu.xml")
fi
exec cat $(printf %q "$fixtures/healthy-2.xml")
STUB
# What /etc/auto-resume/healthcheck.conf says on a GPU node; the number of
# GPUs comes from the node's GRES, as slurmctld has it.
cat >"$WORK/healthcheck.conf" <<CONF
checks = gpu
nvidia_smi = $WORK/nvidia-smi
timeout = 10
CONF
# slurmd runs its HealthCheckProgram without arguments and with nothing in
# its environment but SLURMD_NODENAME: no PATH, no SLURM_CONF. Installed on
# a real node, the program is named in slurm.conf as it is: libslurm reads
# /etc/slurm/slurm.conf and the program /etc/auto-resume/healthcheck.conf.
# This cluster's files live under $WORK, so this wrapper names those two
# and adds nothing else. It records each run for the test: the parent's PID
# (slurmd's, as it execs the wrapper), the exit status and the output; and
# once the test ends (checks-off), it runs nothing.
cat >"$WORK/healthcheck" <<WRAPPER
#!/bin/sh
[ -e $(printf %q "$WORK")/checks-off ] && exit 0
SLURM_CONF=$(printf %q "$CLUSTER/etc/slurm.conf")
export SLURM_CONF
out=\$($(printf %q "$AR_HEALTHCHECK") --config $(printf %q "$WORK/healthcheck.conf") 2>&1)
rc=\$?
printf 'run parent=%s rc=%s\n%s\n' "\$PPID" "\$rc" "\$out" >>$(printf %q "$WORK")/runs-\$SLURMD_NODENAME.log
exit \$rc
WRAPPER
# The local provider's replacement of a node: a new GPU (the stub's fault
# cleared), then a reboot. It first waits for the test to have looked at
# the marked node (at most 60 s), so that the FAIL state is not gone before
# the test sees it.
cat >"$WORK/replace.sh" <<PROVIDER
#!/bin/bash
node=\$1
touch $(printf %q "$WORK")/replace-asked-\$node
for _ in \$(seq 300); do
  [[ -e $(printf %q "$WORK")/replace-go-\$node ]] && break
  sleep 0.2
done
rm -f $(printf %q "$WORK")/gpu-lost-\$node
exec $(printf %q "$CLUSTER_CMD") restart-node $(printf %q "$CLUSTER") "\$node" --kill
PROVIDER
chmod +x "$WORK/nvidia-smi" "$WORK/healthcheck" "$WORK/replace.sh"

# README's slurm.conf lines, with a short interval.
cluster_up --nodes 3 --gpus 2 --conf-line "HealthCheckProgram=$WORK/healthcheck" \
  --conf-line 'HealthCheckInterval=2' --conf-line 'HealthCheckNodeState=ANY,CYCLE'
# When the test ends: slurmd's runs from then on do nothing, and the cluster
# goes down once the run under way has ended (at most 30 s), so that no run
# outlives its slurmd, asking a stopped slurmctld.
checks_off() {
  touch "$WORK/checks-off"
  local i
  for ((i = 0; i < 150; i++)); do
    pgrep -xf "/bin/sh $WORK/healthcheck" >/dev/null || return 0
    sleep 0.2
  done
}
on_exit checks_off
CONTROLLER_RESTART_COMMAND="$WORK/replace.sh {node}" controller_up
cd "$WORK" || exit

# slurmd_pid NODE: the PID of NODE's slurmd now.
slurmd_pid() { cat "$CLUSTER/run/slurmd-$1.pid"; }
# runs NODE RC: how many runs of NODE's slurmd (its PID now) exited RC (0
# while it has no PID file or no run yet).
runs() {
  local parent count
  parent=$(slurmd_pid "$1" 2>/dev/null) || { echo 0; return; }
  count=$(grep -cxF "run parent=$parent rc=$2" "runs-$1.log" 2>/dev/null) || true
  echo "${count:-0}"
}
runs_at_least() { (($(runs "$1" "$2") >= $3)); }  # NODE RC N
# reason NODE: the node's reason, without Slurm's "[user@time]".
reason() { scontrol show node "$1" | sed -n 's/^ *Reason=\(.*\) \[.*\]$/\1/p'; }
replaced() { event_seen "node $1 replaced: $1 is back in service: a new instance"; }

# Healthy GPUs: slurmd runs the program on every node, again and again (not
# just when it starts), and each run passes.
for node in node1 node2 node3; do
  wait_until 30 "3 passing runs by $node's slurmd" runs_at_least "$node" 0 3
  assert_eq "$(runs "$node" 1)$(runs "$node" 2)" 00 "$node's failed runs"
  node_is "$node" idle || fail "$node is $(node_state "$node") after healthy runs"
done
assert_contains runs-node1.log "^gpu: pass: 2 GPUs healthy \(NVIDIA H100 80GB HBM3, driver 535\.183\.01\)$" \
  "node1's runs"
assert_not_contains runs-node1.log "mark" "node1's runs"

# node3 loses a GPU: slurmd's next run marks it FAIL for replacement.
passed1=$(runs node1 0) passed2=$(runs node2 0) before=$(slurmd_started node3)
touch gpu-lost-node3
wait_until 20 "a failed run by node3's slurmd" runs_at_least node3 1 1
lost_reason="Action:Replace gpu: GPU 00000000:2A:00.0 is not readable (fallen off the bus?)"
grep -qxF "gpu: marked node3 FAIL: $lost_reason" runs-node3.log ||
  { cat runs-node3.log >&2; fail "slurmd's run did not say it marked node3"; }
wait_until 10 "node3 to be FAIL" node_is node3 fail
assert_eq "$(reason node3)" "$lost_reason" "node3's reason"
scontrol -o show node node3 | grep -q " State=[A-Z+]*FAIL " || fail "node3: $(scontrol -o show node node3)"
# The controller takes it from there: node3 is to be replaced.
wait_until 20 "the controller to ask for node3's replacement" test -e replace-asked-node3
event_seen "node node3 replace_requested: node3 is FAIL \(Action:Replace gpu: GPU 00000000:2A:00\.0 is not readable" ||
  { "$AR_CLI" events >&2; fail "no replace_requested event for node3 naming the health check"; }

# Meanwhile the healthy nodes were checked again and left alone.
wait_until 20 "2 more passing runs on node1" runs_at_least node1 0 $((passed1 + 2))
wait_until 20 "2 more passing runs on node2" runs_at_least node2 0 $((passed2 + 2))
for node in node1 node2; do
  assert_eq "$(runs "$node" 1)$(runs "$node" 2)" 00 "$node's failed runs"
  node_is "$node" idle || fail "$node is $(node_state "$node") while node3 is FAIL"
done

# The replacement (a new GPU, a reboot): slurmd's checks pass on the new
# instance, which comes back idle and stays so.
touch replace-go-node3
wait_until 60 "node3 replaced" replaced node3
wait_until 20 "node3 idle" node_is node3 idle
[[ $(slurmd_started node3) != "$before" ]] || fail "node3 was not replaced: same slurmd start time"
wait_until 20 "3 passing runs by node3's new slurmd" runs_at_least node3 0 3
assert_eq "$(runs node3 1)$(runs node3 2)" 00 "failed runs by node3's new slurmd"
for node in node1 node2 node3; do
  node_is "$node" idle || fail "$node is $(node_state "$node") at the end"
done
grep -q "health_check failed: rc:1 " "$CLUSTER/log/slurmd-node3.log" ||
  fail "node3's slurmd log does not show the failed health check"
note "ok"
