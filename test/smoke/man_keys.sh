#!/usr/bin/env bash
# healthcheck.conf(5) against auto-resume-healthcheck: every key the program
# knows (the list its unknown-key error gives) has an entry ("*key* =" at
# a line's start) in the page's source, and none is there that it does not
# know.
#   man_keys.sh PROGRAM PAGE_SOURCE
set -euo pipefail
(($# == 2)) || { echo "usage: man_keys.sh PROGRAM PAGE_SOURCE" >&2; exit 2; }
program=$1 page=$2
tmp=$(mktemp -d /tmp/ar-man.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
echo "no_such_key = 1" >"$tmp/unknown.conf"
"$program" --config "$tmp/unknown.conf" --dry-run >"$tmp/out" 2>&1 || true
keys=$(sed -n 's/.*unknown key .no_such_key. (known: \(.*\))$/\1/p' "$tmp/out" | tr ',' '\n' | tr -d ' ' | grep . || true)
[[ -n $keys ]] || { echo "FAIL [man]: no key list in: $(cat "$tmp/out")" >&2; exit 1; }
errors=()
for key in $keys; do
  grep -q "^\*$key\* =" "$page" || errors+=("no entry for $key")
done
while read -r entry; do
  grep -qx "$entry" <<<"$keys" || errors+=("an entry for $entry, which $(basename "$program") does not know")
done < <(sed -n 's/^\*\([a-z_]*\)\* =.*/\1/p' "$page")
if ((${#errors[@]})); then
  printf "FAIL [man]: $page: %s\n" "${errors[@]}" >&2
  exit 1
fi
echo "$page: $(wc -w <<<"$keys") keys, each with an entry"
