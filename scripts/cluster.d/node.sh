# shellcheck shell=bash
# The faults injected into one node and its restart: kill-node,
# freeze-node, thaw-node, stop-slurmd, cont-slurmd, kill-slurmd and
# restart-node.

help_kill_node() {
    cat <<EOF
Usage: $PROG kill-node DIR NODE

Crash NODE: SIGKILL its slurmd, its slurmstepd processes and their tasks;
return when they are gone. NODE may also be a slot (start-slot) whose
instance runs.
EOF
}

help_freeze_node() {
    cat <<EOF
Usage: $PROG freeze-node DIR NODE

SIGSTOP the processes kill-node kills (NODE's slurmd, its slurmstepd
processes and their tasks): a hung node.
EOF
}

help_thaw_node() {
    cat <<EOF
Usage: $PROG thaw-node DIR NODE

SIGCONT the processes freeze-node stops.
EOF
}

help_stop_slurmd() {
    cat <<EOF
Usage: $PROG stop-slurmd DIR NODE

SIGSTOP NODE's slurmd only (a stalled slurmd on a healthy host: its steps,
tasks and agent run on).
EOF
}

help_cont_slurmd() {
    cat <<EOF
Usage: $PROG cont-slurmd DIR NODE

SIGCONT NODE's slurmd (stopped by stop-slurmd).
EOF
}

help_kill_slurmd() {
    cat <<EOF
Usage: $PROG kill-slurmd DIR NODE

SIGKILL NODE's slurmd only (as a package upgrade restarting it does; its
steps run on); restart-node starts it again.
EOF
}

help_restart_node() {
    cat <<EOF
Usage: $PROG restart-node DIR NODE [--kill] [--wait] [--timeout S]

Start NODE's slurmd again (SIGKILLing the old slurmd first if alive; its
steps are left alone). Refuses a frozen node, unless --kill: SIGKILL all
of NODE's processes first, as a reboot would. On a cluster up with
--agents, also starts NODE's agent if it is gone.
--wait: return once NODE responds (idle, or mixed, allocated, completing
if it runs jobs; no '*'), within --timeout (default 60).
EOF
}

# cmd_node COMMAND DIR NODE [ARG]...: the node commands (ARGs: restart-node's
# options), each recorded in DIR/faults.log.
cmd_node() {
    local cmd=$1 dir=$2 node=$3
    shift 3
    set_dir "$dir"
    load_env
    # A slot's instance crashes as a node does (slot_port checks the name).
    if [[ $cmd == kill-node && ! $node =~ ^node[1-9][0-9]*$ ]]; then
        slot_port "$node" >/dev/null
    else
        check_node "$node"
    fi
    record_fault "$cmd" "$node"
    case $cmd in
        kill-node)
            signal_until_gone KILL node_procs "$node"
            echo "$node killed" ;;
        freeze-node) stop_node "$node" ;;
        thaw-node)
            node_procs "$node"
            ((${#PROCS[@]} == 0)) || kill -CONT "${PROCS[@]}" 2>/dev/null || true
            echo "$node thawed: ${PROCS[*]}" ;;
        restart-node) restart_node "$node" "$@" ;;
        stop-slurmd | cont-slurmd | kill-slurmd)
            slurmd_procs "$node"
            ((${#PROCS[@]})) || die "$node's slurmd is not running"
            case $cmd in
                stop-slurmd) kill -STOP "${PROCS[@]}"
                    local deadline=$((SECONDS + STOP_DEADLINE))
                    until proc_state "${PROCS[0]}" && [[ $PROC_STATE == T ]]; do
                        ((SECONDS <= deadline)) || die "$node's slurmd not stopped after ${STOP_DEADLINE}s"
                        nap 0.05
                    done
                    echo "$node's slurmd stopped: ${PROCS[*]}" ;;
                cont-slurmd) kill -CONT "${PROCS[@]}"; echo "$node's slurmd continued: ${PROCS[*]}" ;;
                kill-slurmd) signal_until_gone KILL slurmd_procs "$node"; echo "$node's slurmd killed" ;;
            esac ;;
    esac
}

# restart_node NODE [OPTION]...: restart-node, once cmd_node checked NODE.
restart_node() {
    local node=$1
    shift
    command_options restart-node ' --wait --kill ' "$@"
    local wait=$OPT_WAIT timeout=$OPT_TIMEOUT reboot=$OPT_KILL
    local deadline=$((SECONDS + timeout)) p
    # A reboot: everything of the node goes first, frozen or not.
    [[ -z $reboot ]] || signal_until_gone KILL node_procs "$node"
    node_procs "$node"
    for p in "${PROCS[@]}"; do
        [[ ${PS_STATE[$p]} != T* ]] || die "$node is frozen: thaw-node or kill-node it first"
    done
    signal_until_gone KILL slurmd_procs "$node"
    start_slurmd "$node" "$deadline"
    local port=$((NODE_PORT_BASE + ${node#node}))
    wait_port "$deadline" "$port" "slurmd for $node" "$DIR/log/slurmd-$node.out" "$DIR/log/slurmd-$node.log" \
        slurmd_procs "$node"
    # A cluster up with --agents: the node's agent too, if it is gone (as
    # the service manager of a rebooted host would start it).
    local agent=''
    if ((AGENTS)); then
        snapshot
        if ! service_pid "$DIR/run/auto-resume-agent-$node.pid" >/dev/null; then
            start_agent "$node"
            agent=", agent pid $(<"$DIR/run/auto-resume-agent-$node.pid")"
        fi
    fi
    [[ -z $wait ]] || wait_nodes "$deadline" '^(idle|mix|alloc|comp)$' "$node"
    slurmd_procs "$node"
    echo "$node restarted (slurmd pid ${PROCS[*]}$agent)${wait:+, responding}"
}

# stop_node NODE: SIGSTOP NODE's processes until all of them are stopped.
stop_node() {
    local deadline=$((SECONDS + STOP_DEADLINE)) p
    local -a running
    while :; do
        node_procs "$1"
        running=()
        for p in "${PROCS[@]}"; do [[ ${PS_STATE[$p]} == T* ]] || running+=("$p"); done
        ((${#running[@]})) || break
        ((SECONDS <= deadline)) || die "still running after ${STOP_DEADLINE}s: ${running[*]}"
        kill -STOP "${running[@]}" 2>/dev/null || true
        nap 0.05
    done
    echo "$1 frozen: ${PROCS[*]}"
}
