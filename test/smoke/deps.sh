#!/usr/bin/env bash
# Every system header, library and program the finished build used comes
# from a package `scripts/bootstrap --build` installs (or what those depend
# on): test/smoke/deps.py. (scripts/test and scripts/demo build while the
# rest of bootstrap's list is still being installed.) And the check can
# fail: against that list less libssl-dev (the headers of the protocol's
# HMAC), it must name libssl-dev.
#   deps.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
(($# == 2)) || { echo "usage: deps.sh SOURCE_DIR BUILD_DIR" >&2; exit 2; }
here=$(dirname "$0")
python3 "$here/deps.py" "$1" "$2" --build-part
if out=$(python3 "$here/deps.py" "$1" "$2" --build-part --without libssl-dev 2>&1); then
  echo "FAIL [deps]: the check passed without libssl-dev in bootstrap's list: $out" >&2
  exit 1
fi
grep -q "from libssl-dev," <<<"$out" || { echo "FAIL [deps]: without libssl-dev it failed, but not naming it: $out" >&2; exit 1; }
echo "deps: without libssl-dev it fails, as it must: ${out%%,*}, ..."
