# shellcheck shell=bash
# Slots, the nodes of continuous provisioning on this machine: start-slot
# and stop-slot (a slurmd of a node declared in slurm.conf besides
# node1..nodeN), and free-ports (the ports for their Port=).

help_start_slot() {
    cat <<EOF
Usage: $PROG start-slot DIR NODE [--timeout S]

Start the slurmd of NODE, a node declared in DIR/etc/slurm.conf (e.g. with
--conf-line) or a file it includes, other than node1..nodeN, with a Port=
of its own, as on a host booted 2 s before: in a time namespace whose
uptime starts at 2 s. Slurm counts boot times in whole seconds: slurmctld
ignores a powering-up CLOUD node's registration whose boot time is older
than the power-up request, and marks a node DOWN ("unexpectedly
rebooted") whose boot time is newer than its last contact; so start a slot
at least 4 s after its POWER_UP. Returns once it listens on its Port=,
within --timeout (default 60). Refuses a NODE whose slurmd runs. The
slurmd carries the cluster's markers ('$PROG --help'): stop-slot and down
stop it.
EOF
}

help_stop_slot() {
    cat <<EOF
Usage: $PROG stop-slot DIR NODE

SIGKILL the slurmd of slot NODE, its steps and tasks, as kill-node does;
return when they are gone.
EOF
}

help_free_ports() {
    cat <<EOF
Usage: $PROG free-ports N

Print N consecutive TCP ports (1-1000) below the ephemeral range that
nobody uses now, one per line: Port= values for slots, whose slurmd binds
them only later (an ephemeral port may be taken by an outgoing connection
meanwhile, as the cluster's own ports never are). Ports handed out (by
free-ports and up) stay reserved for an hour in \$AR_PORT_REGISTRY
(default /tmp/auto-resume-ports), shared by every cluster on the machine:
no other pick hands them out meanwhile.
EOF
}

# slot_port NODE: the Port= of NODE's line in slurm.conf or a file it
# includes (Include PATH: absolute, or relative to DIR/etc), which must
# declare NODE, not one of node1..nodeN; fails (bad usage) otherwise.
slot_port() {
    local node=$1 line inc
    local -a files=("$CONF")
    [[ $node =~ ^[A-Za-z][A-Za-z0-9_-]*$ ]] || bad_usage "not a node name: '$node'"
    [[ ! $node =~ ^node([1-9][0-9]*)$ ]] || ((BASH_REMATCH[1] > NODES)) ||
        bad_usage "$node is one of the cluster's nodes (node1..node$NODES): use restart-node or kill-node"
    while read -r _ inc; do
        [[ $inc == /* ]] || inc=$DIR/etc/$inc
        files+=("$inc")
    done < <(grep -iE '^Include[[:space:]]+[^[:space:]]' "$CONF" || true)
    line=$(grep -hE "^NodeName=$node( |$)" "${files[@]}" 2>/dev/null | tail -n 1) ||
        bad_usage "no line 'NodeName=$node ...' in $CONF or a file it includes"
    [[ $line =~ [[:space:]]Port=([0-9]+)([[:space:]]|$) ]] ||
        bad_usage "the line of $node in $CONF has no Port=: '$line'"
    echo "${BASH_REMATCH[1]}"
}

# cmd_slot COMMAND DIR NODE [OPTION]...: start-slot and stop-slot.
cmd_slot() {
    local cmd=$1 dir=$2 node=$3 port
    shift 3
    command_options "$cmd" ' ' "$@"
    local timeout=$OPT_TIMEOUT
    set_dir "$dir"
    load_env
    port=$(slot_port "$node")
    record_fault "$cmd" "$node"
    if [[ $cmd == stop-slot ]]; then
        signal_until_gone KILL node_procs "$node"
        echo "$node stopped"
        return
    fi
    local deadline=$((SECONDS + timeout)) uptime
    ! marked_daemon "AR_CLUSTER_NODE=$DIR:$node" slurmd || die "$node's slurmd runs already (pid ${PROCS[*]})"
    mkdir -p "$DIR/spool/$node"
    # The host's uptime less (its whole seconds - 2): the slot booted 2 s ago.
    read -r uptime _ </proc/uptime
    start_daemon "$deadline" "slurmd for $node" "$DIR/log/slurmd-$node.out" \
        "AR_CLUSTER_NODE=$DIR:$node" unshare --time --boottime "-$((${uptime%.*} - 2))" \
        slurmd -f "$CONF" -N "$node"
    wait_port "$deadline" "$port" "slurmd for $node" "$DIR/log/slurmd-$node.out" "$DIR/log/slurmd-$node.log" \
        slurmd_procs "$node"
    # Another process on the port (a port handed out outside free-ports)
    # would leave this slurmd failing to bind, and the node never
    # registering: say so now.
    local holders
    holders=$(port_holders "$port")
    slurmd_procs "$node"
    # (ss names no process it cannot see: then nothing is said.)
    [[ -z ${holders// /} || " $holders " == *" ${PROCS[0]:-none} "* ]] ||
        fail_daemon "port $port of $node is held by another process (pid ${holders% }: $(ps -o args= -p "${holders%% *}" || true)), not by its slurmd" \
            "$DIR/log/slurmd-$node.log"
    echo "$node started (slurmd pid ${PROCS[*]})"
}

# cmd_free_ports N: N consecutive free ports, reserved (pick_ports).
cmd_free_ports() {
    local base
    base=$(pick_ports "$1")
    seq "$base" $((base + $1 - 1))
}
