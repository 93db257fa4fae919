#!/usr/bin/env bash
# `cmake --install` of a build into scratch DESTDIRs, once at the prefix the
# build was configured with and once each with `--prefix /usr` and `--prefix
# /opt/auto-resume` (the prefix given at install time must win): the plugin in
# Slurm's plugin folder, the CLI in bin, the daemons in sbin, the systemd
# units (every program their Exec lines start is installed, under that
# prefix), the examples and the man pages (MANDIR "-": a build without them).
#   install.sh BUILD_DIR PREFIX SLURM_PLUGIN_DIR SYSTEMD_UNIT_DIR DOCDIR MANDIR
# (SYSTEMD_UNIT_DIR, DOCDIR and MANDIR relative to the prefix, or absolute)
set -euo pipefail
(($# == 6)) || { echo "usage: install.sh BUILD_DIR PREFIX SLURM_PLUGIN_DIR SYSTEMD_UNIT_DIR DOCDIR MANDIR" >&2; exit 2; }
build=$1 configured=$2 plugin_dir=$3 unit_rel=$4 doc_rel=$5 man_rel=$6
scratch=$(mktemp -d /tmp/ar-install.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "FAIL [install${prefix:+ --prefix $prefix}]: $*" >&2; exit 1; }
under() { [[ $2 == /* ]] && echo "$2" || echo "$1/$2"; }  # PREFIX DIR

# check PREFIX [--prefix]: install into a fresh root and check it.
check() {
  prefix=$1
  local root=$scratch/root${prefix//\//_} args=()
  (($# > 1)) && args=(--prefix "$prefix")
  DESTDIR=$root cmake --install "$build" "${args[@]}" >"$root.log" 2>&1 ||
    { cat "$root.log" >&2; fail "cmake --install failed"; }
  executable() { [[ -f $root$1 && -x $root$1 ]] || fail "$1 is not installed (or not executable): $(cd "$root" && find . -type f | sort)"; }
  executable "$prefix/bin/auto-resume"
  for daemon in auto-resumed auto-resume-submit auto-resume-agent auto-resume-healthcheck; do
    executable "$prefix/sbin/$daemon"
  done
  [[ -f $root$plugin_dir/auto_resume.so ]] || fail "no $plugin_dir/auto_resume.so"
  local unit_dir file line program units=0
  unit_dir=$(under "$prefix" "$unit_rel")
  for unit in auto-resumed auto-resume-agent; do
    file=$root$unit_dir/$unit.service
    [[ -f $file ]] || fail "no $unit_dir/$unit.service: $(cd "$root" && find . -name '*.service')"
    ! grep -q '@' "$file" || fail "$unit.service keeps a template variable: $(grep '@' "$file")"
    grep -q "^ExecStart=$prefix/sbin/$unit\( \|$\)" "$file" ||
      fail "$unit.service starts '$(grep '^ExecStart=' "$file")', not $prefix/sbin/$unit"
    # Every program an Exec line runs is installed here, or is the system's.
    while IFS= read -r line; do
      program=${line#*=}
      program=${program%% *}
      program=${program#[-@:+!]}
      case $program in
        "$prefix"/*) executable "$program" ;;
        /bin/*|/usr/bin/*) [[ -x $program ]] || fail "$unit.service runs $program, which this machine lacks" ;;
        *) fail "$unit.service runs '$program', neither under $prefix nor the system's" ;;
      esac
      units=$((units + 1))
    done < <(grep -E '^Exec[A-Za-z]*=' "$file")
  done
  ((units >= 2)) || fail "no Exec lines found in the units"
  [[ -f $root$(under "$prefix" "$doc_rel")/examples/train_auto_resume.sh ]] ||
    fail "no examples in $(under "$prefix" "$doc_rel")/examples"
  if [[ $man_rel != - ]]; then
    local man_dir
    man_dir=$(under "$prefix" "$man_rel")
    for page in auto-resume.1 auto-resumed.conf.5 auto-resumed.8 auto-resume-submit.8 auto-resume-agent.8 auto-resume-healthcheck.8 \
      auto-resume-plugin.8 healthcheck.conf.5; do
      file=$root$man_dir/man${page##*.}/$page
      [[ -f $file ]] || fail "no $man_dir/man${page##*.}/$page"
      grep -q "^\.TH \"${page%.*}\" \"${page##*.}\"" "$file" || fail "$file is no man page: $(head -n 8 "$file")"
    done
  fi
  echo "--prefix $prefix: $(cd "$root" && find . -type f | wc -l) files; plugin in $plugin_dir, units in $unit_dir ($units Exec lines checked)"
}

check "$configured"
check /usr --prefix
check /opt/auto-resume --prefix
