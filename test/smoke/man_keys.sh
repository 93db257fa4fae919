#!/usr/bin/env bash
# A config file's man page against the program that reads the file: every
# key the program knows has an entry ("*key*=" or "*key* =" at a line's
# start) in the page's source, and the page has none for a key it does not
# know. For the daemon's auto-resumed.conf(5), the keys and their defaults
# come from the daemon's own table (`auto-resumed --settings`): each default
# the page gives ("Default VALUE") must be the table's; and each EXAMPLE
# (a config file, or a Markdown page's config blocks: fenced blocks of
# key=value lines only) may name only keys the table has, and a config
# file's commented-out "#key=VALUE" line, where the key has a default, must
# show it. For the health checker, the keys are those its unknown-key error
# lists.
#   man_keys.sh daemon AUTO_RESUMED PAGE_SOURCE [EXAMPLE...]   auto-resumed.conf(5)
#   man_keys.sh healthcheck AUTO_RESUME_HEALTHCHECK PAGE_SOURCE   healthcheck.conf(5)
set -euo pipefail
usage() { echo "usage: man_keys.sh daemon|healthcheck PROGRAM PAGE_SOURCE [EXAMPLE...]" >&2; exit 2; }
(($# >= 3)) || usage
kind=$1 program=$2 page=$3
shift 3
tmp=$(mktemp -d /tmp/ar-man.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# settings: "KEY<TAB>DEFAULT" lines ("" for no default).
case $kind in
  daemon)
    "$program" --settings >"$tmp/settings.out" ||
      { echo "FAIL [man]: $program --settings failed" >&2; exit 1; }
    awk '/^[a-z_]+$/ { key = $0; next }
         key != "" && /^    default / {
           value = substr($0, 13); sub(/; takes .*/, "", value)
           if (value == "unset" || value ~ /^none/) value = ""
           print key "\t" value; key = "" }' "$tmp/settings.out" >"$tmp/settings" ;;
  healthcheck)
    (($# == 0)) || usage
    echo "no_such_key = 1" >"$tmp/unknown.conf"
    "$program" --config "$tmp/unknown.conf" --dry-run >"$tmp/unknown.out" 2>&1 || true
    sed -n 's/.*unknown key .no_such_key. (known: \(.*\))$/\1/p' "$tmp/unknown.out" |
      tr ',' '\n' | sed 's/^ *//; s/$/\t/' | sed '/^\t$/d' >"$tmp/settings" ;;
  *) usage ;;
esac
[[ -s $tmp/settings ]] || { echo "FAIL [man]: $program gave no list of keys" >&2; exit 1; }
python3 - "$page" "$tmp/settings" "$(basename "$program")" "$@" <<'PY'
import re, sys
page, settings, program, *examples = sys.argv[1:]
defaults = dict(line.rstrip("\n").split("\t", 1) for line in open(settings))
text = open(page).read()
# Each entry: "*key*=..." (or "*key* =") and its indented paragraph.
entries = {}
for m in re.finditer(r"^\*([a-z_]+)\* ?=[^\n]*\n((?:\t[^\n]*\n)*)", text, re.M):
    entries[m.group(1)] = m.group(2)
errors = [f"{page}: no entry for {key}" for key in defaults if key not in entries]
errors += [f"{page}: an entry for {key}, which {program} does not know" for key in entries if key not in defaults]
checked = 0
for key, body in entries.items():
    m = re.search(r"Default\s+\*?([^\s*]+?)\*?[.;]?(?:\s|$)", body)
    if not m or not defaults.get(key):
        continue
    checked += 1
    if m.group(1) != defaults[key]:
        errors.append(f"{page}: {key}: the page says the default is {m.group(1)}, {program} {defaults[key]}")
# The examples: the keys they name, and a config file's commented defaults.
setting = re.compile(r"^(#?)([a-z_]+)=(\S*)")
named = 0
for example in examples:
    lines = open(example).read().splitlines()
    if example.endswith(".md"):
        blocks, block = [], None
        for line in lines:
            if line.startswith("```"):
                if block is not None:
                    blocks.append(block)
                block = None if block is not None else []
            elif block is not None:
                block.append(line)
        lines = [l for b in blocks if b and all(setting.match(l) for l in b if l.strip()) for l in b]
    for line in lines:
        m = setting.match(line)
        if not m:
            continue
        named += 1
        commented, key, value = m.groups()
        if key not in defaults:
            errors.append(f"{example}: '{line}' names {key}, which {program} does not know")
        elif commented and not example.endswith(".md") and defaults[key] and value != defaults[key]:
            errors.append(f"{example}: '{line}' shows {value} as {key}'s default, {program} {defaults[key]}")
if examples and named == 0:
    errors.append("no key=value line in " + ", ".join(examples))
if errors:
    sys.exit("FAIL [man]:\n  " + "\n  ".join(errors))
print(f"{page}: {len(defaults)} keys, each with an entry; {checked} defaults as {program}'s" +
      (f"; {named} lines of {len(examples)} examples name known keys" if examples else ""))
PY
