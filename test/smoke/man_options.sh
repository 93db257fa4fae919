#!/usr/bin/env bash
# A program's man page against its --help (CLI11's): every command and
# group command it lists has an entry in the page's source ("*COMMAND" at a
# line's start), and every option of the program and of each command
# ("--name" in their --help) is named in the page ("*--name*").
#   man_options.sh PROGRAM PAGE_SOURCE
set -euo pipefail
(($# == 2)) || { echo "usage: man_options.sh PROGRAM PAGE_SOURCE" >&2; exit 2; }
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
# A program without commands: its options only, and it must have some.
if [[ -z $(commands "$top") ]]; then
  [[ -n $(options "$top") ]] || errors+=("no option found in $cli --help")
elif ((count == 0)); then
  errors+=("no command found in $cli --help")
fi
if ((${#errors[@]})); then
  printf "FAIL [man]: $page: %s\n" "${errors[@]}" >&2
  exit 1
fi
echo "$page: $count commands, each with an entry; every option of $(basename "$cli") named"
