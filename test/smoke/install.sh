#!/usr/bin/env bash
# `cmake --install` of a build into a scratch DESTDIR: the plugin in Slurm's
# plugin folder, the CLI in bin, the daemons in sbin, the systemd units
# (their ExecStart naming the installed daemons), the examples and the man
# pages (MANDIR "-": a build without them).
#   install.sh BUILD_DIR PREFIX SLURM_PLUGIN_DIR SYSTEMD_UNIT_DIR DOCDIR MANDIR
set -euo pipefail
(($# == 6)) || { echo "usage: install.sh BUILD_DIR PREFIX SLURM_PLUGIN_DIR SYSTEMD_UNIT_DIR DOCDIR MANDIR" >&2; exit 2; }
build=$1 prefix=$2 plugin_dir=$3 unit_dir=$4 doc_dir=$5 man_dir=$6
root=$(mktemp -d /tmp/ar-install.XXXXXX)
trap 'rm -rf "$root"' EXIT
fail() { echo "FAIL [install]: $*" >&2; exit 1; }

DESTDIR=$root cmake --install "$build" >"$root.log" 2>&1 || { cat "$root.log" >&2; rm -f "$root.log"; fail "cmake --install failed"; }
rm -f "$root.log"
executable() { [[ -f $root$1 && -x $root$1 ]] || fail "$1 is not installed (or not executable): $(cd "$root" && find . -type f | sort)"; }
executable "$prefix/bin/auto-resume"
for daemon in auto-resumed auto-resume-submit auto-resume-agent auto-resume-healthcheck; do
  executable "$prefix/sbin/$daemon"
done
[[ -f $root$plugin_dir/auto_resume.so ]] || fail "no $plugin_dir/auto_resume.so"
for unit in auto-resumed auto-resume-agent; do
  file=$root$unit_dir/$unit.service
  [[ -f $file ]] || fail "no $unit_dir/$unit.service"
  ! grep -q '@' "$file" || fail "$unit.service keeps a template variable: $(grep '@' "$file")"
  start=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$file")
  [[ $start == "$prefix/sbin/$unit" ]] || fail "$unit.service starts '$start', not $prefix/sbin/$unit"
done
[[ -f $root$doc_dir/examples/train_auto_resume.sh ]] || fail "no examples in $doc_dir/examples"
if [[ $man_dir != - ]]; then
  for page in auto-resume.1 auto-resumed.conf.5 auto-resumed.8 auto-resume-submit.8 auto-resume-agent.8 auto-resume-healthcheck.8 \
    auto-resume-plugin.8 healthcheck.conf.5; do
    file=$root$man_dir/man${page##*.}/$page
    [[ -f $file ]] || fail "no $man_dir/man${page##*.}/$page"
    grep -q "^\.TH \"${page%.*}\" \"${page##*.}\"" "$file" || fail "$file is no man page: $(head -n 8 "$file")"
  done
fi
echo "installed: $(cd "$root" && find . -type f | wc -l) files; plugin in $plugin_dir, units in $unit_dir"
