# shellcheck shell=bash
# env and status: what a client of the cluster needs, and what runs.

help_env() {
    cat <<EOF
Usage: $PROG env DIR

Print the shell lines a client needs (export SLURM_CONF=...; for a cluster
up with --controller also AUTO_RESUME_CONTROLLER and
AUTO_RESUME_MUNGE_SOCKET):
  eval "\$($PROG env DIR)"
EOF
}

help_status() {
    cat <<EOF
Usage: $PROG status DIR

Print nodes with their states, the queue, and the controller and agents if
started.
EOF
}

# print_env: the shell lines a client of this cluster needs.
print_env() {
    printf 'export SLURM_CONF=%q\n' "$CONF"
    if [[ -n $CONTROLLER_PORT ]]; then
        printf 'export AUTO_RESUME_CONTROLLER=%q\n' "127.0.0.1:$CONTROLLER_PORT"
        printf 'export AUTO_RESUME_MUNGE_SOCKET=%q\n' "$DIR/munge/munge.sock"
    fi
}

cmd_env() {
    set_dir "$1"
    load_env
    [[ -f $CONF ]] || die "no $CONF"
    print_env
}

cmd_status() {
    set_dir "$1"
    load_env
    cluster_procs
    if ((${#PROCS[@]} == 0)); then
        echo "cluster $CLUSTER_NAME in $DIR: not running"
        return
    fi
    echo "cluster $CLUSTER_NAME in $DIR (SLURM_CONF=$CONF)"
    SLURM_CONF=$CONF timeout 10 sinfo -N -o '%N %10T %E' || true
    SLURM_CONF=$CONF timeout 10 squeue || true
    [[ -n $CONTROLLER_PORT ]] || return 0
    snapshot
    echo "auto-resumed on 127.0.0.1:$CONTROLLER_PORT: $(service_state auto-resumed) (log $DIR/log/auto-resumed.log)"
    # shellcheck disable=SC2153 # set by load_env
    ((AGENTS)) || return 0
    local i
    local -a agents=()
    for ((i = 1; i <= NODES; i++)); do
        agents+=("node$i $(service_state "auto-resume-agent-node$i")")
    done
    echo "agents: $(printf '%s, ' "${agents[@]}" | sed 's/, $//')"
}

# service_state NAME: "pid PID" for the live service of DIR/run/NAME.pid, else
# "not running". Uses the snapshot.
service_state() {
    local pid
    if pid=$(service_pid "$DIR/run/$1.pid"); then echo "pid $pid"; else echo "not running"; fi
}
