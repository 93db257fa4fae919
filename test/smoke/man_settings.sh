#!/usr/bin/env bash
# auto-resumed.conf(5) against the daemon: every key the daemon knows (the
# list its unknown-key error gives) has an entry ("*key*=" at a line's
# start) in the page's source, the page names no key the daemon does not
# know, and each default the page gives ("Default VALUE") is the one the
# daemon prints for a file that leaves the key unset.
#   man_settings.sh DAEMON PAGE_SOURCE
set -euo pipefail
(($# == 2)) || { echo "usage: man_settings.sh DAEMON PAGE_SOURCE" >&2; exit 2; }
daemon=$1 page=$2
tmp=$(mktemp -d /tmp/ar-man.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

printf 'provider=local\nno_such_key=1\n' >"$tmp/unknown.conf"
"$daemon" --config "$tmp/unknown.conf" --check-config >"$tmp/unknown.out" 2>&1 || true
known=$(sed -n 's/.*unknown key .no_such_key. (known: \(.*\))$/\1/p' "$tmp/unknown.out")
[[ -n $known ]] || { echo "FAIL [man]: no key list in: $(cat "$tmp/unknown.out")" >&2; exit 1; }
# The defaults: a file that sets only what has no default (provisioning on).
printf 'provider=command\nprovider_command=/bin/true\nnode_provisioning=continuous\nprovision_command=/bin/true\n' \
  >"$tmp/defaults.conf"
"$daemon" --config "$tmp/defaults.conf" --check-config >"$tmp/defaults.out" 2>/dev/null ||
  { echo "FAIL [man]: $daemon --check-config failed on $(cat "$tmp/defaults.conf")" >&2; exit 1; }
python3 - "$page" "$known" "$tmp/defaults.out" <<'PY'
import re, sys
page, known, defaults_file = sys.argv[1], sys.argv[2], sys.argv[3]
known = [k.strip() for k in known.split(",")]
text = open(page).read()
# Each entry: "*key*=..." and its indented paragraph.
entries = {}
for m in re.finditer(r"^\*([a-z_]+)\*=[^\n]*\n((?:\t[^\n]*\n)*)", text, re.M):
    entries[m.group(1)] = m.group(2)
errors = []
for key in known:
    if key not in entries:
        errors.append(f"no entry for {key}")
for key in entries:
    if key not in known:
        errors.append(f"an entry for {key}, which the daemon does not know")
defaults = dict(line.split("=", 1) for line in open(defaults_file).read().splitlines() if "=" in line)
checked = 0
for key, body in entries.items():
    m = re.search(r"Default\s+\*?([^\s*]+?)\*?[.;]?(?:\s|$)", body)
    if not m or key not in defaults or key in ("provider", "provider_command", "provision_command", "node_provisioning"):
        continue
    checked += 1
    if m.group(1) != defaults[key]:
        errors.append(f"{key}: the page says the default is {m.group(1)}, the daemon {defaults[key]}")
if errors:
    sys.exit("FAIL [man]: " + page + ":\n  " + "\n  ".join(errors))
print(f"{page}: {len(known)} keys, each with an entry; {checked} defaults as the daemon's")
PY
