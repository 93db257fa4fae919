#!/usr/bin/env bash
# auto-resume-plugin(8) against the plugin's sources: every plugstack.conf
# argument the plugin knows (plugin_config_keys(), which its unknown-key
# error lists) has an entry ("*key*=" at a line's start), none is there that
# it does not know, and every option it adds to srun, sbatch and salloc
# (the k*OptionName constants) has one ("*--name*=").
#   man_plugin.sh SOURCE_DIR PAGE_SOURCE
set -euo pipefail
(($# == 2)) || { echo "usage: man_plugin.sh SOURCE_DIR PAGE_SOURCE" >&2; exit 2; }
src=$1 page=$2
errors=()
keys=$(sed -n '/^std::string_view plugin_config_keys() {/,/^}/p' "$src/common/src/plugin_config.cpp" |
  grep -o '"[^"]*"' | tr -d '"' | tr ',' '\n' | tr -d ' ' | grep . || true)
options=$(sed -n 's/^inline constexpr const char\* k[A-Za-z]*OptionName = "\([a-z-]*\)";$/\1/p' \
  "$src/common/include/autoresume/option.hpp")
[[ -n $keys && -n $options ]] || { echo "FAIL [man]: no keys ('$keys') or options ('$options') found in the sources" >&2; exit 1; }
for key in $keys; do
  grep -q "^\*$key\*=" "$page" || errors+=("no entry for the plugstack argument $key")
done
while read -r entry; do
  grep -qx "$entry" <<<"$keys" || errors+=("an entry for $entry, which the plugin does not know")
done < <(sed -n 's/^\*\([a-z_]*\)\*=.*/\1/p' "$page")
for option in $options; do
  grep -q "^\*--$option\*=" "$page" || errors+=("no entry for the option --$option")
done
if ((${#errors[@]})); then
  printf "FAIL [man]: $page: %s\n" "${errors[@]}" >&2
  exit 1
fi
echo "$page: $(wc -w <<<"$keys") plugstack arguments and $(wc -w <<<"$options") options, each with an entry"
