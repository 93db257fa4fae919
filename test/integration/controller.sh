#!/usr/bin/env bash
# auto-resumed end to end: a flagged step registers, users see and touch only
# their own jobs, sessions and signatures are checked (protocol v2), a v1
# client is told the upgrade order, bad messages get an error reply without
# disturbing anyone, and what was registered survives a controller killed
# with SIGKILL.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"
share_with_users  # users A and B run the CLI and wire.py

cluster_up --nodes 2
controller_up
cd "$WORK" || exit
wire() { python3 "$TEST_TOOLS/wire.py" "$CONTROLLER_PORT" "$@"; }
json_field() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }
# step_values KEY: the sorted KEY of every step in a `status --json` on stdin.
step_values() {
  python3 -c "import json,sys; print(sorted(s['$1'] for s in json.load(sys.stdin)['steps']))"
}
register_body() {  # JOB_ID -> a register request's body
  printf '{"id":1,"op":"register","job_id":%s,"step_id":0,"run_id":"r-%s","attempt":0,"argv":["srun","x"],"cwd":"/","nodelist":"node1"}' "$1" "$1"
}

# A flagged step in a batch job registers with srun's argv and cwd; its
# tasks know the run id.
cat >job.sh <<'SCRIPT'
#!/bin/bash
srun -N2 --auto-resume=1 bash -c 'printenv AUTO_RESUME_RUN_ID AUTO_RESUME_ATTEMPT; until [ -e finish ]; do sleep 0.2; done' > step.out 2> step.err
SCRIPT
job=$(sbatch --parsable -N2 -o job.log job.sh)
tasks_printed() { [[ $(wc -l <step.out 2>/dev/null) == 4 ]]; }  # two lines a task
wait_until 30 "the step's tasks to start" tasks_printed
assert_not_contains step.err "protection is OFF" "a flagged step with the controller up"
run_id=$(head -n 1 step.out)
[[ $run_id == "$job.0-"* ]] || fail "tasks saw AUTO_RESUME_RUN_ID='$run_id'"
"$AR_CLI" status --json >status.json
assert_eq "$(json_field "['steps'][0]['run_id']" <status.json)" "$run_id" "registered run id"
assert_eq "$(json_field "['steps'][0]['job_id']" <status.json)" "$job" "registered job id"
assert_eq "$(json_field "['steps'][0]['attempt']" <status.json)" 0 "registered attempt"
# (srun's own argv[0]: a path under the sanitizer build's wrapper.)
assert_eq "$(json_field "['steps'][0]['argv'][1:3]" <status.json)" "['-N2', '--auto-resume=1']" "registered argv"
assert_eq "$(json_field "['steps'][0]['argv'][0].rsplit('/', 1)[-1]" <status.json)" srun "registered argv[0]"
assert_eq "$(json_field "['steps'][0]['argv'][-2]" <status.json)" "-c" "registered argv"
assert_eq "$(json_field "['steps'][0]['cwd']" <status.json)" "$WORK" "registered cwd"
touch finish
wait_until 30 "job $job to finish" queue_empty
# Decided: of srun's argv the store keeps its program's name alone, and no cwd.
"$AR_CLI" status --json >status.json
assert_eq "$(json_field "['steps'][0]['argv'].__len__()" <status.json)" 1 "the words of a decided step's argv"
assert_eq "$(json_field "['steps'][0]['argv'][0].rsplit('/', 1)[-1]" <status.json)" srun "a decided step's argv[0]"
assert_eq "$(json_field "['steps'][0]['cwd']" <status.json)" "" "a decided step's cwd"
"$AR_CLI" status | grep -q "^$job " || fail "auto-resume status does not list job $job"
"$AR_CLI" events | grep -q "job $job $run_id registered" || fail "no registered event: $("$AR_CLI" events)"

# Another user's job: user A (nobody) sees their own step, not root's; user B
# (a uid without any job) sees nothing and may not register A's job.
mkdir shared && chmod 777 shared
as_a() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
as_b() { setpriv --reuid=4242 --regid=4242 --clear-groups "$@"; }
a_job=$(cd shared && as_a sbatch --parsable -N1 -o a.log --wrap 'srun --auto-resume=1 true')
wait_until 30 "user A's job to finish" queue_empty
a_view=$(as_a "$AR_CLI" status --json | step_values job_id)
assert_eq "$a_view" "[$a_job]" "the jobs user A sees"
b_view=$(as_b "$AR_CLI" status --json | json_field "['steps'].__len__()")
assert_eq "$b_view" 0 "the number of steps user B sees"
root_view=$("$AR_CLI" status --json | step_values job_id)
assert_eq "$root_view" "[$job, $a_job]" "the jobs root sees"
# Pages: the newest step, then the cursor to the rest.
"$AR_CLI" status --limit 1 --json 2>more.err | step_values job_id >newest.out
assert_eq "$(cat newest.out)" "[$a_job]" "the newest step, with --limit 1"
cursor=$(sed -n 's/^auto-resume: more to list: add --before \([0-9]*\)$/\1/p' more.err)
[[ -n $cursor ]] || fail "no cursor after --limit 1: $(cat more.err)"
assert_eq "$("$AR_CLI" status --before "$cursor" --json | step_values job_id)" "[$job]" \
  "the steps before the cursor"
as_b /usr/bin/python3 "$TEST_TOOLS/wire.py" "$CONTROLLER_PORT" @hello \
  "@req:$(register_body "$a_job")" >b_register.out
assert_contains b_register.out "uid 4242" "user B's session"
assert_contains b_register.out '"code":"forbidden"' "user B registering user A's job"
assert_contains b_register.out "belongs to uid $(id -u nobody)" "user B registering user A's job"

# Sessions: a credential that is not valid, made for protocol v1, without
# payload, or replayed is refused, and the connection closed.
hello_line() { printf '{"v":2,"hello":"{}","cred":"%s"}' "$1"; }  # CRED
wire "$(hello_line garbage)" @hello >bad_cred.out
assert_contains <(sed -n 1p bad_cred.out) '"code":"unauthenticated"' "a garbage credential"
assert_eq "$(sed -n 2p bad_cred.out)" "<closed>" "the connection after a refused hello"
wire "$(hello_line "$(munge -s "slurm-auto-resume/1 hello" -S "$AUTO_RESUME_MUNGE_SOCKET")")" >v1_cred.out
assert_contains v1_cred.out "not made for this hello" "a v1 credential"
wire "$(hello_line "$(munge -n -S "$AUTO_RESUME_MUNGE_SOCKET")")" >no_payload.out
assert_contains no_payload.out '"code":"unauthenticated"' "a credential without payload"
WIRE_SAVE=$WORK/hello.line wire @hello >first.out
assert_contains first.out "^session [0-9a-f]+ uid 0$" "a fresh hello"
wire "$(cat hello.line)" >replay.out
assert_contains replay.out '"code":"unauthenticated"' "a replayed hello"

# Signed requests: one altered on the way, or sent twice, is refused, and
# the connection closed; a v1 client is told the upgrade order.
wire @hello '@req:{"op":"status","job_id":777}' @tamper:777:778 >tamper.out
assert_contains <(sed -n 2p tamper.out) '"steps":' "a signed request"
assert_contains <(sed -n 3p tamper.out) "MAC does not match" "an altered request"
wire @hello '@req:{"op":"status","job_id":777}' @replay @hello >seq.out
assert_contains <(sed -n 3p seq.out) "sequence number 1 is not above 1" "a replayed request"
assert_eq "$(sed -n 4p seq.out)" "<closed>" "the connection after a replayed request"
wire '{"v":1,"id":2,"op":"hello","cred":"x"}' >v1.out
assert_contains v1.out '"code":"bad_version"' "a v1 request"
assert_contains v1.out "upgrade the controller first, then the login and batch hosts" "a v1 request"

# Bad messages: an error reply each; a malformed request leaves its session
# usable, an oversized line closes it; a client connected meanwhile is served
# while another holds its connection in the middle of a line.
wire 'not json' >not_json.out
assert_contains not_json.out '"code":"bad_request"' "a first line that is not JSON"
wire @hello '@req:not json' '@req:{"id":1}' '@req:{"op":"hello"}' >bad.out
assert_contains <(sed -n 2p bad.out) '"code":"bad_request"' "a request that is not JSON"
assert_contains <(sed -n 3p bad.out) "missing field 'op'" "a request without op"
assert_contains <(sed -n 4p bad.out) '"ok":true' "a good request after bad ones in the same session"
# The bystander sends the first half of a line and holds its connection
# there until the file bystander.go appears (at most 30 s), then sends the
# rest: a server that serves one connection at a time answers nobody else
# meanwhile.
exec 3< <(python3 -c '
import os, socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=40)
s.sendall(b"{\"v\":1,\"op\":\"x\",")
print("connected", flush=True)
deadline = time.monotonic() + 30
while not os.path.exists(sys.argv[2]) and time.monotonic() < deadline:
    time.sleep(0.05)
s.sendall(b"\"cred\":\"x\"}\n")
print(s.makefile().readline().strip() or "<closed>", flush=True)' "$CONTROLLER_PORT" "$WORK/bystander.go")
on_exit "touch $WORK/bystander.go"  # a failed test does not wait for it
read -r -t 30 -u 3 line || fail "the bystander client did not connect"
assert_eq "$line" connected "the bystander client"
timeout 10 python3 "$TEST_TOOLS/wire.py" "$CONTROLLER_PORT" @hello @big:140000 @hello >big.out ||
  fail "a client was not answered within 10 s while another held its connection mid-line"
assert_contains <(sed -n 2p big.out) '"code":"too_large"' "a 140000-byte line"
assert_eq "$(sed -n 3p big.out)" "<closed>" "the connection after an oversized line"
touch bystander.go
read -r -t 30 -u 3 line || fail "the bystander got no reply to its line once it completed it"
# Within auth_timeout (5 s) it is told its version; later it was closed.
[[ $line == *'"code":"bad_version"'* || $line == "<closed>" ]] || fail "the bystander got: $line"
"$AR_CLI" hello >/dev/null || fail "the controller stopped answering after bad input"

# SIGKILL, then start again: every registration is still there.
run_ids() { "$AR_CLI" status --json | step_values run_id; }
before=$(run_ids)
kill -KILL "$CONTROLLER_PID"
wait "$CONTROLLER_PID" 2>/dev/null || true
controller_up
after=$(run_ids)
assert_eq "$after" "$before" "steps after a restart"
[[ $after == *"$run_id"* ]] || fail "run $run_id lost across a controller SIGKILL: $after"
controller_down

# With the controller down, user A binds its port and answers a session's
# hello as well as it can (a credential of its own): root's CLI does not
# believe it.
exec 4< <(as_a /usr/bin/python3 -c '
import hashlib, json, socket, subprocess, sys
server = socket.create_server(("127.0.0.1", int(sys.argv[1])))
print("listening", flush=True)
conn, _ = server.accept()
body = json.loads(conn.makefile().readline())["hello"]
payload = "slurm-auto-resume/2 session 00 %s %s" % (hashlib.sha256(body.encode()).hexdigest(), "ab" * 32)
cred = subprocess.run(["munge", "-s", payload, "-u", "0", "-S", sys.argv[2]], check=True,
                      capture_output=True, text=True).stdout.strip()
conn.sendall((json.dumps({"v": 2, "session": "00", "cred": cred}) + "\n").encode())
conn.makefile().readline()' "$CONTROLLER_PORT" "$AUTO_RESUME_MUNGE_SOCKET")
read -r -t 30 -u 4 line || fail "user A's fake controller did not start"
assert_eq "$line" listening "user A's fake controller"
if "$AR_CLI" hello >fake.out 2>&1; then fail "root's CLI believed a fake controller: $(cat fake.out)"; fi
assert_contains fake.out "comes from uid $(id -u nobody)" "root's CLI talking to a fake controller"
assert_contains fake.out "not the controller" "root's CLI talking to a fake controller"
note "ok"
