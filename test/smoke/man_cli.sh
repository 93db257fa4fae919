#!/usr/bin/env bash
# auto-resume(1) against the CLI: every command and group command its
# --help lists has an entry in the page's source ("*COMMAND" at a line's
# start), and every option of the program and of each command ("--name" in
# their --help) is named in the page ("*--name*").
#   man_cli.sh CLI PAGE_SOURCE
set -euo pipefail
(($# == 2)) || { echo "usage: man_cli.sh CLI PAGE_SOURCE" >&2; exit 2; }
cli=$1 page=$2
errors=()
# commands HELP: the subcommands a --help text lists.
commands() { sed -n '/^Subcommands:/,$p' <<<"$1" | sed -n 's/^  \([a-z][a-z-]*\) .*/\1/p'; }
# options HELP: the long options a --help text lists (--help itself aside).
options() { sed -n '/^Options:/,/^Subcommands:/p' <<<"$1" | grep -oE '^ +(-[A-Za-z],)?--[a-z][a-z-]*' | grep -oE -- '--[a-z-]+' | grep -vx -- '--help' || true; }
check_options() {  # WHAT HELP
  local option
  for option in $(options "$2"); do
    grep -qF -- "*$option*" "$page" || errors+=("$1: option $option is not in the page")
  done
}

top=$("$cli" --help)
check_options "auto-resume" "$top"
count=0
for command in $(commands "$top"); do
  help=$("$cli" "$command" --help)
  subs=$(commands "$help")
  if [[ -z $subs ]]; then
    grep -qE "^\*$command\*( |$)" "$page" || errors+=("command $command has no entry")
    check_options "$command" "$help"
    count=$((count + 1))
    continue
  fi
  for sub in $subs; do
    grep -qE "^\*$command $sub\*( |$)" "$page" || errors+=("command $command $sub has no entry")
    check_options "$command $sub" "$("$cli" "$command" "$sub" --help)"
    count=$((count + 1))
  done
done
((count > 0)) || errors+=("no command found in $cli --help")
if ((${#errors[@]})); then
  printf "FAIL [man]: $page: %s\n" "${errors[@]}" >&2
  exit 1
fi
echo "$page: $count commands, each with an entry and its options"
