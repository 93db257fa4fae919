# shellcheck shell=bash
# Helpers for integration tests on a real local Slurm cluster. Source it from a
# test script; the test's own cluster lives under $CLUSTER and is torn down on
# exit, whatever happens.
#
# Environment (set by ctest): AR_SOURCE_DIR (the repository), AR_PLUGIN (the
# built auto_resume.so), AR_DAEMON and AR_CLI (the built auto-resumed and
# auto-resume), and for a sanitizer build AR_SANITIZER_PRELOAD (the
# sanitizer runtimes, which must be loaded first into every Slurm process
# that loads the instrumented plugin: srun, sbatch, salloc and the daemons).
set -euo pipefail

# Debian's python3, which scripts/bootstrap installs and a fresh machine
# has, before any other in PATH: pyenv's shims (a shell script per call,
# 0.4 s each on an idle machine, seconds under the suite's load) made tests
# that call python3 often run past their deadlines.
if [[ -x /usr/bin/python3 && $(command -v python3) != /usr/bin/python3 ]]; then
  PATH=/usr/bin:$PATH
fi

: "${AR_SOURCE_DIR:?set AR_SOURCE_DIR to the repository}"
: "${AR_PLUGIN:?set AR_PLUGIN to the built auto_resume.so}"
CLUSTER_CMD=$AR_SOURCE_DIR/scripts/cluster
TEST_NAME=$(basename "$0" .sh)
# alive PID: PID is a live process (not a zombie), read from /proc with no
# process started; scripts/cluster's own, from a module that sets nothing
# else but PROC_STATE (proc_state's answer).
# shellcheck source=scripts/cluster.d/proc_state.sh
source "$AR_SOURCE_DIR/scripts/cluster.d/proc_state.sh"

fail() {
  printf 'FAIL [%s]: %s\n' "$TEST_NAME" "$*" >&2
  exit 1
}

# nap SECONDS: a pause without a process. The suite's polls (wait_until,
# the stand-in tasks' loops) ran /usr/bin/sleep up to 40 times a second per
# test, and each fork and exec is CPU the tests beside it wait for on CI's 2
# cores. `read -t` on a pipe that no one writes to waits in bash itself.
exec {NAP_FD}<> <(:)
nap() { read -rt "$1" -u "$NAP_FD" || true; }
# The same, for the scripts the tests write for their jobs' tasks (which
# do not source this file): NAP_LINES defines nap there.
# shellcheck disable=SC2016 # expanded where the task's script runs
NAP_LINES='exec {NAP_FD}<> <(:)
nap() { read -rt "$1" -u "$NAP_FD" || true; }'

note() { printf '[%s] %s\n' "$TEST_NAME" "$*"; }

# A short directory of this test's own: Slurm's socket paths under it must fit.
WORK=$(mktemp -d /tmp/ar-it.XXXXXX)
chmod 755 "$WORK"  # other users' jobs read the cluster's config and munge socket
CLUSTER=$WORK/c
_on_exit=()

# A watchdog: a test still running after AR_TEST_DEADLINE seconds (default
# 240, below ctest's 300) prints what its cluster is doing and kills the
# test's own child processes, so that a hang fails with a diagnosis instead
# of a bare timeout.
_descendants() {
  local child
  for child in $(ps -o pid= --ppid "$1"); do
    echo "$child"
    _descendants "$child"
  done
}
_watchdog() {
  local self=$BASHPID
  sleep "${AR_TEST_DEADLINE:-240}" >/dev/null 2>&1 &
  # shellcheck disable=SC2064 # the sleep's pid, now
  trap "kill $! 2>/dev/null; exit 0" TERM
  wait $!
  {
    echo "FAIL [$TEST_NAME]: still running after ${AR_TEST_DEADLINE:-240}s; processes:"
    # shellcheck disable=SC2009 # the whole table, filtered, is the diagnosis
    ps -eo pid,ppid,stat,etime,args | grep -F -e "$WORK" -e srun -e salloc -e sbatch
    local log
    for log in "$WORK"/*/log/*.log; do
      [[ -f $log ]] && { echo "--- $log"; tail -n 15 "$log"; }
    done
  } >&2
  local pids
  mapfile -t pids < <(_descendants "$1" | grep -vx "$self")
  kill -KILL "${pids[@]}" 2>/dev/null
}
_watchdog "$$" &
_watchdog_pid=$!
# A reaper outside the test's process tree (setsid -f: its parent exits at
# once): a test killed outright (ctest's TIMEOUT sends SIGKILL, which no
# trap sees) still has its controller and cluster stopped once it is gone,
# instead of loading every test that runs after it. After a clean exit
# there is nothing left for it to stop. It waits in one tail (which looks
# once a second), not a sleep started every second.
# shellcheck disable=SC2016 # expanded by the reaper
setsid -f bash -c 'tail --pid="$0" -f /dev/null
  pid=$(cat "$1/controller.pid" 2>/dev/null) &&  # still this test'"'"'s controller
    grep -qaF "$1/auto-resumed.conf" "/proc/$pid/cmdline" 2>/dev/null && kill -TERM "$pid"
  if [[ -f $2/cluster.env ]]; then "$3" down "$2" >/dev/null 2>&1; fi' \
  "$$" "$WORK" "$CLUSTER" "$CLUSTER_CMD" </dev/null >/dev/null 2>&1

# on_exit CMD: run CMD (a string for eval, expanded then) when the test ends,
# before the cluster goes down; the last one registered runs first.
on_exit() { _on_exit=("$1" "${_on_exit[@]}"); }
_cleanup() {
  local rc=$? cmd
  kill "$_watchdog_pid" 2>/dev/null || true
  for cmd in "${_on_exit[@]}"; do eval "$cmd" || true; done
  # The fault matrix's counts (docs/faults.md), from this test's cluster and
  # controller, for faults.counts to add up.
  if [[ -n ${AR_FAULT_COUNTS:-} && -d $CLUSTER ]] &&
    ! python3 "$AR_SOURCE_DIR/test/integration/fault_counts.py" record "$WORK" "$CLUSTER" \
      "$TEST_NAME" "$AR_FAULT_COUNTS"; then
    echo "FAIL [$TEST_NAME]: the fault counts could not be recorded" >&2
    ((rc != 0)) || rc=1
  fi
  if [[ -f $CLUSTER/cluster.env ]]; then
    if ((rc != 0)); then
      echo "--- cluster state at failure:" >&2
      "$CLUSTER_CMD" status "$CLUSTER" >&2 || true
      tail -n 20 "$CLUSTER"/log/slurmctld.log >&2 2>/dev/null || true
      if [[ -f $WORK/controller.log ]]; then
        echo "--- the controller's log, last lines:" >&2
        tail -n 40 "$WORK/controller.log" >&2
      fi
    fi
    "$CLUSTER_CMD" down "$CLUSTER" >/dev/null || echo "warning: cluster down failed" >&2
  fi
  if ((rc == 0)); then rm -rf "$WORK"; else echo "kept $WORK for inspection" >&2; fi
  exit "$rc"
}
trap _cleanup EXIT

# Leaks are not checked in Slurm's own processes (Slurm leaves memory to the
# exit); the unit tests check the core for leaks.
#
# The sanitizer build's plugin runs in the Slurm clients (srun, sbatch,
# salloc: nearly all of its code). The daemons (slurmd, slurmstepd) load
# AR_DAEMON_PLUGIN, an uninstrumented build, when one is given: this
# compiler's ASan allocator is not fork-safe, and slurmstepd forks each task
# while its other threads allocate, so a preloaded ASan now and then
# deadlocks a task before it starts. The clients then read a copy of the
# cluster's slurm.conf (CLUSTER/client/) whose plugstack.conf names the
# instrumented plugin.
SANITIZER_ENV=()
if [[ -n ${AR_SANITIZER_PRELOAD:-} ]]; then
  SANITIZER_ENV=("LD_PRELOAD=$AR_SANITIZER_PRELOAD" "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"
                 "UBSAN_OPTIONS=print_stacktrace=1")
  # Wrappers first in PATH, so that the sruns inside batch scripts (which
  # inherit PATH) get the runtimes too; each execs, keeping its PID, with
  # the client configuration when the cluster has one.
  mkdir "$WORK/bin"
  for _client in srun sbatch salloc; do
    cat >"$WORK/bin/$_client" <<WRAPPER
#!/bin/sh
client=\${SLURM_CONF%/etc/slurm.conf}/client/slurm.conf
if [ -f "\$client" ]; then SLURM_CONF=\$client; export SLURM_CONF; fi
exec env $(printf '%q ' "${SANITIZER_ENV[@]}") $(command -v "$_client") "\$@"
WRAPPER
    chmod +x "$WORK/bin/$_client"
  done
  PATH=$WORK/bin:$PATH
fi

# The folder of test/integration's Python helpers (wire.py, flood.py).
TEST_TOOLS=$AR_SOURCE_DIR/test/integration

# share_with_users: for a test that runs programs as other users (nobody,
# its own users), before its cluster and controller start. Those users may
# not reach the build at all: a clone under /root (mode 700 on a fresh
# Debian machine, where root clones as root) is closed to them. So the
# plugin, the CLI, the controller with its submit helper (which it runs as
# a job's owner, from its own folder) and the Python helpers are copied
# into $WORK/public, open to all, and AR_PLUGIN, AR_CLI, AR_DAEMON and
# TEST_TOOLS name the copies.
share_with_users() {
  local public=$WORK/public
  mkdir -m 755 "$public" "$public/py"
  cp "$AR_PLUGIN" "$AR_CLI" "$public/"
  cp "${AR_DAEMON:?}" "$(dirname "$AR_DAEMON")/auto-resume-submit" "$public/"
  cp "$TEST_TOOLS"/*.py "$public/py/"
  chmod -R a+rX "$public"
  AR_PLUGIN=$public/$(basename "$AR_PLUGIN")
  AR_CLI=$public/$(basename "$AR_CLI")
  AR_DAEMON=$public/$(basename "$AR_DAEMON")
  TEST_TOOLS=$public/py
}

# cluster_up_at DIR [scripts/cluster up options...]: start a cluster with the
# built plugin under DIR.
cluster_up_at() {
  local dir=$1 extra=() var
  shift
  if [[ -n ${AR_SANITIZER_PRELOAD:-} && -n ${AR_DAEMON_PLUGIN:-} ]]; then
    "$CLUSTER_CMD" up "$dir" --plugin "$AR_DAEMON_PLUGIN" "$@"
    mkdir -p "$dir/client"
    sed "s|^PlugStackConfig=.*|PlugStackConfig=$dir/client/plugstack.conf|" \
      "$dir/etc/slurm.conf" >"$dir/client/slurm.conf"
    sed "s|$AR_DAEMON_PLUGIN|$AR_PLUGIN|" "$dir/etc/plugstack.conf" >"$dir/client/plugstack.conf"
    return
  fi
  for var in "${SANITIZER_ENV[@]}"; do extra+=(--daemon-env "$var"); done
  "$CLUSTER_CMD" up "$dir" --plugin "$AR_PLUGIN" "${extra[@]}" "$@"
}

# cluster_up [scripts/cluster up options...]: start this test's cluster and
# point the Slurm clients at it.
cluster_up() {
  cluster_up_at "$CLUSTER" "$@"
  eval "$("$CLUSTER_CMD" env "$CLUSTER")"
}

# set_plugstack ARGS...: rewrite the plugin line of plugstack.conf (with the
# cluster's munge socket and progress folder, which agents_up's agents read); srun and slurmstepd read it anew for every step.
# The line starts with PLUGSTACK_LINE: required (default) or optional.
set_plugstack() {
  local args mode=${PLUGSTACK_LINE:-required}
  args="munge_socket=$CLUSTER/munge/munge.sock progress_dir=$CLUSTER/progress $*"
  if [[ -d $CLUSTER/client ]]; then
    printf '%s %s %s\n' "$mode" "$AR_DAEMON_PLUGIN" "$args" >"$CLUSTER/etc/plugstack.conf"
    printf '%s %s %s\n' "$mode" "$AR_PLUGIN" "$args" >"$CLUSTER/client/plugstack.conf"
  else
    printf '%s %s %s\n' "$mode" "$AR_PLUGIN" "$args" >"$CLUSTER/etc/plugstack.conf"
  fi
}

# power_saving RESUME_TIMEOUT: sets POWER_SAVING to scripts/cluster up's
# options for continuous provisioning's CLOUD slots (docs/provisioning.md,
# "The CLOUD state machine"): power saving on, programs that do nothing, the
# static nodes' partition (debug) never powered down, the power-save thread
# and the scheduler every second, ResumeTimeout as given.
power_saving() {
  # shellcheck disable=SC2034 # used by the tests that source this file
  POWER_SAVING=(--conf-line 'SuspendProgram=/bin/true' --conf-line 'ResumeProgram=/bin/true'
    --conf-line 'SuspendTime=3600' --conf-line 'SuspendExcParts=debug'
    --conf-line "ResumeTimeout=$1" --conf-line 'SuspendTimeout=2'
    --conf-line 'SlurmctldParameters=power_save_interval=1,power_save_min_interval=0'
    --conf-line 'SchedulerParameters=permit_job_expansion,sched_interval=1')
}

# group_slots N GROUP...: $WORK/slots.conf declares N CLOUD slots GROUP-1..N
# per group on this host, each with a port of its own, and SLOTS holds
# cluster_up's options for them: the power saving of power_saving (a 60 s
# ResumeTimeout), the slots' file and a partition pGROUP per group that
# never powers down by itself (docs/provisioning.md).
group_slots() {
  local n=$1 group i ports
  shift
  : >"$WORK/slots.conf"
  mapfile -t ports < <("$CLUSTER_CMD" free-ports $((n * $#)))
  for group in "$@"; do
    for ((i = 1; i <= n; i++)); do
      echo "NodeName=$group-$i NodeHostname=$(hostname -s) Port=${ports[0]} CPUs=2 State=CLOUD" \
        >>"$WORK/slots.conf"
      ports=("${ports[@]:1}")
    done
  done
  power_saving 60
  SLOTS=("${POWER_SAVING[@]}" --conf-line "Include $WORK/slots.conf")
  for group in "$@"; do
    SLOTS+=(--conf-line "PartitionName=p$group Nodes=$group-[1-$n] SuspendTime=INFINITE")
  done
}

# shellcheck disable=SC2120 # arguments are optional
# provisioning_up [LINES]: auto-resumed with continuous provisioning through
# the local provider on this test's cluster (groups in $WORK/groups,
# lifecycle logs in $WORK/lifecycle, creates retried after 1 s), plus LINES
# (more settings, one per line).
provisioning_up() {
  export AR_LOCAL_CLUSTER=$CLUSTER
  CONTROLLER_CONF="node_provisioning=continuous
provision_command=$AR_SOURCE_DIR/scripts/local-provider
groups_dir=$WORK/groups
lifecycle_log_dir=$WORK/lifecycle
create_backoff=1${1:+
$1}" controller_up
}

# free_port_range N: the first of N consecutive TCP ports nobody uses now,
# below the ephemeral range (scripts/cluster free-ports): a port the kernel
# hands out to outgoing connections may be taken by one (a slurmd's, a
# client's) between this pick and the bind of the server it is for.
free_port_range() {
  "$CLUSTER_CMD" free-ports "$1" | head -n 1
}

# free_port: a TCP port nobody uses now, below the ephemeral range.
free_port() {
  free_port_range 1
}

# shellcheck disable=SC2120 # arguments are optional
# controller_up [PLUGSTACK_ARGS...]: start auto-resumed for this test's cluster
# (state under $WORK/state, log in $WORK/controller.log), point the plugin
# (with any further plugstack arguments) and the CLI at it, and wait until it
# answers. CONTROLLER_PID is its process. CONTROLLER_CONF: more lines for
# its config file. Failed nodes are replaced by restarting them (a reboot),
# or by CONTROLLER_RESTART_COMMAND. CONTROLLER_NOFILE: its descriptor limit.
# CONTROLLER_LIMITS: the circuit breaker's lines (docs/guard.md); by default
# limits no test reaches, since a test cluster's few nodes make the default
# (2 marks an hour) trip in the tests that fault several nodes.
controller_up() {
  : "${AR_DAEMON:?}" "${AR_CLI:?}"
  CONTROLLER_PORT=${CONTROLLER_PORT:-$(free_port)}
  local restart="$CLUSTER_CMD restart-node $CLUSTER {node} --kill"
  restart=${CONTROLLER_RESTART_COMMAND:-$restart}
  # CONTROLLER_PROVIDER replaces the local provider's lines.
  local provider="provider=local
local_restart_command=$restart"
  cat >"$WORK/auto-resumed.conf" <<CONF
${CONTROLLER_PROVIDER:-$provider}
listen=127.0.0.1:$CONTROLLER_PORT
state_dir=$WORK/state
munge_socket=$CLUSTER/munge/munge.sock
${CONTROLLER_LIMITS-max_marks_per_hour=1000
max_replacements_per_hour=1000}
${CONTROLLER_CONF:-}
CONF
  # A session of its own (setsid does not fork here: a background job is no
  # group leader), so that a test that stops it (SIGSTOP) does not leave a
  # stopped process in the test's own process group, which the kernel hangs
  # up (SIGHUP) if that group is orphaned.
  setsid ${CONTROLLER_NOFILE:+prlimit --nofile="$CONTROLLER_NOFILE"} "$AR_DAEMON" --config "$WORK/auto-resumed.conf" >>"$WORK/controller.log" 2>&1 &
  CONTROLLER_PID=$!
  echo "$CONTROLLER_PID" >"$WORK/controller.pid"  # for the reaper
  # shellcheck disable=SC2016 # expanded when the test ends
  on_exit '_controller_gone "$CONTROLLER_PID"; rm -f "$WORK/controller.pid"'
  export AUTO_RESUME_CONTROLLER=127.0.0.1:$CONTROLLER_PORT
  export AUTO_RESUME_MUNGE_SOCKET=$CLUSTER/munge/munge.sock
  wait_until 20 "auto-resumed to answer (log: $WORK/controller.log)" controller_answers
  set_plugstack "controller=$AUTO_RESUME_CONTROLLER $*"
}
# _controller_gone PID: SIGTERM to the controller, and its end awaited (at
# most 30 s): it ends its provider calls as it stops, so that none starts a
# node's slurmd after the cluster went down (a slurmd left running loads
# every test after it).
_controller_gone() {
  kill -TERM "$1" 2>/dev/null || return 0
  local deadline=$((SECONDS + 30))
  while alive "$1" && ((SECONDS < deadline)); do
    nap 0.1
  done
}
# controller_down: stop auto-resumed with SIGTERM; it must exit cleanly (under
# a sanitizer build, a leak or error report makes its exit status non-zero).
controller_down() {
  kill -TERM "$CONTROLLER_PID"
  local rc=0
  wait "$CONTROLLER_PID" || rc=$?
  rm -f "$WORK/controller.pid"
  ((rc == 0)) || fail "auto-resumed exited with status $rc: $(tail -n 30 "$WORK/controller.log")"
}
# agents_up NODE...: a node agent per NODE, sending heartbeats every second
# (with the array AGENT_ARGS's options, if set).
# Each carries its node's marker, so that kill-node and freeze-node take it
# down with the node's slurmd, as on a real host. AGENT_PID[NODE] holds its PID.
declare -A AGENT_PID
agents_up() {
  : "${AR_AGENT:?set AR_AGENT to the built auto-resume-agent}"
  local node
  for node in "$@"; do
    AR_CLUSTER_NODE="$CLUSTER:$node" setsid "$AR_AGENT" --node "$node" --interval 1 \
      --progress-dir "$CLUSTER/progress" ${AGENT_ARGS[@]+"${AGENT_ARGS[@]}"} \
      >>"$WORK/agent-$node.log" 2>&1 &
    AGENT_PID[$node]=$!
    # shellcheck disable=SC2016 # expanded when the test ends
    on_exit "kill -CONT ${AGENT_PID[$node]} 2>/dev/null; kill -TERM ${AGENT_PID[$node]} 2>/dev/null"
  done
}
# The CLI the polls below ask with (wait_until calls them over and over):
# AR_POLL_CLI where given, else AR_CLI. The sanitizer build's run gives the
# plain build's: an instrumented CLI costs about 0.25 s of CPU to start and
# end, and its polls took a tenth of that run's CPU; every other call of
# the tests' is the instrumented AR_CLI's, as is the controller it asks.
POLL_CLI=${AR_POLL_CLI:-$AR_CLI}
# heard N: the controller has fresh heartbeats (under 2 s old) from N nodes.
heard() {
  [[ $("$POLL_CLI" nodes 2>/dev/null | grep -cE ': last heartbeat [01]\.[0-9] s ago$') == "$1" ]]
}
# event_seen PATTERN: the controller's events hold a line matching PATTERN.
# (the events are read whole first: grep -q ending early would kill the
# CLI with SIGPIPE, which pipefail reports as a failure)
event_seen() {
  local events
  events=$("$POLL_CLI" events 2>/dev/null) || return 1
  grep -qE -- "$1" <<<"$events"
}
# What no look of the engine may take while a call it started waits (1 s;
# 2.5 s in the sanitizer build, whose code runs several times slower).
# shellcheck disable=SC2034 # used by the tests that source this file
LOOK_BOUND=1
# shellcheck disable=SC2034 # used by the tests that source this file
[[ -z ${AR_SANITIZER_PRELOAD:-} ]] || LOOK_BOUND=2.5
# looks_counts: "LOOKS QUARTER OVER" from one scrape of the metrics at
# $METRICS (metrics_listen): how many looks the resume engine made, and how
# many of them took longer than 0.25 s and than LOOK_BOUND (bucket bounds
# of auto_resume_look_seconds, docs/metrics.md).
looks_counts() {
  local scraped
  scraped=$("$AR_SOURCE_DIR/test/integration/scrape.py" "http://$METRICS/metrics" 2>/dev/null) ||
    fail "no metrics at $METRICS"
  awk -v quarter=0.25 -v bound="$LOOK_BOUND" '
    $1 == "auto_resume_look_seconds_bucket{le=\"" quarter "\"}" { q = $2; found_q = 1 }
    $1 == "auto_resume_look_seconds_bucket{le=\"" bound "\"}" { b = $2; found_b = 1 }
    $1 == "auto_resume_look_seconds_count" { count = $2 }
    END { if (!found_q || !found_b) exit 1; print count, count - q, count - b }' <<<"$scraped" ||
    fail "no auto_resume_look_seconds buckets le=\"0.25\" and le=\"$LOOK_BOUND\" at $METRICS"
}
# looks_mark: the look counts now, for assert_no_slow_looks.
looks_mark() { read -r LOOKS_MARK QUARTER_MARK OVER_MARK < <(looks_counts); }
# assert_no_slow_looks WHEN WHILE: since looks_mark, no look took
# LOOK_BOUND s or longer; notes how many looks came WHEN, and how slow.
assert_no_slow_looks() {
  local looks quarter over
  read -r looks quarter over < <(looks_counts)
  note "$((looks - LOOKS_MARK)) looks $1: $((quarter - QUARTER_MARK)) of them 0.25 s or longer, $((over - OVER_MARK)) $LOOK_BOUND s or longer"
  assert_eq "$((over - OVER_MARK))" 0 "the looks of $LOOK_BOUND s or longer $2"
}
# slurmd_started NODE: the start time of NODE's slurmd instance.
slurmd_started() { scontrol -o show node "$1" | grep -o ' SlurmdStartTime=[^ ]*' | cut -d= -f2; }

controller_answers() {
  kill -0 "$CONTROLLER_PID" 2>/dev/null || fail "auto-resumed exited: $(tail -n 20 "$WORK/controller.log")"
  "$POLL_CLI" hello >/dev/null 2>&1
}

# wait_until SECONDS DESCRIPTION CMD...: poll CMD until it succeeds; fail with
# DESCRIPTION at the deadline. The first look again after 0.25 s, each next
# 0.25 s later than the one before, then once a second: a poll that asks
# Slurm or the controller costs about 45 ms of CPU (scontrol, slurmctld,
# munged, the shell), and eight tests polling five times a second took most
# of CI's two cores (docs/testing.md); a wait of seconds looks about once a
# second.
wait_until() {
  local seconds=$1 what=$2 pause=25
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@"; do
    ((SECONDS < deadline)) || fail "timed out after ${seconds}s waiting for: $what"
    nap "$((pause / 100)).$((pause % 100 / 10))$((pause % 10))"
    ((pause >= 100)) || pause=$((pause + 25))
  done
}

# node_state NODE: Slurm's long state of NODE (e.g. idle, down*, idle*).
node_state() { sinfo -h -n "$1" -N -o '%T' | head -n 1; }
node_is() { [[ $(node_state "$1") == "$2" ]]; }
node_not_responding() { [[ $(node_state "$1") == *'*' ]]; }
queue_empty() { [[ -z $(squeue -h) ]]; }

assert_contains() {  # FILE PATTERN [what]
  grep -qE -- "$2" "$1" || { cat "$1" >&2; fail "${3:-$1} does not match /$2/"; }
}
# A FILE that cannot be read fails assert_not_contains too: a missing output
# holds no proof that the pattern is absent.
assert_not_contains() {  # FILE PATTERN [what]
  local rc=0
  grep -qE -- "$2" "$1" || rc=$?
  case $rc in
    0) cat "$1" >&2; fail "${3:-$1} matches /$2/" ;;
    1) ;;
    *) fail "${3:-$1}: cannot read $1 to check that it does not match /$2/" ;;
  esac
}
# count_tasks PATTERN: processes of this test's cluster whose whole command
# line matches PATTERN (pgrep -xf), told apart from other clusters' by their
# SLURM_CONF.
count_tasks() {
  local pid n=0
  for pid in $(pgrep -xf "$1"); do
    ( tr '\0' '\n' <"/proc/$pid/environ" ) 2>/dev/null | grep -qxF "SLURM_CONF=$SLURM_CONF" &&
      n=$((n + 1))
  done
  echo "$n"
}
tasks_are() { [[ $(count_tasks "$2") == "$1" ]]; }  # N PATTERN

assert_eq() {  # ACTUAL EXPECTED WHAT
  [[ "$1" == "$2" ]] || fail "$3: expected '$2', got '$1'"
}

# environ_pids GREP_ARGS...: processes with an environment entry matching the
# whole-line pattern (one grep over every environment: a scan forking per
# process took seconds on a loaded machine, long enough for Slurm to act).
environ_pids() { { grep -lzx "$@" /proc/[0-9]*/environ 2>/dev/null || true; } | cut -d/ -f3; }

# live_pids DIR [NODE]: live (non-zombie) processes of the cluster under DIR,
# or of one of its nodes: its daemons (by the AR_CLUSTER markers in their
# environment) and job tasks (by SLURM_CONF and SLURMD_NODENAME).
live_pids() {
  local dir=$1 node=${2:-} pid stat
  local -A conf=()
  for pid in $(environ_pids -F -e "SLURM_CONF=$dir/etc/slurm.conf"); do conf[$pid]=1; done
  {
    if [[ -n $node ]]; then
      environ_pids -F -e "AR_CLUSTER_NODE=$dir:$node"
      for pid in $(environ_pids -F -e "SLURMD_NODENAME=$node"); do [[ -z ${conf[$pid]:-} ]] || echo "$pid"; done
    else
      environ_pids -F -e "AR_CLUSTER=$dir"
      for pid in $(environ_pids -E -e 'SLURMD_NODENAME=.*'); do [[ -z ${conf[$pid]:-} ]] || echo "$pid"; done
    fi
  } | sort -un | while read -r pid; do
    { read -r stat <"/proc/$pid/stat"; } 2>/dev/null || continue
    stat=${stat##*) }   # the state follows the command name in parentheses
    [[ -n $stat && ${stat:0:1} != Z ]] && echo "$pid"
  done
  return 0
}

# make_nvidia_smi_stubs: $WORK/nvidia-smi-healthy-2 and $WORK/nvidia-smi-lost-gpu,
# nvidia-smi stand-ins that print the unit tests' fixtures (2 healthy GPUs;
# one fallen off the bus).
make_nvidia_smi_stubs() {
  local name fixtures=$AR_SOURCE_DIR/test/unit/fixtures/nvidia-smi
  for name in healthy-2 lost-gpu; do
    printf '#!/bin/sh\ncat %q\n' "$fixtures/$name.xml" >"$WORK/nvidia-smi-$name"
    chmod +x "$WORK/nvidia-smi-$name"
  done
}
# make_training_step: $WORK/step.sh CKPT STEPS, a stand-in for training run
# by srun: rank 0 checkpoints the step reached into CKPT every 0.25 s, and
# every rank beats with it (AUTO_RESUME_PROGRESS, where the plugin set it); every
# rank starts from the checkpoint and prints one line saying so. Past STEPS,
# every rank waits while CKPT.hold exists (a test holds the step running).
make_training_step() {
  cat >"$WORK/step.sh" <<SCRIPT
#!/bin/bash
$NAP_LINES
SCRIPT
  cat >>"$WORK/step.sh" <<'SCRIPT'
ckpt=$1 steps=$2
start=0
[[ -f $ckpt ]] && start=$(<"$ckpt")
echo "attempt=${AUTO_RESUME_ATTEMPT:-} restarts=${SLURM_RESTART_COUNT:-0} rank=$SLURM_PROCID node=$SLURMD_NODENAME nodes=${NODE_LIST:-} master=${MASTER_ADDR:-}:${MASTER_PORT:-} start=$start"
for ((i = start + 1; i <= steps; i++)); do
  nap 0.25
  if ((SLURM_PROCID == 0)); then echo "$i" >"$ckpt.tmp" && mv "$ckpt.tmp" "$ckpt"; fi
  [[ -z ${AUTO_RESUME_PROGRESS:-} ]] || echo "$i" >"$AUTO_RESUME_PROGRESS"
done
while [[ -e $ckpt.hold ]]; do nap 0.25; done
if ((SLURM_PROCID == 0)); then echo "done at step $steps"; fi
SCRIPT
  chmod +x "$WORK/step.sh"
}
# make_finish_job: $WORK/step.sh CKPT FINISH, a stand-in for training that
# runs until FINISH exists (rank 0 checkpoints its count into CKPT 4 times
# a second; every rank prints its first line as make_training_step's), and
# $WORK/job.sh, a batch script that runs it as `srun --auto-resume=1` on
# $WORK/ckpt and $WORK/finish (every task's output in $WORK/step.out) and
# prints "srun exit STATUS".
make_finish_job() {
  cat >"$WORK/step.sh" <<SCRIPT
#!/bin/bash
$NAP_LINES
SCRIPT
  cat >>"$WORK/step.sh" <<'SCRIPT'
ckpt=$1 finish=$2 i=0
[[ -f $ckpt ]] && i=$(<"$ckpt")
echo "attempt=${AUTO_RESUME_ATTEMPT:-} restarts=${SLURM_RESTART_COUNT:-0} rank=$SLURM_PROCID node=$SLURMD_NODENAME start=$i"
until [[ -e $finish ]]; do
  nap 0.25
  i=$((i + 1))
  if ((SLURM_PROCID == 0)); then echo "$i" >"$ckpt.tmp" && mv "$ckpt.tmp" "$ckpt"; fi
done
if ((SLURM_PROCID == 0)); then echo "done at step $i"; fi
SCRIPT
  chmod +x "$WORK/step.sh"
  cat >"$WORK/job.sh" <<SCRIPT
#!/bin/bash
srun --auto-resume=1 -l --output=$WORK/step.out $WORK/step.sh $WORK/ckpt $WORK/finish
echo "srun exit \$?"
SCRIPT
}
# job_events KIND: how many KIND events the controller has of $job.
job_events() {
  local all
  all=$("$POLL_CLI" events 2>/dev/null) || return 1
  grep -cE "^.*job ${job:?} [^ ]+ $1: " <<<"$all" || true
}
# make_training_job STEPS [LINE]: $WORK/job.sh, a batch script that runs
# the stand-in as `srun --auto-resume=1` (every task's output in
# $WORK/step.out, in append mode across relaunches), after LINE if given,
# and prints "srun exit STATUS".
make_training_job() {
  {
    echo '#!/bin/bash'
    [[ -z ${2:-} ]] || echo "$2"
    echo "srun --auto-resume=1 -l --output=$WORK/step.out $WORK/step.sh $WORK/ckpt $1"
    echo 'echo "srun exit $?"'
  } >"$WORK/job.sh"
}
# started ATTEMPT [TASKS]: all TASKS (default 4) tasks of ATTEMPT printed
# their first line to $WORK/step.out.
started() { [[ $(grep -c "attempt=$1 " "$WORK/step.out" 2>/dev/null) == "${2:-4}" ]]; }

# checkpoint: the step in $WORK/ckpt (0 without one); past N: it is >= N.
checkpoint() { cat "$WORK/ckpt" 2>/dev/null || echo 0; }
past() { (($(checkpoint) >= $1)); }

# job_field FIELD: a field of $job from scontrol; job_ended: $job is over.
job_field() { scontrol -o show job "${job:?}" | grep -o " $1=[^ ]*" | cut -d= -f2-; }
job_ended() { [[ $(job_field JobState) =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED)$ ]]; }
# job_ended_id JOB: like job_ended, for any job.
job_ended_id() { [[ $(scontrol -o show job "$1" 2>/dev/null | grep -o ' JobState=[^ ]*' | cut -d= -f2) =~ ^(COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED)$ ]]; }
node_addr() { scontrol -o show node "$1" | grep -o ' NodeAddr=[^ ]*' | cut -d= -f2; }
