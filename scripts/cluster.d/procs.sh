# shellcheck shell=bash
# Finding this cluster's processes (by their markers, the files they hold
# open, the PIDs recorded under DIR/run, and as descendants and process
# group members of those) and waiting until they are gone.

declare -A PS_PPID PS_PGID PS_STATE PS_COMM
declare -a PROCS

# snapshot: load the process table (one `ps` run) into the PS_* maps.
snapshot() {
    PS_PPID=() PS_PGID=() PS_STATE=() PS_COMM=()
    local pid ppid pgid state comm
    while read -r pid ppid pgid state comm; do
        PS_PPID[$pid]=$ppid PS_PGID[$pid]=$pgid PS_STATE[$pid]=$state PS_COMM[$pid]=$comm
    done < <(ps -e -o pid=,ppid=,pgid=,stat=,comm=)
}

is_daemon() { [[ $DAEMONS == *" ${PS_COMM[$1]:-?} "* ]]; }

# marker_pids ENTRY: processes whose environment holds exactly ENTRY.
marker_pids() {
    { grep -lzxF -e "$1" /proc/[0-9]*/environ 2>/dev/null || true; } | cut -d/ -f3
}

# file_daemons FILE...: our daemons holding one of FILEs open (slurmstepd keeps
# its node's slurmd log open; this finds it even if its environment was rewritten).
file_daemons() {
    local pid
    for pid in $(fuser "$@" 2>/dev/null || true); do
        is_daemon "$pid" && echo "$pid"
    done
}

# closure ROOT...: set PROCS to the live (non-zombie) ROOTs, their descendants,
# and every process in the process group of a non-daemon descendant (a task
# keeps the group slurmstepd gave it when re-parented to PID 1). Uses the snapshot.
closure() {
    local -A member=() group=()
    local p g changed=1 own_group=${PS_PGID[$$]:-}
    for p in "$@"; do [[ -n ${PS_PPID[$p]:-} ]] && member[$p]=1; done
    while ((changed)); do
        changed=0
        for p in "${!member[@]}"; do
            g=${PS_PGID[$p]}
            is_daemon "$p" || ((g <= 1)) || [[ $g == "$own_group" ]] || group[$g]=1
        done
        for p in "${!PS_PPID[@]}"; do
            [[ -z ${member[$p]:-} && $p != "$$" ]] || continue
            if [[ -n ${member[${PS_PPID[$p]}]:-} || -n ${group[${PS_PGID[$p]}]:-} ]]; then
                member[$p]=1 changed=1
            fi
        done
    done
    PROCS=()
    for p in "${!member[@]}"; do
        [[ ${PS_STATE[$p]} == Z* ]] || PROCS+=("$p")
    done
}

# node_procs NODE: PROCS = live processes of NODE: its slurmd (by marker), its
# slurmstepd processes (setproctitle overwrites their environment, so found by
# the node's log file they hold open), and their tasks.
node_procs() {
    snapshot
    # shellcheck disable=SC2046
    closure $(marker_pids "AR_CLUSTER_NODE=$DIR:$1") \
        $(file_daemons "$DIR/log/slurmd-$1.log") $(agent_by_file "$1")
}

# agent_by_file NODE: NODE's agent by its pid file too, when that PID is an
# agent (a CI run once found it by neither its marker nor a file it holds,
# and kill-node left it running). Uses the snapshot.
agent_by_file() {
    local file=$DIR/run/auto-resume-agent-$1.pid pid
    [[ -f $file ]] || return 0
    pid=$(<"$file")
    [[ $pid =~ ^[0-9]+$ && ${PS_COMM[$pid]:-} == auto-resume-age* && ${PS_STATE[$pid]} != Z* ]] || return 0
    echo "$pid"
}

# holds_dir_file PID: PID has a file under DIR open (one find, not a
# readlink per descriptor).
holds_dir_file() {
    local dir_pattern=${DIR//\\/\\\\}
    dir_pattern=${dir_pattern//\*/\\*} dir_pattern=${dir_pattern//\?/\\?} dir_pattern=${dir_pattern//\[/\\[}
    [[ -n $(find "/proc/$1/fd" -mindepth 1 -maxdepth 1 -lname "$dir_pattern/*" -print -quit 2>/dev/null) ]]
}

# service_pid FILE: the PID recorded in FILE (DIR/run/auto-resume*.pid: the
# controller, an agent) if it is alive and carries this cluster's marker
# (PIDs get reused); fails otherwise. Uses the snapshot.
service_pid() {
    local pid
    [[ -f $1 ]] || return 1
    pid=$(<"$1")
    [[ $pid =~ ^[0-9]+$ && -n ${PS_PPID[$pid]:-} && ${PS_STATE[$pid]} != Z* ]] || return 1
    grep -qzxF -e "$MARKER" "/proc/$pid/environ" 2>/dev/null || return 1
    echo "$pid"
}

# service_pids [NAME]: the live PIDs of DIR/run/NAME*.pid (default:
# auto-resume, both kinds), as service_pid says.
service_pids() {
    local f
    for f in "$DIR/run/${1:-auto-resume}"*.pid; do service_pid "$f" || true; done
}

# services NAME COMM: PROCS = this cluster's live auto-resumed (NAME
# auto-resumed, COMM auto-resumed) or agents (auto-resume-agent-,
# auto-resume-age), by the PIDs recorded (service_pids) and, should a file
# be lost, by marker and process name.
services() {
    snapshot
    local -A seen=()
    local p
    for p in $(service_pids "$1"); do seen[$p]=1; done
    for p in $(marker_pids "$MARKER"); do
        [[ ${PS_COMM[$p]:-} == "$2" && ${PS_STATE[$p]:-Z} != Z* ]] && seen[$p]=1
    done
    PROCS=("${!seen[@]}")
}

# cluster_procs: PROCS = live processes of the whole cluster. A PID recorded in
# DIR/run/NAME[-NODE].pid counts if it is still a NAME holding a file under DIR
# open and not marked for another cluster (PIDs get reused); one in
# DIR/run/auto-resume*.pid as service_pids says.
cluster_procs() {
    snapshot
    local f name pid recorded=()
    mapfile -t recorded < <(service_pids)
    for f in "$DIR"/run/*.pid; do
        [[ -f $f && ${f##*/} != auto-resume* ]] || continue
        pid=$(<"$f") name=${f##*/} name=${name%.pid} name=${name%%-*}
        [[ $pid =~ ^[0-9]+$ && ${PS_COMM[$pid]:-} == "$name" ]] || continue
        # One with this cluster's marker is among marker_pids' below.
        grep -qzF -e "AR_CLUSTER=" "/proc/$pid/environ" 2>/dev/null && continue
        holds_dir_file "$pid" || continue
        recorded+=("$pid")
    done
    # shellcheck disable=SC2046
    closure "${recorded[@]}" $(marker_pids "$MARKER") $(file_daemons "$DIR"/log/*.log)
}

# marked_daemon ENTRY NAME: PROCS = live processes called NAME with ENTRY in
# their environment; true if there is one.
marked_daemon() {
    snapshot
    local p
    PROCS=()
    for p in $(marker_pids "$1"); do
        [[ ${PS_COMM[$p]:-} == "$2" && ${PS_STATE[$p]:-Z} != Z* ]] && PROCS+=("$p")
    done
    ((${#PROCS[@]}))
}

# missing LISTER [ARG]...: LISTER (which sets PROCS) finds nothing, twice, 0.1 s
# apart. A daemonizing process forks twice; one scan (ps, then /proc) can see
# the parent just before it exits and miss the child that replaces it.
missing() {
    "$@" || true
    ((${#PROCS[@]} == 0)) || return 1
    nap 0.1
    "$@" || true
    ((${#PROCS[@]} == 0))
}

# live_slurmds: SLURMD_PID[NODE] = the PID of each node's live slurmd.
declare -A SLURMD_PID
live_slurmds() {
    snapshot
    SLURMD_PID=()
    local entry pid prefix
    while IFS= read -r -d '' entry; do   # /proc/PID/environ:AR_CLUSTER_NODE=DIR:NODE
        pid=${entry#/proc/} pid=${pid%%/*}
        prefix="/proc/$pid/environ:AR_CLUSTER_NODE=$DIR:"
        if [[ $entry == "$prefix"* && ${PS_COMM[$pid]:-} == slurmd && ${PS_STATE[$pid]} != Z* ]]; then
            SLURMD_PID[${entry#"$prefix"}]=$pid
        fi
    done < <(grep -HzoE '^AR_CLUSTER_NODE=.*' /proc/[0-9]*/environ 2>/dev/null || true)
}

# slurmd_procs NODE: PROCS = NODE's live slurmd.
slurmd_procs() {
    live_slurmds
    PROCS=()
    [[ -z ${SLURMD_PID[$1]:-} ]] || PROCS=("${SLURMD_PID[$1]}")
}

# signal_until_gone SIG LISTER [ARG]: send SIG to the PROCS that LISTER finds
# until two scans 0.2 s apart find none (a slurmstepd forked just before its
# slurmd died may not hold its log open yet); fail after STOP_DEADLINE seconds.
signal_until_gone() {
    local sig=$1 deadline=$((SECONDS + STOP_DEADLINE)) empty=0 p
    local -A signalled=()
    shift
    while ((empty < 2)); do
        "$@"
        if ((${#PROCS[@]} == 0)); then
            ((++empty < 2)) && nap 0.2
            continue
        fi
        empty=0
        ((SECONDS <= deadline)) || die "still alive after ${STOP_DEADLINE}s: ${PROCS[*]}"
        kill "-$sig" "${PROCS[@]}" 2>/dev/null || true
        for p in "${PROCS[@]}"; do signalled[$p]=1; done
        nap 0.1
    done
    await_gone "${!signalled[@]}"
}

# await_gone PID...: wait until each PID is a zombie or gone, at most
# STOP_DEADLINE seconds. A process on its way out no longer shows its
# environment (the marker the lookups find it by) before it is gone.
await_gone() {
    await_gone_by $((SECONDS + STOP_DEADLINE)) "$@" || die "still alive after ${STOP_DEADLINE}s: $*"
}
# await_gone_by DEADLINE PID...: the same until SECONDS reaches DEADLINE;
# fails then.
await_gone_by() {
    local deadline=$1 p
    shift
    for p in "$@"; do
        while alive "$p"; do
            ((SECONDS <= deadline)) || return 1
            nap 0.05
        done
    done
}
