#!/usr/bin/env bash
# bench/bootstrap.py on runs whose answers are known: the medians, intervals
# that hold them, the paired resampling (OTHER = BASE + 10 run by run gives
# the difference 10 in every resample, so its interval is [10, 10]), and the
# refusals of bad input, each naming the bad value.
set -euo pipefail
bootstrap=${1:?usage: bootstrap.sh BOOTSTRAP_PY}
work=$(mktemp -d /tmp/ar-bootstrap.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

seq 1 99 | shuf --random-source=<(yes) >"$work/base"
awk '{print $1 + 10}' "$work/base" >"$work/shifted"
awk '{print ($1 % 7) * 100}' "$work/base" >"$work/spread"
mapfile -t lines < <(python3 "$bootstrap" --resamples 500 "$work/base" "$work/shifted" "$work/spread")
printf '%s\n' "${lines[@]}"
((${#lines[@]} == 5)) || fail "expected 5 lines, got ${#lines[@]}"
read -r m lo hi <<<"${lines[0]}"
[[ $m == 50.0 ]] || fail "median of 1..99: $m"
awk -v m="$m" -v lo="$lo" -v hi="$hi" 'BEGIN {exit !(lo < m && m < hi && hi - lo < 40)}' ||
  fail "the median's interval [$lo, $hi] does not hold $m, or is wider than 40"
[[ ${lines[1]%% *} == 60.0 ]] || fail "median of 11..109: ${lines[1]}"
[[ ${lines[3]} == "10.0 10.0 10.0" ]] || fail "paired difference: '${lines[3]}', want '10.0 10.0 10.0'"
read -r _ lo hi <<<"${lines[4]}"
awk -v lo="$lo" -v hi="$hi" 'BEGIN {exit !(lo < hi)}' || fail "an unpaired difference with no spread: [$lo, $hi]"
# The same seed, the same figures.
[[ $(python3 "$bootstrap" --resamples 500 "$work/base" "$work/spread") == \
   $(python3 "$bootstrap" --resamples 500 "$work/base" "$work/spread") ]] || fail "two runs with one seed differ"

# refuses BAD_ARGS... WANT: exits non-zero with WANT on stderr.
refuses() {
  local want=${*: -1} err
  if err=$(python3 "$bootstrap" "${@:1:$#-1}" 2>&1 >/dev/null); then fail "accepted ${*:1:$#-1}"; fi
  [[ $err == *"$want"* ]] || fail "for ${*:1:$#-1}: '$err' does not say '$want'"
}
head -n 5 "$work/base" >"$work/short"
printf '1\nx\n' >"$work/word"
: >"$work/empty"
refuses "$work/base" "$work/short" "'$work/short' holds 5 runs, '$work/base' 99"
refuses "$work/word" "line 2: not a number: 'x'"
refuses "$work/empty" "'$work/empty' holds no runs"
refuses "$work/none" "cannot read '$work/none'"
refuses --resamples 0 "$work/base" "bad --resamples '0'"
echo "ok"
