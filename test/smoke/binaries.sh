#!/usr/bin/env bash
# --help and --version of the binaries, their config loading, and the
# health checker's argument checks.
set -euo pipefail
daemon=$1 cli=$2 version=$3 healthcheck=$4
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

printf 'provider=local\nmax_attempts=lots\n' >"$tmp/bad.conf"
for cmd in "$daemon --config $tmp/bad.conf --check-config" "$cli check-config $tmp/bad.conf"; do
  if $cmd >"$tmp/out" 2>&1; then fail "$cmd accepted a bad value"; fi
  grep -q "bad.conf:2:.*'lots'" "$tmp/out" || fail "$cmd: error does not name line and value: $(cat "$tmp/out")"
done
if "$daemon" --config "$tmp/missing.conf" --check-config >"$tmp/out" 2>&1; then
  fail "auto-resumed accepted a missing config file"
fi
grep -q "missing.conf" "$tmp/out" || fail "missing file not named: $(cat "$tmp/out")"

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
echo "ok"
