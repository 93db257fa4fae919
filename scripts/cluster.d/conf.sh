# shellcheck shell=bash
# The cluster's configuration, written by up: its ports (picked and
# reserved machine-wide), slurm.conf, the fake GPUs and gres.conf, the
# controller's config, and the accounting's files (MariaDB, slurmdbd.conf).

# Ports handed out are reserved machine-wide for PORT_LEASE seconds in
# PORT_REGISTRY (lines "PORT EXPIRY", under a lock): a port picked now is
# often bound only later (a slot's slurmd starts when its node is created,
# minutes after), and another cluster's pick in between must not take it.
PORT_REGISTRY=${AR_PORT_REGISTRY:-/tmp/auto-resume-ports}
PORT_LEASE=3600

# pick_ports COUNT: print the first of COUNT consecutive TCP ports, chosen at
# random below the ephemeral range, that nobody uses now and no pick of the
# last PORT_LEASE seconds reserved; reserve them.
pick_ports() {
    local count=$1 lo=10000 hi base try p used now kept='' port expiry lock=''
    read -r hi _ </proc/sys/net/ipv4/ip_local_port_range   # ephemeral ports start here
    # Shared by every user's clusters; one that cannot be written (another
    # user's, a read-only /tmp) is left alone: the pick goes on without it.
    [[ -d $PORT_REGISTRY ]] || mkdir -m 1777 "$PORT_REGISTRY" 2>/dev/null || true
    (umask 0; touch "$PORT_REGISTRY/lock" "$PORT_REGISTRY/leases") 2>/dev/null || true
    if [[ -w $PORT_REGISTRY/lock && -w $PORT_REGISTRY/leases ]]; then
        exec {lock}>>"$PORT_REGISTRY/lock"
        flock "$lock"
    else
        echo "$PROG: warning: cannot use the port reservations in $PORT_REGISTRY: ports picked without them" >&2
    fi
    now=$(date +%s)
    used=" $(ss -Htan | awk '{ sub(/.*:/, "", $4); print $4 }' | sort -u | tr '\n' ' ') "
    if [[ -n $lock ]]; then
        while read -r port expiry; do
            [[ $port =~ ^[0-9]+$ && $expiry =~ ^[0-9]+$ ]] || continue
            ((expiry > now)) || continue
            used+="$port "
            kept+="$port $expiry"$'\n'
        done <"$PORT_REGISTRY/leases"
    fi
    for ((try = 0; try < 100; try++)); do
        base=$((lo + (RANDOM * 32768 + RANDOM) % (hi - lo - count)))
        for ((p = base; p < base + count; p++)); do
            [[ $used == *" $p "* ]] && continue 2
        done
        if [[ -n $lock ]]; then
            for ((p = base; p < base + count; p++)); do
                kept+="$p $((now + PORT_LEASE))"$'\n'
            done
            # Rewritten in place, under the lock (every user's picks write it).
            printf '%s' "$kept" >"$PORT_REGISTRY/leases" ||
                echo "$PROG: warning: cannot write $PORT_REGISTRY/leases: ports $base-$((base + count - 1)) not reserved" >&2
            exec {lock}>&-
        fi
        echo "$base"
        return
    done
    [[ -z $lock ]] || exec {lock}>&-
    die "no $count consecutive free TCP ports found in $lo-$hi"
}

# write_slurm_conf: DIR/etc/slurm.conf for up's settings and --conf-line lines.
write_slurm_conf() {
    local host i gres=''
    host=$(hostname -s)
    ((GPUS == 0)) || gres=" Gres=gpu:$GPUS"
    cat <<EOF
# Written by scripts/cluster up; regenerated on every up.
ClusterName=$CLUSTER_NAME
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.sock${CRED_EXPIRE:+,cred_expire=$CRED_EXPIRE}
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
SlurmctldDebug=info
MailProg=/bin/true
SlurmdDebug=info
PlugStackConfig=$DIR/etc/plugstack.conf
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
EOF
    if ((ACCOUNTING)); then
        cat <<EOF
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
AccountingStoragePass=$DIR/munge/munge.sock
EOF
    else
        echo "AccountingStorageType=accounting_storage/none"
    fi
    ((GPUS == 0)) || echo "GresTypes=gpu"
    cat <<EOF
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
SwitchType=switch/none
SchedulerParameters=permit_job_expansion
SlurmdParameters=config_overrides
ReturnToService=1
SlurmdTimeout=$SLURMD_TIMEOUT
MessageTimeout=$MESSAGE_TIMEOUT
EOF
    for ((i = 1; i <= NODES; i++)); do
        echo "NodeName=node$i NodeHostname=$host NodeAddr=127.0.0.$((10 + i)) Port=$((NODE_PORT_BASE + i)) CPUs=2$gres State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=node[1-$NODES] Default=YES MaxTime=INFINITE State=UP"
    if ((${#CONF_LINES[@]})); then
        echo "# --conf-line"
        printf '%s\n' "${CONF_LINES[@]}"
    fi
}

# make_gpus: GPUS fake GPU devices per node under DIR/dev/NODE/, and gres.conf.
make_gpus() {
    local major minor i k files
    read -r major minor < <(stat -c '%t %T' /dev/null)   # hexadecimal
    echo "# Written by scripts/cluster up --gpus $GPUS." >"$DIR/etc/gres.conf"
    echo "AutoDetect=off" >>"$DIR/etc/gres.conf"
    for ((i = 1; i <= NODES; i++)); do
        mkdir -p "$DIR/dev/node$i"
        for ((k = 0; k < GPUS; k++)); do
            mknod -m 0666 "$DIR/dev/node$i/nvidia$k" c $((16#$major)) $((16#$minor)) ||
                die "cannot create the fake GPU device $DIR/dev/node$i/nvidia$k (mknod needs CAP_MKNOD)"
        done
        files=nvidia0
        ((GPUS == 1)) || files="nvidia[0-$((GPUS - 1))]"
        echo "NodeName=node$i Name=gpu File=$DIR/dev/node$i/$files" >>"$DIR/etc/gres.conf"
    done
}

# write_controller_conf: auto-resumed's config for this cluster, then the
# --controller-conf lines.
write_controller_conf() {
    cat <<EOF
# Written by scripts/cluster up --controller; regenerated on every up.
provider=local
listen=127.0.0.1:$CONTROLLER_PORT
state_dir=$DIR/controller
munge_socket=$DIR/munge/munge.sock
# The local provider replaces a failed node by rebooting it: its slurmd (and
# agent) come back as a new instance under the same name.
local_restart_command=$SELF restart-node $DIR {node} --kill
EOF
    if ((${#CONTROLLER_CONF[@]})); then
        echo "# --controller-conf"
        printf '%s\n' "${CONTROLLER_CONF[@]}"
    fi
}

# write_accounting_conf USER PASS: the files of the cluster's MariaDB
# (DIR/db/my.cnf, run as USER; init.sql, which gives user slurm the password
# PASS) and DIR/etc/slurmdbd.conf, readable by their owner only.
write_accounting_conf() {
    local db=$DIR/db user=$1 pass=$2
    mkdir -p "$db" "$db/tmp"
    (
        umask 077
        # Only this file is read (--defaults-file), never /etc/mysql. Durability
        # does not matter here: a cluster's database lives as long as it does.
        cat >"$db/my.cnf" <<EOF
[mysqld]
user=$user
datadir=$db/data
socket=$db/mariadbd.sock
port=$DB_PORT
bind-address=127.0.0.1
skip-name-resolve
pid-file=$DIR/run/mariadbd.pid
log-error=$DIR/log/mariadbd.log
init-file=$db/init.sql
innodb_buffer_pool_size=32M
innodb_log_file_size=16M
innodb_flush_log_at_trx_commit=0
innodb_doublewrite=0
# Its own temporary files too: with several clusters at once, a bootstrap
# whose temporary table vanished from /tmp aborted.
tmpdir=$db/tmp
[client]
socket=$db/mariadbd.sock
EOF
        cat >"$db/init.sql" <<EOF
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
EOF
        # slurmdbd has no -f: it reads slurmdbd.conf (mode 600) next to
        # SLURM_CONF. It refuses a CredType line.
        cat >"$DIR/etc/slurmdbd.conf" <<EOF
# Written by scripts/cluster up --accounting.
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.sock
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=$user
DebugLevel=info
LogFile=$DIR/log/slurmdbd.log
PidFile=$DIR/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$pass
StorageLoc=slurm_acct_db
EOF
    )
}

# check_conf_keys OPTION KEY...: refuse a --conf-line that sets one of KEYs
# (Slurm's keys are case-insensitive), which OPTION writes itself.
check_conf_keys() {
    local option=$1 line key want
    shift
    for line in "${CONF_LINES[@]}"; do
        key=${line%%=*} key=${key//[[:space:]]/}
        for want in "$@"; do
            [[ ${key,,} != "${want,,}" ]] ||
                bad_usage "--conf-line '$line' sets $want, which $option writes; leave out one of them"
        done
    done
}
