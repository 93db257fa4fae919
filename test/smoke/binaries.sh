#!/usr/bin/env bash
# --help and --version of the binaries, their config loading, the health
# checker's argument checks, and the expand helper's submitter's input
# checks.
set -euo pipefail
daemon=$1 cli=$2 version=$3 healthcheck=$4 submit=$5
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

for bin in "$daemon" "$cli"; do
  name=$(basename "$bin")
  "$bin" --help | grep -q "Usage:" || fail "$name --help prints no usage"
  [[ $("$bin" --version) == "$name $version" ]] || fail "$name --version: $("$bin" --version)"
  if "$bin" --no-such-flag check-config "$tmp/x" >"$tmp/out" 2>&1; then
    fail "$name accepted --no-such-flag"
  fi
  grep -q -- "--no-such-flag" "$tmp/out" || fail "$name did not name the bad flag: $(cat "$tmp/out")"
done

printf 'provider=local\nmax_attempts=4\n' >"$tmp/good.conf"
"$daemon" --config "$tmp/good.conf" --check-config | grep -qx "max_attempts=4" ||
  fail "auto-resumed --check-config did not print the effective config"
"$cli" check-config "$tmp/good.conf" | grep -qx "provider=local" ||
  fail "auto-resume check-config did not print the effective config"

# The effective config names every setting: for a file that sets them all,
# both binaries print exactly the keys of the daemon's table
# (auto-resumed --settings), once each; for a file that sets only the
# provider, a part of them, the same part from both.
"$daemon" --settings | grep -E '^[a-z_]+$' | sort >"$tmp/settings"
(($(wc -l <"$tmp/settings") > 60)) || fail "auto-resumed --settings lists too few keys: $(cat "$tmp/settings")"
cat >"$tmp/full.conf" <<'CONF'
provider=spares
spares=2
provider_command=/usr/local/sbin/replace-node
notify_command=/usr/bin/mail
munge_socket=/run/munge/munge.socket.2
local_restart_command=/usr/local/sbin/restart-node {node}
heartbeat_bind=gpu[1-8]=10.1.0.0/24
node_provisioning=continuous
provision_command=/usr/local/sbin/provision
slurm_conf=/etc/slurm/slurm.conf
slurm_conf_include=/etc/slurm/auto-resume-nodes.conf
slurmctld_restart_command=/usr/bin/systemctl restart slurmctld
CONF
printf 'provider=local\n' >"$tmp/minimal.conf"
# same_keys WHAT EXPECTED_FILE: the keys of the config on stdin are those of
# EXPECTED_FILE (the diff shows missing keys with -, extra ones with +).
same_keys() {
  cut -d= -f1 | sort >"$tmp/keys"
  diff -u --label expected --label printed "$2" "$tmp/keys" >"$tmp/diff" ||
    fail "$1 printed other keys than the settings: $(cat "$tmp/diff")"
}
"$daemon" --config "$tmp/full.conf" --check-config | same_keys "auto-resumed --check-config" "$tmp/settings"
"$cli" check-config "$tmp/full.conf" | same_keys "auto-resume check-config" "$tmp/settings"
"$daemon" --config "$tmp/minimal.conf" --check-config | cut -d= -f1 | sort >"$tmp/settings-unset"
comm -13 "$tmp/settings" "$tmp/settings-unset" | grep . &&
  fail "auto-resumed --check-config (provider=local alone) printed keys --settings does not list"
"$cli" check-config "$tmp/minimal.conf" |
  same_keys "auto-resume check-config (provider=local alone)" "$tmp/settings-unset"
# The defaults contradict nothing: no warning for a file that leaves them.
for cmd in "$daemon --config $tmp/full.conf --check-config" "$cli check-config $tmp/full.conf"; do
  $cmd 2>"$tmp/err" >/dev/null || fail "$cmd failed: $(cat "$tmp/err")"
  [[ ! -s $tmp/err ]] || fail "$cmd warned about the default settings: $(cat "$tmp/err")"
done
# Settings that contradict each other are said on stderr, naming the file;
# the effective settings are still printed and the check passes.
printf 'provider=command\nprovider_command=/usr/local/sbin/replace-node\nrepair_timeout=300\n' \
  >"$tmp/short.conf"
for cmd in "$daemon --config $tmp/short.conf --check-config" "$cli check-config $tmp/short.conf"; do
  $cmd 2>"$tmp/err" >"$tmp/out" || fail "$cmd refused a config that works: $(cat "$tmp/err")"
  grep -qx "repair_timeout=300" "$tmp/out" || fail "$cmd did not print the effective config"
  grep -q "short.conf: warning: repair_timeout=300 s is shorter than provider_timeout + register_timeout" \
    "$tmp/err" || fail "$cmd did not warn about repair_timeout: $(cat "$tmp/err")"
done
# The keys the parser knows (listed when a key is unknown) are the same.
printf 'provider=local\nno_such_key=1\n' >"$tmp/unknown.conf"
if "$cli" check-config "$tmp/unknown.conf" >"$tmp/out" 2>&1; then fail "auto-resume accepted an unknown key"; fi
sed -n 's/.*unknown key .no_such_key. (known: \(.*\))$/\1/p' "$tmp/out" | tr -d ' ' | tr ',' '\n' |
  same_keys "the unknown key's error ($(cat "$tmp/out"))" "$tmp/settings"

printf 'provider=local\nmax_attempts=lots\n' >"$tmp/bad.conf"
for cmd in "$daemon --config $tmp/bad.conf --check-config" "$cli check-config $tmp/bad.conf"; do
  if $cmd >"$tmp/out" 2>&1; then fail "$cmd accepted a bad value"; fi
  grep -q "bad.conf:2:.*'lots'" "$tmp/out" || fail "$cmd: error does not name line and value: $(cat "$tmp/out")"
done
if "$daemon" --config "$tmp/missing.conf" --check-config >"$tmp/out" 2>&1; then
  fail "auto-resumed accepted a missing config file"
fi
grep -q "missing.conf" "$tmp/out" || fail "missing file not named: $(cat "$tmp/out")"

# The guard rails' requests: a bad argument is refused, and named, before
# the controller is asked (none listens at port 1).
for bad in "pause --reason" "unpause extra" "resume-actions --now"; do
  rc=0
  # shellcheck disable=SC2086 # the subcommand and its argument
  "$cli" --controller 127.0.0.1:1 $bad >"$tmp/out" 2>&1 || rc=$?
  ((rc != 0)) || fail "auto-resume $bad was accepted"
  grep -q -- "${bad##* }" "$tmp/out" || fail "auto-resume $bad: the bad argument is not named: $(cat "$tmp/out")"
  if grep -q "no answer from the controller" "$tmp/out"; then fail "auto-resume $bad asked the controller"; fi
done

# Continuous provisioning's commands: the same, with what the error must say.
for spec in "events --level debug|debug" "group roll a --batch 0|0" \
  "group set a size=1|unknown key 'size'" "group set a count=x|invalid value 'x' for count" \
  "group set a|VALUES is required" "group bogus|bogus" "group|say what" "usage --since yesterday|yesterday"; do
  bad=${spec%%|*} says=${spec#*|}
  rc=0
  # shellcheck disable=SC2086 # the subcommand and its arguments
  "$cli" --controller 127.0.0.1:1 $bad >"$tmp/out" 2>&1 || rc=$?
  ((rc != 0)) || fail "auto-resume $bad was accepted"
  grep -qF -- "$says" "$tmp/out" || fail "auto-resume $bad does not say '$says': $(cat "$tmp/out")"
  if grep -q "no answer from the controller" "$tmp/out"; then fail "auto-resume $bad asked the controller"; fi
done

name=$(basename "$healthcheck")
"$healthcheck" --help | grep -q "Usage:" || fail "$name --help prints no usage"
[[ $("$healthcheck" --version) == "$name $version" ]] || fail "$name --version: $("$healthcheck" --version)"
for bad in "--check banana" "--gpus -1" "--timeout 0" "--no-such-flag" "--drain-only gpu,x" \
  "--neuron-sysfs /x --efa-devices 2.5"; do
  rc=0
  # shellcheck disable=SC2086 # the option and its value
  "$healthcheck" $bad --dry-run >"$tmp/out" 2>&1 || rc=$?
  ((rc == 2)) || fail "$name $bad: exit status $rc, not 2 (usage error)"
  option=${bad% *}
  grep -q -- "${option##* }" "$tmp/out" || fail "$name did not name $bad: $(cat "$tmp/out")"
done
# Its configuration file: a bad line is named; a missing --config is an error.
printf 'checks=gpu\nefa_devices=two\n' >"$tmp/health.conf"
rc=0
"$healthcheck" --config "$tmp/health.conf" --dry-run >"$tmp/out" 2>&1 || rc=$?
((rc == 2)) || fail "$name accepted a bad config file (exit status $rc)"
grep -q "health.conf:2:.*'two'" "$tmp/out" || fail "$name did not name line and value: $(cat "$tmp/out")"
rc=0
"$healthcheck" --config "$tmp/missing.conf" --dry-run >"$tmp/out" 2>&1 || rc=$?
((rc == 2)) || fail "$name accepted a missing config file (exit status $rc)"
grep -q "missing.conf" "$tmp/out" || fail "missing file not named: $(cat "$tmp/out")"
# auto-resume-submit: a request it cannot read is refused (exit status 2)
# with the bad field named, before Slurm is asked anything.
name=$(basename "$submit")
"$submit" --help | grep -q "Usage:" || fail "$name --help prints no usage"
[[ $("$submit" --version) == "$name $version" ]] || fail "$name --version: $("$submit" --version)"
for bad in '{"name":"x","dependency":"expand:1","req_nodes":"n1","colour":"red"}:colour' \
  '{"name":"x","dependency":"expand:1","req_nodes":"n1","min_cpus":-1}:min_cpus' \
  '{"name":"x","dependency":"expand:1"}:req_nodes' 'not json:not JSON'; do
  rc=0
  "$submit" <<<"${bad%:*}" >"$tmp/out" 2>&1 || rc=$?
  ((rc == 2)) || fail "$name accepted ${bad%:*} (exit status $rc): $(cat "$tmp/out")"
  grep -q -- "${bad##*:}" "$tmp/out" || fail "$name did not name ${bad##*:}: $(cat "$tmp/out")"
done
# auto-resumed without auto-resume-submit next to it refuses to start, and
# says which program is missing.
mkdir "$tmp/sbin"
cp "$daemon" "$tmp/sbin/"
rc=0
"$tmp/sbin/$(basename "$daemon")" --config "$tmp/good.conf" >"$tmp/out" 2>&1 || rc=$?
((rc == 1)) || fail "auto-resumed without its expand helper: exit status $rc: $(cat "$tmp/out")"
grep -q "the expand helper $tmp/sbin/auto-resume-submit is missing" "$tmp/out" ||
  fail "auto-resumed did not name the missing expand helper: $(cat "$tmp/out")"
echo "ok"
