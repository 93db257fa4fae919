#!/usr/bin/env bash
# A config file's man page against the program that reads the file: every
# key the program knows (the list its unknown-key error gives) has an entry
# ("*key*=" or "*key* =" at a line's start) in the page's source, and the
# page has none for a key it does not know. For the daemon's
# auto-resumed.conf(5), each default the page gives ("Default VALUE") is
# also the one the daemon prints for a file that leaves the key unset.
#   man_keys.sh daemon AUTO_RESUMED PAGE_SOURCE           auto-resumed.conf(5)
#   man_keys.sh healthcheck AUTO_RESUME_HEALTHCHECK PAGE_SOURCE   healthcheck.conf(5)
set -euo pipefail
usage() { echo "usage: man_keys.sh daemon|healthcheck PROGRAM PAGE_SOURCE" >&2; exit 2; }
(($# == 3)) || usage
kind=$1 program=$2 page=$3
tmp=$(mktemp -d /tmp/ar-man.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# read_conf FILE: the program's output for the config FILE, checked only.
case $kind in
  daemon)
    read_conf() { "$program" --config "$1" --check-config; }
    printf 'provider=local\n' >"$tmp/unknown.conf" ;;
  healthcheck)
    read_conf() { "$program" --config "$1" --dry-run; }
    : >"$tmp/unknown.conf" ;;
  *) usage ;;
esac
echo "no_such_key = 1" >>"$tmp/unknown.conf"
read_conf "$tmp/unknown.conf" >"$tmp/unknown.out" 2>&1 || true
known=$(sed -n 's/.*unknown key .no_such_key. (known: \(.*\))$/\1/p' "$tmp/unknown.out")
[[ -n $known ]] || { echo "FAIL [man]: no key list in: $(cat "$tmp/unknown.out")" >&2; exit 1; }
: >"$tmp/defaults.out"
if [[ $kind == daemon ]]; then
  # The defaults: a file that sets only what has no default (provisioning on).
  printf 'provider=command\nprovider_command=/bin/true\nnode_provisioning=continuous\nprovision_command=/bin/true\n' \
    >"$tmp/defaults.conf"
  read_conf "$tmp/defaults.conf" >"$tmp/defaults.out" 2>/dev/null ||
    { echo "FAIL [man]: $program --check-config failed on $(cat "$tmp/defaults.conf")" >&2; exit 1; }
fi
python3 - "$page" "$known" "$tmp/defaults.out" "$(basename "$program")" <<'PY'
import re, sys
page, known, defaults_file, program = sys.argv[1:5]
known = [k.strip() for k in known.split(",")]
text = open(page).read()
# Each entry: "*key*=..." (or "*key* =") and its indented paragraph.
entries = {}
for m in re.finditer(r"^\*([a-z_]+)\* ?=[^\n]*\n((?:\t[^\n]*\n)*)", text, re.M):
    entries[m.group(1)] = m.group(2)
errors = [f"no entry for {key}" for key in known if key not in entries]
errors += [f"an entry for {key}, which {program} does not know" for key in entries if key not in known]
# The daemon's defaults (none for the other kinds: the file is empty).
defaults = dict(line.split("=", 1) for line in open(defaults_file).read().splitlines() if "=" in line)
set_here = ("provider", "provider_command", "provision_command", "node_provisioning")
checked = 0
for key, body in entries.items():
    m = re.search(r"Default\s+\*?([^\s*]+?)\*?[.;]?(?:\s|$)", body)
    if not m or key not in defaults or key in set_here:
        continue
    checked += 1
    if m.group(1) != defaults[key]:
        errors.append(f"{key}: the page says the default is {m.group(1)}, {program} {defaults[key]}")
if errors:
    sys.exit("FAIL [man]: " + page + ":\n  " + "\n  ".join(errors))
print(f"{page}: {len(known)} keys, each with an entry" + (f"; {checked} defaults as {program}'s" if defaults else ""))
PY
