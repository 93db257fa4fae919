#!/usr/bin/env bash
# Idle connections lock no one out: with the controller under a descriptor
# limit of 1024, an unprivileged user holds 1,100 idle connections open (from
# its own source address, opening a new one for each closed) while root's
# CLI, another user's CLI and a protected srun are still answered; idle
# unauthenticated connections are closed after auth_timeout, and the
# refusals are logged once per interval, not once each.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"
share_with_users  # the flood runs as nobody

cluster_up --nodes 1
CONTROLLER_NOFILE=1024 CONTROLLER_CONF=$'auth_timeout=1\nmax_unauthenticated=32\nend_window=1' \
  controller_up
cd "$WORK" || exit
mkdir shared && chmod 777 shared
as_a() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
as_b() { setpriv --reuid=4242 --regid=4242 --clear-groups "$@"; }
flood() { python3 "$TEST_TOOLS/flood.py" "$@"; }

# Without a flood: idle connections are closed once auth_timeout is over.
closed=$(flood --deadline "$CONTROLLER_PORT" 10 6)
assert_eq "$closed" "closed 10" "idle connections closed within 6 s (auth_timeout=1)"

exec 3< <(as_a /usr/bin/python3 "$TEST_TOOLS/flood.py" "$CONTROLLER_PORT" 1100 \
  "$WORK/flood.stop")
on_exit "touch $WORK/flood.stop"
read -r -t 60 -u 3 line || fail "the flood did not start"
[[ $line == "open 1100" ]] || fail "the flood opened: $line"
grep -q "connections wait to authenticate" controller.log ||
  fail "the controller logged no refusal: $(tail -n 5 controller.log)"

"$AR_CLI" status >root_status.out 2>&1 || fail "root's status during the flood: $(cat root_status.out)"
as_b "$AR_CLI" hello >b_hello.out 2>&1 || fail "user B's hello during the flood: $(cat b_hello.out)"
assert_contains b_hello.out "uid 4242" "user B's hello during the flood"
job=$(cd shared && as_a sbatch --parsable -N1 -o a.log -e a.err --wrap 'srun --auto-resume=1 true')
wait_until 60 "user A's protected job to finish" queue_empty
assert_not_contains shared/a.err "protection is OFF" "a protected srun during the flood"
"$AR_CLI" status --job "$job" | grep -q "^$job " ||
  fail "the step of job $job is not registered: $(cat shared/a.err)"

touch flood.stop
read -r -t 30 -u 3 line || fail "the flood did not stop"
count=${line#closed }
((count >= 1100)) || fail "the controller closed only $count of the flood's connections"
refusals=$(grep -c "refused" controller.log)
((refusals <= 20)) || fail "$refusals refusal lines logged for $count closed connections"
note "the controller closed $count of the flood's connections and logged $refusals refusal lines"
"$AR_CLI" hello >/dev/null || fail "the controller stopped answering after the flood"
controller_down
note "ok"
