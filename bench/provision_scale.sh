#!/usr/bin/env bash
# Continuous provisioning at scale (docs/provisioning.md) on a local cluster:
# one compute group g in merge mode (the controller's include file declares
# its max_count slots, the largest count; slurmctld restarts once, for the
# new group), through the local provider, whose creates take --boot-seconds
# (the instance's boot) before the slot's slurmd starts. Side by side for
# each N of --counts: `auto-resume group set g count=N` from 0 until N nodes
# are idle, against the least it can take, the boot time once per wave of
# max_parallel_creates (16) creates: the ratio, and the time to take the N
# away again (count=0, until every slot is hidden). Then, at the largest N:
#   - creates per instance with --fail-percent of creates failing (exit 75):
#     at most 1 plus the failures, or the benchmark fails;
#   - the time to converge after capacity returns: the provider has room
#     for three quarters of N (exit 69 beyond), and once those are idle it
#     has room for all; capacity_backoff is --capacity-backoff;
#   - slurmctld restarts per count change within max_count: must be 0, or
#     the benchmark fails;
#   - the controller's CPU time (user + system) per 100 instances created.
#   bench/provision_scale.sh [--counts 'N...'] [--boot-seconds S]
#                            [--fail-percent P] [--capacity-backoff S]
# Defaults: counts '4 16 48', 10 s boots, 20 % failing, capacity_backoff 20 s.
set -euo pipefail
counts='4 16 48' boot_seconds=10 fail_percent=20 capacity_backoff=20
while (($#)); do
  case $1 in
    --counts) counts=$2; shift ;;
    --boot-seconds) boot_seconds=$2; shift ;;
    --fail-percent) fail_percent=$2; shift ;;
    --capacity-backoff) capacity_backoff=$2; shift ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "provision_scale: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done
NAME=provision_scale
bad() { echo "provision_scale: $1" >&2; exit 2; }
for n in $counts; do
  if ! [[ $n =~ ^[1-9][0-9]*$ ]] || ((n > 200)); then bad "--counts: '$n' is not a count from 1 to 200"; fi
done
[[ -n $counts ]] || bad "--counts is empty"
# Slurm takes a powering-up slot's registration only from a boot 4 s after
# its POWER_UP (scripts/local-provider).
if ! [[ $boot_seconds =~ ^[0-9]+$ ]] || ((boot_seconds < 4)); then
  bad "--boot-seconds '$boot_seconds' is not a whole number of at least 4"
fi
if ! [[ $fail_percent =~ ^[0-9]+$ ]] || ((fail_percent >= 100)); then
  bad "--fail-percent '$fail_percent' is not a whole number below 100"
fi
[[ $capacity_backoff =~ ^[1-9][0-9]*$ ]] || bad "--capacity-backoff '$capacity_backoff' is not a positive number"
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# For a closer look: KEEP_LOGS=DIR keeps the controller's and the cluster's
# logs and the provider's calls there.
bench_cleanup() {
  [[ -n ${KEEP_LOGS:-} ]] || return 0
  mkdir -p "$KEEP_LOGS"
  cp -r "$dir/auto-resumed.log" "$dir/c/log" "$dir/c/provider" "$KEEP_LOGS/" 2>/dev/null || true
}
cli=$build/cli/auto-resume
[[ -x $cli ]] || { echo "provision_scale: build first (no $cli)" >&2; exit 1; }
bench_alive() {
  kill -0 "$controller_pid" 2>/dev/null || fail "auto-resumed exited: $(tail -n 5 "$dir/auto-resumed.log")"
}
bench_state() {
  echo "g's nodes: $(sinfo -h -N -p pg -o '%T %E' 2>&1 | sort | uniq -c | paste -sd';'); controller log: $(tail -n 5 "$dir/auto-resumed.log")"
}

max=0
for n in $counts; do ((n <= max)) || max=$n; done
parallel=16  # max_parallel_creates's default
include=$dir/nodes.conf
echo "# empty until the controller writes it" >"$include"
"$cluster_cmd" up "$dir/c" --nodes 1 --no-plugin \
  --conf-line 'SuspendProgram=/bin/true' --conf-line 'ResumeProgram=/bin/true' \
  --conf-line 'SuspendTime=3600' --conf-line 'SuspendExcParts=debug' \
  --conf-line 'ResumeTimeout=300' --conf-line 'SuspendTimeout=2' \
  --conf-line 'SlurmctldParameters=power_save_interval=1,power_save_min_interval=0' \
  --conf-line 'SchedulerParameters=sched_interval=1' \
  --conf-line "Include $include" >/dev/null
eval "$("$cluster_cmd" env "$dir/c")"
provider=$dir/c/provider
mkdir -p "$dir/groups" "$provider"
base=$("$cluster_cmd" free-ports "$max" | head -n 1)
printf 'count=0\nmax_count=%s\npartitions=pg\nnode_conf=CPUs=1\nslot_port_base=%s\n' "$max" "$base" \
  >"$dir/groups/g.conf"
cat >"$dir/restart.sh" <<SCRIPT
#!/bin/bash
echo "restart \$(date +%s.%N)" >>"$dir/restarts.log"
exec "$cluster_cmd" restart-slurmctld "$dir/c" --wait
SCRIPT
chmod +x "$dir/restart.sh"
port=$("$cluster_cmd" free-ports 1)
# provider=local: no static node is replaced here (the group's nodes are
# the provisioner's).
cat >"$dir/ar.conf" <<CONF
provider=local
listen=127.0.0.1:$port
state_dir=$dir/state
munge_socket=$dir/c/munge/munge.sock
node_provisioning=continuous
provision_command=$repo/scripts/local-provider
groups_dir=$dir/groups
lifecycle_log_dir=$dir/lifecycle
create_backoff=1
capacity_backoff=$capacity_backoff
slurm_conf=$dir/c/etc/slurm.conf
slurm_conf_include=$include
slurmctld_restart_command=$dir/restart.sh
slurmctld_restart_timeout=120
CONF
AR_LOCAL_CLUSTER=$dir/c AR_BOOT_SECONDS=$boot_seconds \
  "$daemon" --config "$dir/ar.conf" >"$dir/auto-resumed.log" 2>&1 &
controller_pid=$!
export AUTO_RESUME_CONTROLLER=127.0.0.1:$port AUTO_RESUME_MUNGE_SOCKET=$dir/c/munge/munge.sock

restarts() { if [[ -f $dir/restarts.log ]]; then wc -l <"$dir/restarts.log"; else echo 0; fi; }
group_known() { "$cli" group status 2>/dev/null | grep -q '^g '; }
# idle_count: g's nodes idle in Slurm (not drained, not powering up: sinfo's
# -t idle takes those too); shown_count: g's nodes Slurm shows.
idle_count() { sinfo -h -N -p pg -o '%N %T' 2>/dev/null | awk '$2 == "idle" {print $1}' | sort -u | wc -l; }
shown_count() { sinfo -h -N -p pg -o %N 2>/dev/null | sort -u | wc -l; }
idle_is() { [[ $(idle_count) == "$1" ]]; }
shown_is() { [[ $(shown_count) == "$1" ]]; }
# creates / injected: the provider's create calls and injected failures so far.
creates() { grep -c '^create ' "$provider/calls.log" 2>/dev/null || true; }
injected() { grep -c '^injected ' "$provider/calls.log" 2>/dev/null || true; }
cpu_seconds() { awk '{printf "%.2f", ($14 + $15) / '"$(getconf CLK_TCK)"'}' "/proc/$controller_pid/stat"; }
set_count() { "$cli" group set g "count=$1" >/dev/null; }
# up_to N: seconds from `group set g count=N` (from 0) to N nodes idle.
up_to() {
  local t0
  t0=$(now)
  set_count "$1"
  wait_for $((60 + 4 * boot_seconds * ($1 + parallel - 1) / parallel)) "$1 idle nodes" idle_is "$1"
  since "$t0"
}
# down_to_zero: seconds from `group set g count=0` to every slot hidden.
down_to_zero() {
  local t0
  t0=$(now)
  set_count 0
  wait_for 300 "scale-in to 0" shown_is 0
  since "$t0"
}

machine
wait_for 120 "group g (its slots declared: one slurmctld restart)" group_known
restarts_at_start=$(restarts)
cpu_start=$(cpu_seconds) creates_start=$(creates)
echo "one group, max_count $max, merge mode; creates boot in ${boot_seconds} s, at most $parallel at once (max_parallel_creates)"
printf '%-6s %14s %14s %8s %16s\n' count "to N idle" "ideal (boots)" ratio "back to 0"
changes=0
for n in $counts; do
  up=$(up_to "$n")
  waves=$(((n + parallel - 1) / parallel))
  ideal=$((waves * boot_seconds))
  down=$(down_to_zero)
  changes=$((changes + 2))
  printf '%-6s %12s s %12s s %7s %14s s\n' "$n" "$up" "$ideal" \
    "x$(awk -v a="$up" -v b="$ideal" 'BEGIN {printf "%.2f", a / b}')" "$down"
  last_n=$n last_up=$up last_ideal=$ideal
done

# Creates per instance with failures.
echo "$fail_percent" >"$provider/fail-percent"
c0=$(creates) f0=$(injected) t0=$(now)
set_count "$max"
wait_for $((120 + 8 * boot_seconds * (max + parallel - 1) / parallel)) "$max idle nodes with failing creates" idle_is "$max"
took=$(since "$t0")
rm "$provider/fail-percent"
c=$(($(creates) - c0)) f=$(($(injected) - f0))
changes=$((changes + 1))
awk -v c="$c" -v f="$f" -v n="$max" -v p="$fail_percent" -v t="$took" 'BEGIN {
  printf "%d %% of creates failing: %d creates for %d instances (%d failed) = %.2f per instance, at most 1 + %d/%d = %.2f; %s s to %d idle\n",
    p, c, n, f, c / n, f, n, 1 + f / n, t, n }'
((c <= max + f)) || fail "$c creates for $max instances and $f failures: a slot was created twice"
down_to_zero >/dev/null
changes=$((changes + 1))

# Convergence after capacity returns.
room=$((max * 3 / 4))
((room > 0)) || room=1
echo "$room" >"$provider/capacity-g"
set_count "$max"
changes=$((changes + 1))
wait_for 300 "$room idle nodes (capacity for $room)" idle_is "$room"
capacity_said() {
  local events
  events=$("$cli" events --group g 2>/dev/null) || return 1
  grep -q capacity_unavailable <<<"$events"
}
wait_for 60 "a capacity_unavailable event" capacity_said
t0=$(now)
rm "$provider/capacity-g"
wait_for $((120 + capacity_backoff + 4 * boot_seconds)) "$max idle nodes after capacity returned" idle_is "$max"
echo "converged $(since "$t0") s after capacity returned ($room of $max were up; capacity_backoff ${capacity_backoff} s, boots ${boot_seconds} s)"

# Instances: the creates less the injected failures (a repeated create of
# a token would count, and the check above says there was none).
made=$(($(creates) - creates_start - $(injected)))
cpu=$(awk -v a="$(cpu_seconds)" -v b="$cpu_start" 'BEGIN {printf "%.2f", a - b}')
echo "controller CPU: $cpu s over the run, $made instances created = $(awk -v c="$cpu" -v n="$made" 'BEGIN {printf "%.2f", 100 * c / n}') s per 100 instances"
during=$(($(restarts) - restarts_at_start))
echo "slurmctld restarts: $restarts_at_start for the new group, $during in $changes count changes within max_count"
((during == 0)) || fail "slurmctld restarted $during times for count changes within max_count"
awk -v n="$last_n" -v a="$last_up" -v b="$last_ideal" 'BEGIN {
  printf "count %d: to idle / ideal: %.1f s / %.1f s = x%.2f\n", n, a, b, a / b }'
