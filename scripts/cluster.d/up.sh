# shellcheck shell=bash
# up: its help, its options and its steps (cmd_up: the options parsed and
# checked, DIR cleared, the settings and configuration written, the daemons
# started), and the start of the accounting, the controller and the agents.

# up's options that take a value (the next argument, or after '='):
# show_help passes over their values, up_options checks they have one.
UP_VALUED=" --nodes --plugin --plugin-line --plugstack-arg --conf-line --daemon-env --slurmd-timeout \
--message-timeout --timeout --gpus --cred-expire --controller-conf --controller-bin --agent-bin --cli-bin "

help_up() {
    cat <<EOF
Usage: $PROG up DIR [OPTIONS]

Start munged, slurmctld and N slurmd (and slurmdbd, auto-resumed, the
agents, as asked); return when every node is idle (and the controller
answers and hears every agent). Fails (exit 1) if DIR's cluster is
already running; a stopped DIR is wiped and started afresh.

Options:
  --nodes N              number of nodes node1..nodeN (1-$MAX_NODES, default 4)
  --plugin PATH          SPANK plugin for plugstack.conf ('required PATH ARGS')
                         (default: $DEFAULT_PLUGIN)
  --plugin-line MODE     'required' (default) or 'optional': how the plugin
                         line starts (Slurm ignores an optional plugin's
                         failing hooks)
  --no-plugin            empty plugstack.conf
  --plugstack-arg K=V    argument for the plugin line (repeatable)
  --conf-line 'LINE'     line appended verbatim to slurm.conf (repeatable;
                         later lines override earlier keys)
  --slurmd-timeout S     SlurmdTimeout (default 10)
  --message-timeout S    MessageTimeout (default 10)
  --timeout S            deadline for the whole start, until all nodes are
                         idle (default 60)
  --daemon-env K=V       extra environment variable for munged, slurmctld
                         and slurmd, kept by restart-node (repeatable; e.g.
                         LD_PRELOAD for a sanitizer-instrumented plugin;
                         not given to slurmdbd and mariadbd, which load no
                         plugin)
  --accounting           also start slurmdbd with a MariaDB of its own
                         (DIR/db/), register the cluster (with account and
                         user root) and point slurmctld at it: jobs show in
                         sacct, and a job can be resized more than once
                         (without slurmdbd, Slurm 22.05 refuses every update
                         after a resize: "the DB index is being set")
  --gpus N               N fake GPUs per node (0-$MAX_GPUS, default 0): character
                         devices DIR/dev/NODE/nvidia0.. (like /dev/null),
                         GresTypes=gpu, Gres=gpu:N on every node, and
                         DIR/etc/gres.conf; --gres=gpu:K steps get
                         CUDA_VISIBLE_DEVICES
  --cred-expire S        cred_expire in AuthInfo ($MIN_CRED_EXPIRE-$MAX_CRED_EXPIRE, default:
                         Slurm's 120); a requeued job may run again S+1
                         seconds after its requeue, at the scheduler's next
                         pass (to make that prompt: --conf-line
                         SchedulerParameters=permit_job_expansion,sched_interval=1)
  These options write AuthInfo, GresTypes and AccountingStorage*; a
  --conf-line setting a key that a given option writes is refused.
  --controller           also start the controller, auto-resumed, once the
                         nodes are idle: provider local (a failed node is
                         replaced by 'restart-node DIR NODE --kill', a
                         reboot), listening on 127.0.0.1 on a free port of
                         its own, config DIR/etc/auto-resumed.conf, state
                         in DIR/controller/, log DIR/log/auto-resumed.log;
                         the plugin line gets controller=127.0.0.1:PORT and
                         munge_socket=DIR/munge/munge.sock (so a
                         --plugstack-arg setting either is refused). Returns
                         once it answers ('auto-resume hello'); 'env'
                         then exports AUTO_RESUME_CONTROLLER and
                         AUTO_RESUME_MUNGE_SOCKET for the CLI. Its
                         environment has AR_LOCAL_CLUSTER=DIR, for
                         provision_command=scripts/local-provider
  --controller-conf 'LINE'
                         line appended to the controller's config
                         (repeatable; a key set twice is refused, so no
                         listen, state_dir, munge_socket, provider or
                         local_restart_command); the config is checked
                         (auto-resumed --check-config) before anything
                         starts
  --agents               also start a node agent per node
                         (auto-resume-agent --node NODE --interval 1, log
                         DIR/log/agent-NODE.log) once the controller
                         answers; returns when the controller has heard
                         every node. An agent carries its node's marker:
                         kill-node and freeze-node take it down with the
                         node, restart-node starts it again if it is gone
                         (as a rebooted host's service manager would).
                         Needs --controller
  --controller-bin PATH  the auto-resumed to run
                         (default: $DEFAULT_CONTROLLER)
  --agent-bin PATH       the auto-resume-agent to run
                         (default: $DEFAULT_AGENT)
  --cli-bin PATH         the auto-resume that checks the controller answers
                         and hears the agents (default: $DEFAULT_CLI)
EOF
}

cmd_up() {
    # The options: the steps below read and set them (bash's dynamic scope).
    local nodes=4 plugin='' no_plugin='' timeout=60 dir='' gpus=0 cred_expire='' plugin_line=required
    local controller=0 controller_bin='' agent_bin='' cli_bin=''
    local -a plug_args=()
    up_options "$@"
    up_check_options
    [[ -n $dir ]] || bad_usage "up: missing DIR"
    set_dir "$dir" create
    up_clear_dir
    up_write_settings
    up_write_conf

    # From here on a failure tears down what was started.
    trap 'rc=$?; ((rc == 0)) || { echo "$PROG: up failed, cleaning up" >&2; do_down >/dev/null 2>&1 || true; }' EXIT
    up_start_daemons $((SECONDS + timeout))
    trap - EXIT
    up_report
}

# up_options ARG...: up's arguments into cmd_up's locals and the settings'
# globals (CONF_LINES, DAEMON_ENV, SLURMD_TIMEOUT...); refuses an unknown
# option, a missing value and a value wrong in itself.
up_options() {
    local arg
    CONF_LINES=() DAEMON_ENV=() SLURMD_TIMEOUT=10 MESSAGE_TIMEOUT=10 ACCOUNTING=0
    CONTROLLER_CONF=() AGENTS=0 CONTROLLER_PORT='' CONTROLLER_BIN='' AGENT_BIN='' CLI_BIN=''
    while (($#)); do
        arg=$1
        shift
        if [[ $arg == --*=* ]]; then   # --option=value: as --option value
            case ${arg%%=*} in
                --no-plugin | --accounting | --controller | --agents) bad_usage "${arg%%=*} takes no value" ;;
            esac
            set -- "${arg#*=}" "$@"
            arg=${arg%%=*}
        fi
        if [[ $UP_VALUED == *" $arg "* ]]; then
            (($#)) || bad_usage "$arg needs a value"
        fi
        # shellcheck disable=SC2034 # SLURMD_TIMEOUT, MESSAGE_TIMEOUT: write_slurm_conf reads them
        case $arg in
            --nodes) nodes=$1; shift ;;
            --plugin) plugin=$1; shift ;;
            --no-plugin) no_plugin=1 ;;
            --plugin-line)
                [[ $1 == required || $1 == optional ]] || bad_usage "--plugin-line must be required or optional: '$1'"
                plugin_line=$1; shift ;;
            --plugstack-arg)
                [[ -n $1 && $1 != *[[:space:]]* ]] || bad_usage "bad --plugstack-arg (empty or with spaces): '$1'"
                plug_args+=("$1"); shift ;;
            --conf-line)
                [[ $1 != *$'\n'* ]] || bad_usage "--conf-line must be one line: '$1'"
                CONF_LINES+=("$1"); shift ;;
            --daemon-env)
                [[ $1 =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || bad_usage "--daemon-env takes NAME=VALUE: '$1'"
                DAEMON_ENV+=("$1"); shift ;;
            --slurmd-timeout) need_seconds "$arg" "$1"; SLURMD_TIMEOUT=$1; shift ;;
            --message-timeout) need_seconds "$arg" "$1"; MESSAGE_TIMEOUT=$1; shift ;;
            --timeout) need_seconds "$arg" "$1"; timeout=$1; shift ;;
            --accounting) ACCOUNTING=1 ;;
            --gpus) gpus=$1; shift ;;
            --cred-expire) cred_expire=$1; shift ;;
            --controller) controller=1 ;;
            --controller-conf)
                [[ $1 != *$'\n'* ]] || bad_usage "--controller-conf must be one line: '$1'"
                CONTROLLER_CONF+=("$1"); shift ;;
            --agents) AGENTS=1 ;;
            --controller-bin) [[ -n $1 ]] || bad_usage "--controller-bin: empty path"; controller_bin=$1; shift ;;
            --agent-bin) [[ -n $1 ]] || bad_usage "--agent-bin: empty path"; agent_bin=$1; shift ;;
            --cli-bin) [[ -n $1 ]] || bad_usage "--cli-bin: empty path"; cli_bin=$1; shift ;;
            -*) bad_usage "up: unknown option '$arg'" ;;
            *) [[ -z $dir ]] || bad_usage "up: unexpected argument '$arg'"; dir=$arg ;;
        esac
    done
}

# up_check_options: the options' values against each other, and the
# programs they need.
up_check_options() {
    if ! is_uint "$nodes" || ((10#$nodes < 1 || 10#$nodes > MAX_NODES)); then
        bad_usage "--nodes must be 1-$MAX_NODES: '$nodes'"
    fi
    NODES=$((10#$nodes))
    if ! is_uint "$gpus" || ((${#gpus} > 2 || 10#$gpus > MAX_GPUS)); then
        bad_usage "--gpus must be 0-$MAX_GPUS: '$gpus'"
    fi
    GPUS=$((10#$gpus)) CRED_EXPIRE=''
    if [[ -n $cred_expire ]]; then
        if ! is_uint "$cred_expire" || ((${#cred_expire} > 6 || 10#$cred_expire < MIN_CRED_EXPIRE ||
            10#$cred_expire > MAX_CRED_EXPIRE)); then
            bad_usage "--cred-expire must be $MIN_CRED_EXPIRE-$MAX_CRED_EXPIRE seconds: '$cred_expire'"
        fi
        CRED_EXPIRE=$((10#$cred_expire))
        check_conf_keys --cred-expire AuthInfo
    fi
    ((GPUS == 0)) || check_conf_keys --gpus GresTypes
    if ((ACCOUNTING)); then
        check_conf_keys --accounting AccountingStorageType AccountingStorageHost \
            AccountingStoragePort AccountingStoragePass
        local cmd
        for cmd in mariadb-install-db mariadbd slurmdbd sacctmgr; do
            command -v "$cmd" >/dev/null || die "--accounting needs $cmd (install the packages with scripts/bootstrap)"
        done
    fi
    [[ -z $plugin || -z $no_plugin ]] || bad_usage "--plugin and --no-plugin exclude each other"
    if [[ -n $no_plugin ]]; then
        ((${#plug_args[@]} == 0)) || bad_usage "--plugstack-arg needs a plugin, not --no-plugin"
        [[ $plugin_line == required ]] || bad_usage "--plugin-line needs a plugin, not --no-plugin"
    elif [[ -n $plugin ]]; then
        [[ -f $plugin ]] || bad_usage "--plugin: no such file: '$plugin'"
        plugin=$(realpath -- "$plugin")
    else
        [[ -f $DEFAULT_PLUGIN ]] ||
            bad_usage "no plugin at $DEFAULT_PLUGIN: build the project first, or pass --plugin PATH or --no-plugin"
        plugin=$DEFAULT_PLUGIN
    fi
    if ((controller)); then
        local kv
        for kv in "${plug_args[@]}"; do
            case ${kv%%=*} in
                controller | munge_socket | progress_dir)
                    bad_usage "--plugstack-arg '$kv' sets ${kv%%=*}, which --controller writes; leave out one of them" ;;
            esac
        done
        CONTROLLER_BIN=$(program --controller-bin "$controller_bin" "$DEFAULT_CONTROLLER")
        CLI_BIN=$(program --cli-bin "$cli_bin" "$DEFAULT_CLI")
        ((AGENTS == 0)) || AGENT_BIN=$(program --agent-bin "$agent_bin" "$DEFAULT_AGENT")
    else
        ((${#CONTROLLER_CONF[@]} == 0)) || bad_usage "--controller-conf needs --controller"
        ((AGENTS == 0)) || bad_usage "--agents needs --controller"
        [[ -z $controller_bin ]] || bad_usage "--controller-bin needs --controller"
        [[ -z $cli_bin ]] || bad_usage "--cli-bin needs --controller"
    fi
    [[ -z $agent_bin ]] || ((AGENTS)) || bad_usage "--agent-bin needs --agents"
}

# up_clear_dir: refuse a running cluster, and a DIR whose files are not
# ours; remove a stopped cluster's files.
up_clear_dir() {
    cluster_procs
    ((${#PROCS[@]} == 0)) ||
        die "the cluster in '$DIR' is already running (pids ${PROCS[*]}); run '$PROG down $DIR' first"
    local sub
    for sub in etc munge run log state spool db dev controller progress; do
        [[ -f $ENV_FILE || ! -e $DIR/$sub ]] ||
            die "'$DIR' holds $sub/ but no cluster.env: not a cluster directory, not touching it"
    done
    # faults.log too: a reused folder's old faults would count against this
    # cluster's nodes (test/integration/fault_counts.py).
    rm -rf -- "$ENV_FILE" "${DIR:?}"/{etc,munge,run,log,state,spool,db,dev,controller,progress,faults.log}
}

# up_write_settings: the cluster's name and ports, and DIR/cluster.env, the
# settings later commands read back.
up_write_settings() {
    CLUSTER_NAME=ar$(printf '%s' "$DIR" | sha1sum | cut -c1-8)
    local base
    base=$(pick_ports $((NODES + 1 + 2 * ACCOUNTING + controller)))
    # shellcheck disable=SC2034 # write_slurm_conf and restart_node read it
    CTLD_PORT=$base NODE_PORT_BASE=$base   # node I listens on NODE_PORT_BASE + I
    DBD_PORT='' DB_PORT=''
    if ((ACCOUNTING)); then
        DBD_PORT=$((base + NODES + 1)) DB_PORT=$((base + NODES + 2))
    fi
    # The controller's port is known before slurmd starts: the plugin line names it.
    ((controller == 0)) || CONTROLLER_PORT=$((base + NODES + 1 + 2 * ACCOUNTING))
    local var
    {
        for var in DIR NODES CLUSTER_NAME CTLD_PORT NODE_PORT_BASE ACCOUNTING DBD_PORT DB_PORT GPUS CRED_EXPIRE \
            CONTROLLER_PORT AGENTS CONTROLLER_BIN AGENT_BIN CLI_BIN; do
            printf '%s=%q\n' "$var" "${!var}"
        done
        printf 'SLURM_CONF=%q\n' "$CONF"
        printf 'DAEMON_ENV=('
        ((${#DAEMON_ENV[@]} == 0)) || printf '%q ' "${DAEMON_ENV[@]}"
        printf ')\n'
    } >"$ENV_FILE"
}

# up_write_conf: DIR's folders, slurm.conf, the fake GPUs, the controller's
# config (checked) and plugstack.conf.
up_write_conf() {
    mkdir -p "$DIR"/{etc,munge,run,log,state}
    local i
    for ((i = 1; i <= NODES; i++)); do mkdir -p "$DIR/spool/node$i"; done
    write_slurm_conf >"$CONF"
    ((GPUS == 0)) || make_gpus
    if ((controller)); then
        plug_args+=("controller=127.0.0.1:$CONTROLLER_PORT" "munge_socket=$DIR/munge/munge.sock"
            "progress_dir=$DIR/progress")
        write_controller_conf >"$DIR/etc/auto-resumed.conf"
        # A bad --controller-conf line fails here, before anything starts.
        "$CONTROLLER_BIN" --check-config --config "$DIR/etc/auto-resumed.conf" >"$DIR/log/auto-resumed-check.out" 2>&1 ||
            fail_daemon "auto-resumed refuses its config $DIR/etc/auto-resumed.conf" "$DIR/log/auto-resumed-check.out"
    fi
    if [[ -n $no_plugin ]]; then
        : >"$DIR/etc/plugstack.conf"
    else
        echo "$plugin_line $plugin${plug_args[*]:+ ${plug_args[*]}}" >"$DIR/etc/plugstack.conf"
    fi
}

# up_start_daemons DEADLINE: munged, the accounting, slurmctld and the
# slurmds, until every node is idle; then the controller and the agents.
up_start_daemons() {
    # munged with its own key; the socket's folder must be world-executable.
    local m=$DIR/munge deadline=$1 i
    chmod 0755 "$m"
    mungekey --create --keyfile="$m/munge.key" 2>"$m/mungekey.err" ||
        fail_daemon "mungekey failed" "$m/mungekey.err"
    chmod 0400 "$m/munge.key"
    start_daemon "$deadline" munged "$DIR/log/munged.out" munged --force \
        --key-file="$m/munge.key" --socket="$m/munge.sock" --seed-file="$m/munged.seed" \
        --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log"
    until [[ -S $m/munge.sock ]]; do
        ((SECONDS <= deadline)) || fail_daemon "munged socket did not appear" "$DIR/log/munged.log"
        nap 0.05
    done

    ((ACCOUNTING == 0)) || start_accounting "$deadline"
    start_daemon "$deadline" slurmctld "$DIR/log/slurmctld.out" slurmctld -f "$CONF"
    wait_listening "$deadline" "$CTLD_PORT" slurmctld "$DIR/log/slurmctld.log"

    local -a all=()
    for ((i = 1; i <= NODES; i++)); do
        start_slurmd "node$i" "$deadline"
        all+=("node$i")
    done
    wait_nodes "$deadline" '^idle$' "${all[@]}"
    if ((controller)); then
        start_controller "$deadline" "$timeout"
        if ((AGENTS)); then
            local node
            for node in "${all[@]}"; do start_agent "$node"; done
            wait_agents "$deadline" "${all[@]}"
        fi
    fi
}

# up_report: what up started, and the shell lines a client needs.
up_report() {
    local extras=''
    ((ACCOUNTING == 0)) || extras+=", slurmdbd port $DBD_PORT, MariaDB port $DB_PORT"
    ((GPUS == 0)) || extras+=", $GPUS GPUs per node"
    [[ -z $CRED_EXPIRE ]] || extras+=", cred_expire $CRED_EXPIRE s"
    ((controller == 0)) || extras+=", auto-resumed on 127.0.0.1:$CONTROLLER_PORT"
    ((AGENTS == 0)) || extras+=", which hears every node's agent"
    echo "cluster $CLUSTER_NAME up in $DIR: $NODES nodes idle (slurmctld port $CTLD_PORT$extras)"
    print_env
}

# program OPTION PATH DEFAULT: the absolute path of the executable PATH given
# with OPTION, or DEFAULT if PATH is empty; bad usage if it is not there.
program() {
    local option=$1 path=$2 default=$3
    if [[ -z $path ]]; then
        [[ -x $default ]] ||
            bad_usage "no ${default##*/} at $default: build the project first, or pass $option PATH"
        path=$default
    fi
    [[ -f $path && -x $path ]] || bad_usage "$option: no such executable file: '$path'"
    realpath -- "$path"
}

# start_accounting DEADLINE: a MariaDB of this cluster's own under DIR/db
# (TCP on 127.0.0.1:DB_PORT, user slurm with a random password), slurmdbd on
# DBD_PORT using it, and the cluster registered (which adds account and user
# root). Before slurmctld, which registers with slurmdbd when it starts.
start_accounting() {
    local deadline=$1 db=$DIR/db user pass
    user=$(id -un)
    pass=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
    write_accounting_conf "$user" "$pass"
    start_plain_daemon "$deadline" "mariadb-install-db" "$DIR/log/mariadb-install.out" \
        mariadb-install-db --defaults-file="$db/my.cnf" --skip-test-db
    start_plain_daemon "$deadline" mariadbd "$DIR/log/mariadbd.out" \
        setsid -f mariadbd --defaults-file="$db/my.cnf"
    wait_listening "$deadline" "$DB_PORT" mariadbd "$DIR/log/mariadbd.log"
    start_plain_daemon "$deadline" slurmdbd "$DIR/log/slurmdbd.out" slurmdbd
    wait_listening "$deadline" "$DBD_PORT" slurmdbd "$DIR/log/slurmdbd.log"

    # Register the cluster; a call may fail while slurmdbd is still settling.
    local out=$DIR/log/sacctmgr.out
    until sacctmgr_run -i add cluster "$CLUSTER_NAME" >>"$out" 2>&1 ||
        [[ $(sacctmgr_run -n -P show cluster "$CLUSTER_NAME" format=cluster 2>>"$out") == "$CLUSTER_NAME" ]]; do
        ! missing marked_daemon "$MARKER" slurmdbd ||
            fail_daemon "slurmdbd died" "$DIR/log/slurmdbd.out" "$DIR/log/slurmdbd.log"
        ((SECONDS <= deadline)) || fail_daemon "could not register cluster $CLUSTER_NAME with slurmdbd in time" "$out" "$DIR/log/slurmdbd.log"
        nap 0.2
    done
}

# sacctmgr_run ARGS...: sacctmgr of this cluster, in a clean environment.
sacctmgr_run() {
    env -i "PATH=$PATH" "SLURM_CONF=$CONF" timeout 10 sacctmgr "$@" </dev/null
}

# cli ARGS...: the CLI (CLI_BIN) asking this cluster's controller.
cli() {
    "$CLI_BIN" --controller "127.0.0.1:$CONTROLLER_PORT" --munge-socket "$DIR/munge/munge.sock" \
        --timeout 2 "$@"
}

# start_controller DEADLINE TIMEOUT: start auto-resumed and wait until it
# answers `auto-resume hello`, until DEADLINE (up's --timeout TIMEOUT); on
# failure say why and show its log.
start_controller() {
    local deadline=$1 timeout=$2 log=$DIR/log/auto-resumed.log since=$SECONDS pid
    # AR_LOCAL_CLUSTER: for scripts/local-provider, the provision_command of
    # continuous provisioning on this cluster (docs/provisioning.md).
    start_service auto-resumed "$log" "AR_LOCAL_CLUSTER=$DIR" "$CONTROLLER_BIN" --config "$DIR/etc/auto-resumed.conf"
    pid=$(<"$DIR/run/auto-resumed.pid")
    until cli hello >"$DIR/log/auto-resumed-hello.out" 2>&1; do
        alive "$pid" || fail_daemon "auto-resumed (pid $pid) exited" "$log"
        ((SECONDS <= deadline)) ||
            fail_daemon "auto-resumed (pid $pid) did not answer on 127.0.0.1:$CONTROLLER_PORT within $((SECONDS - since)) s (--timeout $timeout s for the whole up)" \
                "$DIR/log/auto-resumed-hello.out" "$log"
        nap 0.1
    done
}

# start_agent NODE: start NODE's agent, with NODE's marker.
start_agent() {
    start_service "auto-resume-agent-$1" "$DIR/log/agent-$1.log" "AR_CLUSTER_NODE=$DIR:$1" \
        "$AGENT_BIN" --controller "127.0.0.1:$CONTROLLER_PORT" \
        --munge-socket "$DIR/munge/munge.sock" --node "$1" --interval 1 \
        --progress-dir "$DIR/progress"
}

# heard_nodes: the nodes whose agent's heartbeat the controller has, one a
# line (from `auto-resume nodes`: "NODE: last heartbeat S s ago").
heard_nodes() {
    local out
    out=$(cli nodes 2>/dev/null) || return 0
    sed -n 's/^\([^ :]*\): last heartbeat .* s ago$/\1/p' <<<"$out"
}

# wait_agents DEADLINE NODE...: wait until the controller has heard every
# NODE's agent; fail if one exits or at DEADLINE.
wait_agents() {
    local deadline=$1 since=$SECONDS node heard pid
    shift
    while :; do
        heard=" $(heard_nodes | tr '\n' ' ') "
        local -a pending=()
        for node in "$@"; do
            [[ $heard == *" $node "* ]] && continue
            pending+=("$node")
            pid=$(<"$DIR/run/auto-resume-agent-$node.pid")
            alive "$pid" || fail_daemon "the agent of $node (pid $pid) exited" "$DIR/log/agent-$node.log"
        done
        ((${#pending[@]})) || return 0
        if ((SECONDS > deadline)); then
            printf '%s: auto-resumed heard no heartbeat within %s s from: %s\n' \
                "$PROG" "$((SECONDS - since))" "${pending[*]}" >&2
            for node in "${pending[@]}"; do log_tail "$DIR/log/agent-$node.log"; done
            log_tail "$DIR/log/auto-resumed.log"
            exit 1
        fi
        nap 0.2
    done
}
