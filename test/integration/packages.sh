#!/usr/bin/env bash
# The Debian packages (cmake/Packaging.cmake) as an admin gets them: cpack
# builds the four from the build tree; each holds its files, conffiles and
# dependencies (the plugin's on this Slurm's major.minor release, read from
# the installed Slurm), every dependency is met on this Debian 12 machine,
# and lintian finds no error or warning. dpkg installs them into a scratch
# root (--root: nothing lands on this machine), where the shipped
# auto-resumed.conf passes --check-config as it is. Then the daemons run from
# that root the way their units' ExecStart lines say (the config edited for
# this test's cluster, as an admin edits it), the cluster's plugstack.conf
# only includes the root's plugstack.conf.d, whose shipped line is
# uncommented, and a protected step that loses a node is resumed in place
# through the installed plugin, controller and CLI.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

: "${AR_BUILD_DIR:?set AR_BUILD_DIR to the build tree cpack packages}"
: "${AR_VERSION:?set AR_VERSION to the project version}"
: "${AR_SLURM_PLUGIN_DIR:?set AR_SLURM_PLUGIN_DIR to SLURM_PLUGIN_DIR}"
: "${AR_DEB_UNIT_DIR:?set AR_DEB_UNIT_DIR to the systemd unit folder of the packages}"
: "${AR_DEB_SLURM_PACKAGE?set AR_DEB_SLURM_PACKAGE to the Debian package of Slurm (may be empty)}"
for tool in cpack dpkg dpkg-deb dpkg-query dpkg-shlibdeps lintian; do
  command -v "$tool" >/dev/null ||
    fail "$tool is missing: the package test needs it (scripts/bootstrap installs cmake, dpkg-dev and lintian)"
done
plugin_dir=$AR_SLURM_PLUGIN_DIR unit_dir=$AR_DEB_UNIT_DIR
arch=$(dpkg --print-architecture)

# 1. The packages.
cpack -G DEB --config "$AR_BUILD_DIR/CPackConfig.cmake" -B "$WORK/cpack" >"$WORK/cpack.log" 2>&1 ||
  fail "cpack failed: $(tail -n 30 "$WORK/cpack.log")"
declare -A deb
for role in plugin controller node cli; do
  deb[$role]=$WORK/cpack/auto-resume-${role}_${AR_VERSION}_$arch.deb
  [[ -f ${deb[$role]} ]] || fail "cpack made no ${deb[$role]##*/}: $(ls "$WORK/cpack")"
done
note "cpack: ${deb[*]##*/}"

# contents ROLE: the package's files and links, as absolute paths.
contents() { dpkg-deb -c "${deb[$1]}" | awk '$1 !~ /^d/ {print substr($6, 2)}'; }
# has ROLE PATH...: the package holds each PATH.
has() {
  local role=$1 path listing
  shift
  listing=$(contents "$role")
  for path in "$@"; do
    grep -qxF -- "$path" <<<"$listing" || fail "auto-resume-$role lacks $path; it holds: $listing"
  done
}
has plugin "$plugin_dir/auto_resume.so" /etc/slurm/plugstack.conf.d/auto-resume.conf \
  /usr/share/man/man8/auto-resume-plugin.8.gz /usr/share/doc/slurm-auto-resume/examples/batch.sh
has controller /usr/sbin/auto-resumed /usr/sbin/auto-resume-submit "$unit_dir/auto-resumed.service" \
  /etc/slurm/auto-resumed.conf /usr/share/man/man8/auto-resumed.8.gz \
  /usr/share/man/man5/auto-resumed.conf.5.gz
has node /usr/sbin/auto-resume-agent /usr/sbin/auto-resume-healthcheck "$unit_dir/auto-resume-agent.service" \
  /etc/auto-resume/healthcheck.conf /etc/default/auto-resume-agent \
  /usr/share/man/man8/auto-resume-agent.8.gz /usr/share/man/man8/auto-resume-healthcheck.8.gz \
  /usr/share/man/man5/healthcheck.conf.5.gz
has cli /usr/bin/auto-resume /usr/share/man/man1/auto-resume.1.gz
declare -A own_unit=([plugin]=- [controller]=auto-resumed [node]=auto-resume-agent [cli]=-)
for role in plugin controller node cli; do
  has "$role" "/usr/share/doc/auto-resume-$role/copyright" "/usr/share/doc/auto-resume-$role/changelog.gz"
  # Nothing under the build's own prefix (/usr/local), no unit but its own.
  stray=$(contents "$role" | grep -E '^/usr/local/|\.service$' |
    grep -vxF -- "$unit_dir/${own_unit[$role]}.service" || true)
  [[ -z $stray ]] || fail "auto-resume-$role holds stray files: $stray"
done
dpkg-deb -c "${deb[controller]}" | grep -q ' \./var/lib/auto-resume/$' || fail "auto-resume-controller makes no /var/lib/auto-resume"

# Conffiles: the files under /etc, so that dpkg keeps an admin's edits.
conffiles() { dpkg-deb -I "${deb[$1]}" conffiles 2>/dev/null | sort | paste -sd' '; }
assert_eq "$(conffiles plugin)" "/etc/slurm/plugstack.conf.d/auto-resume.conf" "auto-resume-plugin's conffiles"
assert_eq "$(conffiles controller)" "/etc/slurm/auto-resumed.conf" "auto-resume-controller's conffiles"
assert_eq "$(conffiles node)" "/etc/auto-resume/healthcheck.conf /etc/default/auto-resume-agent" \
  "auto-resume-node's conffiles"

# Dependencies. The plugin's Slurm range: this machine's Slurm's major.minor
# (Slurm checks a SPANK plugin's release on those only), up to the next.
field() { dpkg-deb -f "${deb[$1]}" "$2"; }
for role in plugin controller node cli; do
  assert_eq "$(field "$role" Package)" "auto-resume-$role" "the package name"
  assert_eq "$(field "$role" Version)" "$AR_VERSION" "auto-resume-$role's version"
  [[ $(field "$role" Depends) == *libc6* ]] || fail "auto-resume-$role's Depends has no libc6 (dpkg-shlibdeps?): $(field "$role" Depends)"
done
if [[ -n $AR_DEB_SLURM_PACKAGE ]]; then
  slurm_version=$(dpkg-query -W -f '${Version}' "$AR_DEB_SLURM_PACKAGE") ||
    fail "$AR_DEB_SLURM_PACKAGE is not installed"
  [[ $slurm_version =~ ^([0-9]+)\.([0-9]+)\. ]] || fail "cannot read Slurm's release from '$slurm_version'"
  release=${BASH_REMATCH[1]}.${BASH_REMATCH[2]}
  next=$(printf '%s.%02d' "${BASH_REMATCH[1]}" $((10#${BASH_REMATCH[2]} + 1)))
  range="$AR_DEB_SLURM_PACKAGE (>= $release), $AR_DEB_SLURM_PACKAGE (<< $next~)"
  [[ $(field plugin Depends) == "$range, "* ]] ||
    fail "auto-resume-plugin depends on '$(field plugin Depends)', not on Slurm $release: '$range, ...'"
  note "auto-resume-plugin: Depends: $(field plugin Depends)"
fi
for role in controller node; do
  [[ $(field "$role" Depends) =~ (^|, )libslurm[0-9]+\  ]] ||
    fail "auto-resume-$role does not depend on libslurm: $(field "$role" Depends)"
done
# satisfied CLAUSE: one dependency ("pkg", "pkg (op version)"; alternatives
# with '|') is met by what this machine has installed.
satisfied() {
  local alternative name op version installed
  IFS='|' read -ra alternatives <<<"$1"
  for alternative in "${alternatives[@]}"; do
    [[ $alternative =~ ^\ *([a-z0-9.+-]+)(:[a-z0-9]+)?\ *(\((<<|<=|=|>=|>>)\ *([^\)]+)\))?\ *$ ]] ||
      fail "cannot read the dependency '$alternative'"
    name=${BASH_REMATCH[1]} op=${BASH_REMATCH[4]} version=${BASH_REMATCH[5]}
    installed=$(dpkg-query -W -f '${db:Status-Status} ${Version}' "$name" 2>/dev/null) || continue
    [[ $installed == "installed "* ]] || continue
    [[ -z $op ]] && return 0
    case $op in '<<') op=lt ;; '<=') op=le ;; '=') op=eq ;; '>=') op=ge ;; '>>') op=gt ;; esac
    dpkg --compare-versions "${installed#installed }" "$op" "$version" && return 0
  done
  return 1
}
for role in plugin controller node cli; do
  IFS=',' read -ra clauses <<<"$(field "$role" Depends)"
  for clause in "${clauses[@]}"; do
    satisfied "$clause" || fail "auto-resume-$role's dependency '$clause' is not met on this machine"
  done
done

# lintian: no error, no warning (cmake/Packaging.cmake says why each
# remaining informational tag stays).
lintian --fail-on error,warning "${deb[@]}" >"$WORK/lintian.txt" 2>&1 ||
  fail "lintian: $(cat "$WORK/lintian.txt")"
note "lintian: no error or warning"

# 2. Installed with dpkg into a scratch root (its own database).
ROOT=$WORK/root
mkdir -p "$ROOT/var/lib/dpkg/updates" "$ROOT/var/lib/dpkg/info"
touch "$ROOT/var/lib/dpkg/status" "$ROOT/var/lib/dpkg/available"
dpkg --root="$ROOT" --force-depends --force-not-root --install "${deb[@]}" >"$WORK/dpkg.log" 2>&1 ||
  fail "dpkg --install failed: $(cat "$WORK/dpkg.log")"
for role in plugin controller node cli; do
  assert_eq "$(dpkg-query --admindir="$ROOT/var/lib/dpkg" -W -f '${db:Status-Status}' "auto-resume-$role")" \
    installed "auto-resume-$role's state in the scratch root"
done
# The conffiles sit where the programs look by default.
"$ROOT/usr/sbin/auto-resumed" --help | grep -qF '/etc/slurm/auto-resumed.conf' ||
  fail "auto-resumed's default config is not /etc/slurm/auto-resumed.conf: $("$ROOT/usr/sbin/auto-resumed" --help)"
"$ROOT/usr/sbin/auto-resume-healthcheck" --help | grep -qF '/etc/auto-resume/healthcheck.conf' ||
  fail "auto-resume-healthcheck's default config is not /etc/auto-resume/healthcheck.conf"
# The shipped controller config passes as it is.
"$ROOT/usr/sbin/auto-resumed" --check-config --config "$ROOT/etc/slurm/auto-resumed.conf" \
  >"$WORK/check.out" 2>"$WORK/check.err" ||
  fail "the shipped auto-resumed.conf fails --check-config: $(cat "$WORK/check.err")"
[[ ! -s $WORK/check.err ]] || fail "the shipped auto-resumed.conf gets warnings: $(cat "$WORK/check.err")"
assert_contains "$WORK/check.out" '^mode=observe$' "the shipped config's effective settings"

# exec_start UNIT [PRE]: the unit's ExecStart (or ExecStartPre) line.
exec_start() {
  local line
  line=$(sed -n "s/^ExecStart${2:-}=//p" "$ROOT$unit_dir/$1.service")
  [[ -n $line ]] || fail "$1.service has no ExecStart${2:-} line"
  echo "$line"
}
# rooted WORDS...: WORDS with the program taken from the scratch root; it
# must be one the packages installed.
rooted() {
  [[ $1 == /* && -x $ROOT$1 ]] || fail "a unit starts '$1', which the packages do not install"
  printf '%s\n' "$ROOT$1" "${@:2}"
}

# 3. A cluster whose plugstack.conf includes the scratch root's
# plugstack.conf.d, where the shipped plugin line is uncommented with this
# test's controller (and munge socket).
AR_PLUGIN=$ROOT$plugin_dir/auto_resume.so
AR_CLI=$ROOT/usr/bin/auto-resume
cluster_up --nodes 3
CONTROLLER_PORT=$(free_port)
export AUTO_RESUME_CONTROLLER=127.0.0.1:$CONTROLLER_PORT
export AUTO_RESUME_MUNGE_SOCKET=$CLUSTER/munge/munge.sock
snippet=$ROOT/etc/slurm/plugstack.conf.d/auto-resume.conf
grep -qxE "#optional $plugin_dir/auto_resume\.so controller=[^ ]+" "$snippet" ||
  fail "the shipped plugstack line does not name $plugin_dir/auto_resume.so: $(cat "$snippet")"
sed -i "s|^#optional $plugin_dir/auto_resume\.so controller=[^ ]*\$|optional $AR_PLUGIN controller=$AUTO_RESUME_CONTROLLER munge_socket=$AUTO_RESUME_MUNGE_SOCKET|" "$snippet"
echo "include $ROOT/etc/slurm/plugstack.conf.d/*.conf" >"$CLUSTER/etc/plugstack.conf"

# The controller, as its unit starts it (ExecStartPre, then ExecStart), in
# systemd's clean environment; the config edited as an admin would (listen,
# mode=act) and for this test (state dir, munge socket). The scratch root's
# config is named with --config: the real /etc is not the root's.
conf=$ROOT/etc/slurm/auto-resumed.conf
sed -i -e "s|^#listen=.*|listen=$AUTO_RESUME_CONTROLLER|" -e 's|^mode=observe$|mode=act|' \
  -e "s|^#state_dir=.*|state_dir=$WORK/state|" -e "s|^#munge_socket=.*|munge_socket=$AUTO_RESUME_MUNGE_SOCKET|" "$conf"
for line in "listen=$AUTO_RESUME_CONTROLLER" mode=act "state_dir=$WORK/state"; do
  grep -qxF "$line" "$conf" || fail "could not set $line in the shipped config: $(cat "$conf")"
done
unit_env=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "SLURM_CONF=$SLURM_CONF")
# shellcheck disable=SC2046 # the unit's words, split as systemd splits them (no quotes in them)
mapfile -t pre < <(rooted $(exec_start auto-resumed Pre))
"${unit_env[@]}" "${pre[@]}" --config "$conf" >"$WORK/pre.out" 2>&1 ||
  fail "ExecStartPre (${pre[*]}) failed: $(cat "$WORK/pre.out")"
# shellcheck disable=SC2046
mapfile -t start < <(rooted $(exec_start auto-resumed))
setsid "${unit_env[@]}" "${start[@]}" --config "$conf" >>"$WORK/controller.log" 2>&1 &
CONTROLLER_PID=$!
# shellcheck disable=SC2016 # expanded when the test ends
on_exit 'kill -TERM "$CONTROLLER_PID" 2>/dev/null'
wait_until 20 "the installed auto-resumed to answer (log: $WORK/controller.log)" controller_answers
"$AR_CLI" hello >"$WORK/hello.out" || fail "auto-resume hello failed"
note "auto-resume hello: $(head -n 1 "$WORK/hello.out")"

# A node agent per node, as its unit starts it: its EnvironmentFile edited
# with the controller's address, --node since the nodes share this host,
# and the node's marker so that kill-node takes it down with the node.
agent_env=$ROOT/etc/default/auto-resume-agent
sed -i -e "s|^#AUTO_RESUME_CONTROLLER=.*|AUTO_RESUME_CONTROLLER=$AUTO_RESUME_CONTROLLER|" \
  -e "s|^#AUTO_RESUME_MUNGE_SOCKET=.*|AUTO_RESUME_MUNGE_SOCKET=$AUTO_RESUME_MUNGE_SOCKET|" "$agent_env"
grep -q "^EnvironmentFile=-/etc/default/auto-resume-agent$" "$ROOT$unit_dir/auto-resume-agent.service" ||
  fail "auto-resume-agent.service reads no /etc/default/auto-resume-agent"
mapfile -t agent_vars < <(grep -E '^[A-Z_]+=' "$agent_env")
((${#agent_vars[@]} == 2)) || fail "$agent_env sets ${#agent_vars[@]} variables, not 2: $(cat "$agent_env")"
# shellcheck disable=SC2046
mapfile -t agent < <(rooted $(exec_start auto-resume-agent))
for node in node1 node2 node3; do
  setsid "${unit_env[@]}" "${agent_vars[@]}" "AR_CLUSTER_NODE=$CLUSTER:$node" "${agent[@]}" --node "$node" \
    >>"$WORK/agent-$node.log" 2>&1 &
  AGENT_PID[$node]=$!
  on_exit "kill -TERM ${AGENT_PID[$node]} 2>/dev/null"
done
# heard_all: fresh heartbeats (the unit's --interval 2) from all 3 nodes.
heard_all() {
  [[ $("$AR_CLI" nodes 2>/dev/null | grep -cE ': last heartbeat [0-3]\.[0-9] s ago$') == 3 ]]
}
wait_until 20 "heartbeats from the 3 installed agents" heard_all

# The installed health check with the shipped healthcheck.conf (no GPU
# here: gpu is not applicable, nothing to mark).
"${unit_env[@]}" "$ROOT/usr/sbin/auto-resume-healthcheck" --config "$ROOT/etc/auto-resume/healthcheck.conf" \
  --node node1 --dry-run >"$WORK/health.out" 2>&1 ||
  fail "auto-resume-healthcheck with the shipped config: $(cat "$WORK/health.out")"

# 4. A protected step through the installed plugin loses node2 (not the
# batch host) and is resumed in place on node3.
cd "$WORK" || exit
make_training_step
make_training_job 40
job=$(sbatch --parsable -N2 -w 'node[1-2]' -o job.out job.sh)
wait_until 60 "attempt 0 on 2 nodes" started 0 2
wait_until 30 "attempt 0 to reach step 4" past 4
"$CLUSTER_CMD" kill-node "$CLUSTER" node2 >/dev/null
killed=$SECONDS
wait_until 60 "attempt 1 on 2 nodes" started 1 2
note "node2 killed: attempt 1 running $((SECONDS - killed)) s later"
wait_until 60 "the job to end" job_ended
cat job.out
assert_eq "$(job_field JobState)" COMPLETED "job state"
assert_eq "$(job_field Restarts)" 0 "the job's restart count (a requeue is not a resume)"
assert_contains job.out "^srun exit 0$" "the batch script's output"
assert_contains job.out "relaunching step $job\.0 of run $job\.0-[0-9a-f]{8} as attempt 1 on " "srun's stderr"
assert_not_contains job.out "protection is OFF" "srun's stderr"
assert_contains step.out "^[0-9]: attempt=1 .*nodes=node1,node3 " "attempt 1's node list"
"$AR_CLI" events >events.txt
for kind in detected node_out relaunch; do
  assert_contains events.txt "job $job [^ ]+ $kind: " "the installed controller's events"
done
"$AR_CLI" status --job "$job" >status.txt
assert_contains status.txt "^$job " "auto-resume status --job $job"
note "ok"
