# shellcheck shell=bash
# Starting daemons (in the clean environment with this cluster's markers)
# and waiting for them: until they listen, until nodes reach a state.

log_tail() {
    local f
    for f in "$@"; do
        [[ -s $f ]] || continue
        echo "--- last 20 lines of $f" >&2
        tail -n 20 -- "$f" >&2
    done
}

# fail_daemon WHAT LOG...: report a daemon that did not come up, and give up.
fail_daemon() {
    local what=$1
    shift
    printf '%s: %s\n' "$PROG" "$what" >&2
    log_tail "$@"
    exit 1
}

# start_daemon DEADLINE WHAT OUT [VAR=VALUE]... COMMAND...: run a COMMAND that
# daemonizes (returns once forked off) in a clean environment holding only PATH,
# SLURM_CONF and this cluster's marker(s), its output appended to OUT; give up at
# DEADLINE (slurmd blocks before forking if its old, frozen steps do not answer).
start_daemon() {
    local deadline=$1 what=$2 out=$3 rc=0
    shift 3
    timeout -k 1 $((deadline > SECONDS ? deadline - SECONDS + 1 : 1)) \
        env -i "PATH=$PATH" "SLURM_CONF=$CONF" "${DAEMON_ENV[@]}" "$MARKER" "$@" </dev/null >>"$out" 2>&1 || rc=$?
    ((rc != 124)) || what+=" (still starting at the deadline)"
    ((rc == 0)) || fail_daemon "$what failed to start" "$out" "${out%.out}.log"
}

# start_plain_daemon: start_daemon without the --daemon-env variables, for the
# daemons that load no SPANK plugin (slurmdbd, mariadbd).
start_plain_daemon() {
    local -a DAEMON_ENV=()
    start_daemon "$@"
}

# start_slurmd NODE DEADLINE: start NODE's slurmd with its node marker.
start_slurmd() {
    start_daemon "$2" "slurmd for $1" "$DIR/log/slurmd-$1.out" \
        "AR_CLUSTER_NODE=$DIR:$1" slurmd -f "$CONF" -N "$1"
}

# start_service NAME LOG [VAR=VALUE]... COMMAND...: start a program that
# stays in the foreground (auto-resumed, an agent) in a session of its own,
# in the clean environment of start_daemon less the --daemon-env variables
# (it loads no plugin), its output appended to LOG; its PID goes to
# DIR/run/NAME.pid. A background job of a script (no job control) is no
# process group leader, so setsid does not fork: $! is the program's PID.
start_service() {
    local name=$1 log=$2
    shift 2
    setsid env -i "PATH=$PATH" "SLURM_CONF=$CONF" "$MARKER" "$@" </dev/null >>"$log" 2>&1 &
    echo "$!" >"$DIR/run/$name.pid.new"   # whole or not at all for its readers
    mv -f "$DIR/run/$name.pid.new" "$DIR/run/$name.pid"
}

port_listening() { [[ -n $(ss -Hltn "sport = :$1") ]]; }
# port_holders PORT: the PIDs listening on TCP PORT, space-separated.
port_holders() { ss -Hltnp "sport = :$1" | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u | tr '\n' ' '; }

# node_states: "NODE STATE" lines from sinfo, nothing if slurmctld does not answer.
node_states() {
    SLURM_CONF=$CONF timeout 5 sinfo -h -N -o '%N %t' 2>/dev/null || true
}

# wait_nodes DEADLINE STATES NODE...: wait until every NODE's sinfo state
# matches the regex STATES; on failure say which do not, with their log tails.
wait_nodes() {
    local deadline=$1 want=$2 states node state
    shift 2
    while :; do
        states=$(node_states)
        local -a pending=()
        for node in "$@"; do
            state=$(awk -v n="$node" '$1 == n { print $2; exit }' <<<"$states")   # once per partition: the first
            [[ $state =~ $want ]] || pending+=("$node:${state:-?}")
            # Every process on the machine is scanned again only once a
            # slurmd found before is gone, not at every look.
            if [[ -z ${SLURMD_PID[$node]:-} ]] || ! alive "${SLURMD_PID[$node]}"; then
                live_slurmds
                [[ -n ${SLURMD_PID[$node]:-} ]] || ! missing slurmd_procs "$node" ||
                    fail_daemon "slurmd for $node died" "$DIR/log/slurmd-$node.out" "$DIR/log/slurmd-$node.log"
            fi
        done
        ((${#pending[@]})) || return 0
        if ((SECONDS > deadline)); then
            printf '%s: nodes not %s in time: %s\n' "$PROG" "$want" "${pending[*]}" >&2
            log_tail "$DIR/log/slurmctld.log"
            for node in "${pending[@]}"; do log_tail "$DIR/log/slurmd-${node%%:*}.log"; done
            exit 1
        fi
        nap 0.2
    done
}

# wait_listening DEADLINE PORT NAME LOG: wait until NAME (a daemon with this
# cluster's marker) listens on PORT; fail if it dies or at DEADLINE.
wait_listening() {
    wait_port "$1" "$2" "$3" "$DIR/log/$3.out" "$4" marked_daemon "$MARKER" "$3"
}
# wait_port DEADLINE PORT WHAT OUT LOG LISTER [ARG]...: wait until PORT is
# listened on; fail, showing OUT and LOG, if the daemon that LISTER (which
# sets PROCS) finds dies, or at DEADLINE. LISTER scans every process on the
# machine: it runs again only once the daemon it found is gone (a
# daemonizing slurmd's parent), not at every look (20 a second).
wait_port() {
    local deadline=$1 port=$2 what=$3 out=$4 log=$5 pid=""
    shift 5
    until port_listening "$port"; do
        if [[ -z $pid ]] || ! alive "$pid"; then
            ! missing "$@" || fail_daemon "$what died" "$out" "$log"
            pid=${PROCS[0]}
        fi
        ((SECONDS <= deadline)) || fail_daemon "$what not listening on port $port in time" "$log"
        nap 0.05
    done
}
