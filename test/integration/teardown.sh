#!/usr/bin/env bash
# Two clusters run side by side; `down` stops only its own cluster's processes,
# tasks included, and is idempotent.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

other=$WORK/o
# shellcheck disable=SC2016 # expanded when the test ends
on_exit '"$CLUSTER_CMD" down "$other" >/dev/null 2>&1'

cluster_up --nodes 2
cluster_up_at "$other" --nodes 2
other_conf=$other/etc/slurm.conf
SLURM_CONF=$other_conf srun -N2 true || fail "a step on the second cluster failed"

# Leave tasks running on both clusters.
cd "$WORK" || exit
# The test's own clients: srun may keep trying a controller that is gone.
srun_pids=()
# shellcheck disable=SC2016 # expanded when the test ends
on_exit 'kill -9 "${srun_pids[@]}" 2>/dev/null'
srun -N2 sleep 600 >/dev/null 2>&1 &
srun_pids+=($!)
SLURM_CONF=$other_conf srun -N2 sleep 600 >/dev/null 2>&1 &
srun_pids+=($!)
wait_until 20 "tasks on the first cluster" tasks_are 2 '(/usr/bin/)?sleep 600'
SLURM_CONF=$other_conf wait_until 20 "tasks on the second cluster" tasks_are 2 '(/usr/bin/)?sleep 600'
[[ -n $(live_pids "$CLUSTER") ]] || fail "found no process of the first cluster"
other_before=$(live_pids "$other" | sort)

"$CLUSTER_CMD" down "$CLUSTER"
left=$(live_pids "$CLUSTER")
[[ -z $left ]] || fail "processes left after down: $(ps -o pid,args -p "${left//$'\n'/,}")"
assert_eq "$(live_pids "$other" | sort)" "$other_before" "the second cluster's processes after the first's down"
SLURM_CONF=$other_conf srun -N2 true || fail "the second cluster stopped working after the first's down"
"$CLUSTER_CMD" down "$CLUSTER" || fail "a second down failed"

"$CLUSTER_CMD" down "$other"
[[ -z $(live_pids "$other") ]] || fail "processes of the second cluster left after its down"
mkdir "$WORK/never-started"
"$CLUSTER_CMD" down "$WORK/never-started" || fail "down of a never started cluster failed"
kill -9 "${srun_pids[@]}" 2>/dev/null || true
wait "${srun_pids[@]}" 2>/dev/null || true
note "ok"
