# shellcheck shell=bash
# down: the controller and the agents stopped first, then every other
# process of the cluster (up's cleanup when it fails, too).

help_down() {
    cat <<EOF
Usage: $PROG down DIR

Stop auto-resumed and the agents (SIGTERM; SIGKILL after ${TERM_GRACE}s),
then SIGKILL every other process of this cluster, and wait until they are
gone. Idempotent.
EOF
}

# stop_services: SIGTERM the agents (they say goodbye to the controller),
# then auto-resumed, each with SIGCONT should it be frozen, and wait until
# they are gone; after TERM_GRACE seconds the SIGKILL of do_down takes what
# is left.
stop_services() {
    local deadline kind
    local -a stopping
    for kind in "auto-resume-agent- auto-resume-age" "auto-resumed auto-resumed"; do
        # shellcheck disable=SC2086 # two words: NAME COMM
        services $kind
        ((${#PROCS[@]})) || continue
        stopping=("${PROCS[@]}")
        kill -TERM "${stopping[@]}" 2>/dev/null || true
        kill -CONT "${stopping[@]}" 2>/dev/null || true
        deadline=$((SECONDS + TERM_GRACE))
        # Those signalled are awaited by their /proc entries; the machine's
        # processes are scanned (services) only once they are gone.
        # shellcheck disable=SC2086
        until await_gone_by "$deadline" "${stopping[@]}" && missing services $kind; do
            if ((SECONDS > deadline)); then
                echo "$PROG: still alive ${TERM_GRACE}s after SIGTERM: ${stopping[*]}: SIGKILL" >&2
                return 0  # the SIGKILL of do_down
            fi
            ((${#PROCS[@]} == 0)) || stopping=("${PROCS[@]}")
            nap 0.1
        done
    done
}

# do_down: the agents and the controller first (so that the controller does
# not act on nodes going down), then everything else.
do_down() {
    stop_services
    signal_until_gone KILL cluster_procs
}

cmd_down() {
    if [[ ! -d $1 ]]; then   # never started: nothing to stop
        echo "no directory '$1', nothing to stop"
        return
    fi
    set_dir "$1"
    do_down
    echo "cluster in $DIR is down"
}
