#!/usr/bin/env bash
# docs/faults.md, the fault matrix, stays true to the suite: every unit test
# it names ("unit "NAME"") is one the unit test binary has, every
# integration test (`integration.NAME`) is one test/integration/CMakeLists.txt
# declares, every row names at least one test, and there are at least 30
# rows.
set -euo pipefail
matrix=$1
unit_tests=$2
integration_list=$3
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
[[ -r $matrix ]] || fail "cannot read $matrix"
# Catch2 exits with the number of tests it listed: the listing is what counts.
listing=$("$unit_tests" --list-test-names-only) || true
known_units=$(grep -v '^[[:space:]]*$' <<<"$listing" | sed 's/[[:space:]]*$//' || true)
[[ -n $known_units ]] || fail "$unit_tests lists no tests"
# The names in `set(integration_tests ...)`, which may span lines.
known_integration=$(sed -n '/^set(integration_tests/,/)/p' "$integration_list" |
  sed 's/set(integration_tests//; s/)//' | tr -s ' \n' '\n' | grep -v '^$')
[[ -n $known_integration ]] || fail "no integration tests found in $integration_list"

rows=0
missing=0
while IFS= read -r row; do
  number=$(cut -d'|' -f2 <<<"$row" | tr -d ' ')
  [[ $number =~ ^[0-9]+$ ]] || continue
  rows=$((rows + 1))
  shown=$(awk -F'|' '{print $(NF-1)}' <<<"$row")
  named=0
  while IFS= read -r name; do
    [[ -n $name ]] || continue
    named=$((named + 1))
    grep -qxF -- "$name" <<<"$known_units" || {
      echo "row $number: no unit test named \"$name\"" >&2
      missing=$((missing + 1))
    }
  done < <(grep -oE 'unit "[^"]+"' <<<"$shown" | sed 's/^unit "//; s/"$//')
  # shellcheck disable=SC2016 # the backquotes are markdown's, not the shell's
  integration_names=$(grep -oE '`integration\.[a-z_]+`' <<<"$shown" | sed 's/^`integration\.//; s/`$//' || true)
  while IFS= read -r name; do
    [[ -n $name ]] || continue
    named=$((named + 1))
    grep -qxF -- "$name" <<<"$known_integration" || {
      echo "row $number: no integration test named integration.$name" >&2
      missing=$((missing + 1))
    }
  done <<<"$integration_names"
  ((named > 0)) || {
    echo "row $number names no test" >&2
    missing=$((missing + 1))
  }
done < <(grep -E '^\| *[0-9]+ *\|' "$matrix")
((missing == 0)) || fail "$missing test names in $matrix match no test"
((rows >= 30)) || fail "$matrix has $rows rows, fewer than 30"
echo "fault matrix: $rows rows, each naming tests the suite has"
