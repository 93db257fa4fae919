# shellcheck shell=bash
# The cluster's central daemons taken away and back: restart-slurmctld,
# stop-slurmdbd and start-slurmdbd.

help_restart_slurmctld() {
    cat <<EOF
Usage: $PROG restart-slurmctld DIR [--kill] [--wait] [--timeout S]

Stop slurmctld (SIGTERM: it saves its state and exits; --kill: SIGKILL, as
a crash, its state as last saved) and start it again with the same
configuration and environment; it recovers its state (jobs, steps, nodes)
from DIR/state. Returns once it listens again, within --timeout (default
60); --wait: once 'scontrol ping' says it is UP and sinfo answers.
EOF
}

help_stop_slurmdbd() {
    cat <<EOF
Usage: $PROG stop-slurmdbd DIR

Stop slurmdbd (SIGTERM) and return when it is gone; slurmctld queues its
accounting meanwhile. Only for a cluster started with --accounting.
EOF
}

help_start_slurmdbd() {
    cat <<EOF
Usage: $PROG start-slurmdbd DIR [--timeout S]

Start the stopped slurmdbd again; return once it listens, within --timeout
(default 60).
EOF
}

# stop_daemon SIG NAME: send SIG once to this cluster's NAME daemons and wait
# until they are gone; SIGKILL them if still alive after STOP_DEADLINE seconds.
stop_daemon() {
    local sig=$1 name=$2 deadline=$((SECONDS + STOP_DEADLINE))
    marked_daemon "$MARKER" "$name" || true
    ((${#PROCS[@]} == 0)) || kill "-$sig" "${PROCS[@]}" 2>/dev/null || true
    until missing marked_daemon "$MARKER" "$name"; do
        if ((SECONDS > deadline)); then
            echo "$PROG: $name still alive ${STOP_DEADLINE}s after SIG$sig: SIGKILL" >&2
            signal_until_gone KILL marked_daemon "$MARKER" "$name"
            return
        fi
        nap 0.1
    done
}

# ctld_answers: slurmctld answers scontrol ping (UP) and sinfo.
ctld_answers() {
    SLURM_CONF=$CONF timeout 5 scontrol ping 2>/dev/null | grep -q 'is UP' &&
        SLURM_CONF=$CONF timeout 5 sinfo -h -o %P >/dev/null 2>&1
}

cmd_restart_slurmctld() {
    local dir=$1
    shift
    command_options restart-slurmctld ' --wait --kill ' "$@"
    local wait=$OPT_WAIT timeout=$OPT_TIMEOUT sig=TERM
    [[ -z $OPT_KILL ]] || sig=KILL
    set_dir "$dir"
    load_env
    local deadline=$((SECONDS + timeout))
    record_fault restart-slurmctld slurmctld
    stop_daemon "$sig" slurmctld
    # Its script helper ends with it; one left by a SIGKILL goes too.
    stop_daemon KILL slurmscriptd
    start_daemon "$deadline" slurmctld "$DIR/log/slurmctld.out" slurmctld -f "$CONF"
    wait_listening "$deadline" "$CTLD_PORT" slurmctld "$DIR/log/slurmctld.log"
    if [[ -n $wait ]]; then
        until ctld_answers; do
            ! missing marked_daemon "$MARKER" slurmctld ||
                fail_daemon "slurmctld died" "$DIR/log/slurmctld.out" "$DIR/log/slurmctld.log"
            ((SECONDS <= deadline)) || fail_daemon "slurmctld not answering in time" "$DIR/log/slurmctld.log"
            nap 0.1
        done
    fi
    marked_daemon "$MARKER" slurmctld || true
    echo "slurmctld restarted after SIG$sig (pid ${PROCS[*]})${wait:+, answering}"
}

# need_accounting: refuse a cluster started without --accounting.
need_accounting() {
    ((ACCOUNTING)) ||
        die "the cluster in '$DIR' was started without --accounting: it has no slurmdbd"
}

cmd_stop_slurmdbd() {
    set_dir "$1"
    load_env
    need_accounting
    record_fault stop-slurmdbd slurmdbd
    stop_daemon TERM slurmdbd
    echo "slurmdbd stopped"
}

cmd_start_slurmdbd() {
    local dir=$1
    shift
    command_options start-slurmdbd ' ' "$@"
    local timeout=$OPT_TIMEOUT
    set_dir "$dir"
    load_env
    need_accounting
    ! marked_daemon "$MARKER" slurmdbd || die "slurmdbd is running already (pid ${PROCS[*]})"
    marked_daemon "$MARKER" mariadbd || die "mariadbd of '$DIR' is not running: start the cluster again with up"
    local deadline=$((SECONDS + timeout))
    record_fault start-slurmdbd slurmdbd
    start_plain_daemon "$deadline" slurmdbd "$DIR/log/slurmdbd.out" slurmdbd
    wait_listening "$deadline" "$DBD_PORT" slurmdbd "$DIR/log/slurmdbd.log"
    marked_daemon "$MARKER" slurmdbd || true
    echo "slurmdbd started (pid ${PROCS[*]})"
}
