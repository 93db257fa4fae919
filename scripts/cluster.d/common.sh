# shellcheck shell=bash
# scripts/cluster's helpers for every command: pausing, failing, checking
# arguments (--help included), the cluster's directory and settings, and
# the record of injected faults.

# nap SECONDS: a pause without a process (read -t on a pipe no one writes
# to): the commands' waits poll often, and a fork and exec each time is CPU
# taken from the cluster's own daemons.
exec {NAP_FD}<> <(:)
nap() { read -rt "$1" -u "$NAP_FD" || true; }

die() { printf '%s: %s\n' "$PROG" "$*" >&2; exit 1; }
bad_usage() {
    printf '%s: %s\n' "$PROG" "$*" >&2
    printf "Try '%s --help'.\n" "$PROG" >&2
    exit 2
}
is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }
need_seconds() {
    if ! is_uint "$2" || ((10#$2 == 0)); then
        bad_usage "$1: not a positive number of seconds: '$2'"
    fi
}

# command_options COMMAND FLAGS [ARG]...: the options of a command that
# takes --timeout S (or --timeout=S) and the FLAGS listed (" --wait --kill ",
# or " "): OPT_TIMEOUT (60 unless given), OPT_WAIT and OPT_KILL (1 when
# given, else empty). Another argument is bad usage, named.
# shellcheck disable=SC2034 # OPT_*: read by the commands' modules
command_options() {
    local cmd=$1 flags=$2 arg
    shift 2
    OPT_TIMEOUT=60 OPT_WAIT='' OPT_KILL=''
    while (($#)); do
        arg=$1
        shift
        case $arg in
            --timeout=*) need_seconds --timeout "${arg#*=}"; OPT_TIMEOUT=${arg#*=} ;;
            --timeout) (($#)) || bad_usage "--timeout needs a value"
                need_seconds --timeout "$1"; OPT_TIMEOUT=$1; shift ;;
            --wait | --kill)
                [[ $flags == *" $arg "* ]] || bad_usage "$cmd: unknown argument '$arg'"
                if [[ $arg == --wait ]]; then OPT_WAIT=1; else OPT_KILL=1; fi ;;
            *) bad_usage "$cmd: unknown argument '$arg'" ;;
        esac
    done
}

# show_help COMMAND [ARG]...: if an ARG asks for help (-h or --help where an
# option may stand, not as the value of one: `up --conf-line --help` names a
# conf line), print COMMAND's help (help_COMMAND, - as _) and succeed; fail
# otherwise, and for a COMMAND without one (no such command: main says so).
# main asks it first, before checking a command's arguments.
show_help() {
    local help=help_${1//-/_} valued=' --timeout ' arg value=0
    shift
    [[ $(type -t "$help") == function ]] || return 1
    [[ $help != help_up ]] || valued=$UP_VALUED
    for arg; do
        if ((value)); then
            value=0
        elif [[ $arg == -h || $arg == --help ]]; then
            "$help"
            return 0
        elif [[ $valued == *" $arg "* ]]; then
            value=1
        fi
    done
    return 1
}

# ---------------------------------------------------------------- directory

dir_length_ok() {
    ((${#1} <= MAX_DIR_LEN)) ||
        bad_usage "DIR path too long (${#1} > $MAX_DIR_LEN characters; Unix socket paths under it would not fit): '$1'"
}

# set_dir DIR [create]: make DIR absolute (creating it if asked) and set paths.
set_dir() {
    local dir=$1
    [[ -n $dir ]] || bad_usage "missing DIR"
    [[ $dir =~ ^[A-Za-z0-9_./+@-]+$ ]] || bad_usage "DIR may only contain letters, digits and _./+@-: '$dir'"
    [[ $dir == /* ]] || dir=$PWD/$dir
    dir_length_ok "$dir"
    if [[ ${2:-} == create ]]; then
        mkdir -p -- "$dir" || die "cannot create DIR '$dir'"
    fi
    [[ -d $dir ]] || die "no such directory: '$dir'"
    DIR=$(cd -- "$dir" && pwd -P)
    [[ $DIR != / ]] || bad_usage "DIR must not be /"
    dir_length_ok "$DIR"
    ENV_FILE=$DIR/cluster.env
    # shellcheck disable=SC2034 # the other modules read them
    CONF=$DIR/etc/slurm.conf MARKER=AR_CLUSTER=$DIR
}

# load_env: read the settings `up` recorded (NODES, CLUSTER_NAME, ports).
load_env() {
    [[ -f $ENV_FILE ]] || die "no cluster in '$DIR' (missing $ENV_FILE; run '$PROG up' first)"
    # shellcheck disable=SC2034 # the other modules read them
    DAEMON_ENV=() CONTROLLER_PORT='' AGENTS=0 CONTROLLER_BIN='' AGENT_BIN='' CLI_BIN=''
    # shellcheck source=/dev/null
    source "$ENV_FILE"
}

check_node() {
    if ! [[ $1 =~ ^node([1-9][0-9]*)$ ]] || ((BASH_REMATCH[1] > NODES)); then
        bad_usage "no node '$1' in this cluster (node1..node$NODES)"
    fi
}

# record_fault COMMAND TARGET: note an injected fault or recovery for the
# tests' fault counts (test/integration/fault_counts.py): EPOCH COMMAND TARGET,
# EPOCH to the millisecond (a fault and a decision in one second are told apart).
record_fault() {
    printf '%s %s %s\n' "$(date +%s.%3N)" "$1" "$2" >>"$DIR/faults.log"
}

