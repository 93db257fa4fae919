#!/usr/bin/env bash
# The hostile-input suite (issue 10, "Prove it"): two unprivileged users of
# the test's own, A and B, on a local cluster with the controller. A replays
# each hole that is closed so far as crafted requests and ordinary Slurm
# commands; each must be refused or harmless: no node marked (state and
# reason), none replaced (its slurmd instance and the controller's
# replacements), no job grown. In the same run B's protected step survives a
# real node kill and is relaunched: the hostile traffic hurt no one else.
#
# One function per hole. Every raw request goes through request_as and
# requests_as (framing and credentials in wire.py --requests), so that a new
# protocol version changes them in one place.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

# ---------------------------------------------------------------------------
# The two users, made here with fixed unusual names and uids. Tests running
# at once share them: each holds them with a file under $USERS_HOLDERS while
# it runs, and the last one to end removes them.
USER_A=arhostile1 UID_A=47101
USER_B=arhostile2 UID_B=47102
USERS_LOCK=/tmp/arhostile-users.lock
USERS_HOLDERS=/tmp/arhostile-users.d

user_up() {  # NAME UID: make the user, or check the one there
  local name=$1 uid=$2 have
  if have=$(id -u "$name" 2>/dev/null); then
    [[ $have == "$uid" ]] || fail "user $name exists with uid $have, not the test's $uid"
    return
  fi
  ! getent passwd "$uid" >/dev/null || fail "uid $uid is taken by $(getent passwd "$uid" | cut -d: -f1)"
  useradd --uid "$uid" --user-group --no-create-home --shell /usr/sbin/nologin "$name" ||
    fail "cannot add user $name (uid $uid)"
}
users_up() {
  (
    flock 9
    mkdir -p "$USERS_HOLDERS"
    touch "$USERS_HOLDERS/$$"
    user_up "$USER_A" "$UID_A"
    user_up "$USER_B" "$UID_B"
  ) 9>"$USERS_LOCK"
}
users_down() {
  (
    flock 9
    rm -f "$USERS_HOLDERS/$$"
    local holder
    for holder in "$USERS_HOLDERS"/*; do
      [[ -e $holder ]] || continue
      kill -0 "${holder##*/}" 2>/dev/null && exit 0  # another test still uses them
      rm -f "$holder"
    done
    local user
    for user in "$USER_A" "$USER_B"; do
      ! id -u "$user" >/dev/null 2>&1 || userdel --force "$user" ||
        echo "warning: cannot remove the test's user $user" >&2
    done
  ) 9>"$USERS_LOCK"
}
# The users' Python: the system's (root's own may live where they cannot go).
USER_PYTHON=/usr/bin/python3
[[ -x $USER_PYTHON ]] || fail "this test runs $USER_PYTHON as its users, and there is none"
user_of() {  # WHO: the name of user a or b
  case $1 in a) echo "$USER_A" ;; b) echo "$USER_B" ;; *) fail "no test user '$1'" ;; esac
}
# as WHO CMD...: CMD as user WHO (a or b), in that user's own directory.
as() {
  local name
  name=$(user_of "$1")
  shift
  (cd "$WORK/$name" && setpriv --reuid="$name" --regid="$(id -g "$name")" --clear-groups "$@")
}

# ---------------------------------------------------------------------------
# The raw protocol, in one place.
#
# request_as WHO OP FIELDS: one request of OP with FIELDS (a JSON object of
# the op's own fields), signed by WHO (a, b or root); prints the reply line.
request_as() {
  local who=$1
  shift
  if [[ $who == root ]]; then
    python3 "$TEST_TOOLS/wire.py" --requests "$CONTROLLER_PORT" "$1 $2"
  else
    as "$who" "$USER_PYTHON" "$TEST_TOOLS/wire.py" --requests "$CONTROLLER_PORT" "$1 $2"
  fi
}
# requests_as WHO <LINES: each line "OP FIELDS" on one connection, signed by
# WHO; prints one reply line per request.
requests_as() { as "$1" "$USER_PYTHON" "$TEST_TOOLS/wire.py" --requests "$CONTROLLER_PORT"; }

# register_fields JOB STEP RUN [NODELIST [ARGV_JSON [CWD]]]: a register's fields.
register_fields() {
  python3 -c '
import json, sys
job, step, run, nodelist, argv, cwd = sys.argv[1:7]
fields = {"job_id": int(job), "step_id": int(step), "run_id": run, "attempt": 0,
          "argv": json.loads(argv), "cwd": cwd}
if nodelist:
    fields["nodelist"] = nodelist
print(json.dumps(fields))' "$1" "$2" "$3" "${4:-}" "${5:-[\"srun\",\"true\"]}" "${6:-/tmp}"
}
# reply_field LINE EXPR: EXPR of r, a reply line; reply_code LINE: its error
# code, or ok.
reply_field() { python3 -c "import json,sys; r=json.loads(sys.argv[1]); print($2)" "$1"; }
reply_code() { reply_field "$1" "r.get('error', {}).get('code', 'ok' if r.get('ok') else '?')"; }
assert_reply() {  # LINE CODE MESSAGE_PATTERN WHAT
  local code
  code=$(reply_code "$1") || fail "$4: the reply is not JSON: ${1:0:300}"
  [[ $code == "$2" ]] || fail "$4: expected $2, got: ${1:0:600}"
  [[ -z $3 || $1 =~ $3 ]] || fail "$4: the reply does not match /$3/: ${1:0:600}"
}

# ---------------------------------------------------------------------------
# What must not change: marks, replacements, job sizes.

# marks: every node Slurm shows down, failed, drained or not responding, or
# with a reason; one line each ("NODE STATE REASON").
marks() { sinfo -h -N -o '%N %T %E' | awk '$2 ~ /down|fail|drain|\*/ || $3 != "none"'; }
# slurmd_starts: each node's slurmd start time (a replaced node's changes).
slurmd_starts() { scontrol -o show node | grep -o '^NodeName=[^ ]*\| SlurmdStartTime=[^ ]*' | paste -sd' '; }
# replacements: how many nodes the controller's node keeper replaces or did.
replacements() {
  reply_field "$(request_as root nodes '{}')" "len(r['result']['replacements'])"
}
job_nodes() { scontrol -o show job "$1" | grep -o ' NumNodes=[^ ]*' | cut -d= -f2; }
job_state() { scontrol -o show job "$1" | grep -o ' JobState=[^ ]*' | cut -d= -f2; }
declare -A JOB_SIZE  # job id -> the number of nodes it must keep

calm_baseline() { BASE_STARTS=$(slurmd_starts); }
# calm: nothing marked, replaced or grown; says on stderr what changed.
calm() {
  local m job
  m=$(marks)
  [[ -z $m ]] || { echo "nodes marked: $m" >&2; return 1; }
  [[ $(slurmd_starts) == "$BASE_STARTS" ]] ||
    { echo "a slurmd was restarted (replaced): $(slurmd_starts)" >&2; return 1; }
  [[ $(replacements) == 0 ]] ||
    { echo "the controller replaces nodes: $("$AR_CLI" nodes)" >&2; return 1; }
  for job in "${!JOB_SIZE[@]}"; do
    [[ $(job_nodes "$job") == "${JOB_SIZE[$job]}" ]] ||
      { echo "job $job has $(job_nodes "$job") nodes, not ${JOB_SIZE[$job]}" >&2; return 1; }
  done
}
# stays_calm SECONDS AFTER: calm holds for SECONDS (a condition that must
# stay true, polled; it fails at once when it does not).
stays_calm() {
  local deadline=$((SECONDS + $1))
  while ((SECONDS < deadline)); do
    calm || fail "after $2: nothing may be marked, replaced or grown"
    sleep 0.5
  done
}

# ---------------------------------------------------------------------------
# Jobs. hold.sh NAME: each task adds a line to NAME.started, then waits for
# NAME.finish (at most 240 s).
make_scripts() {
  cat >"$WORK/hold.sh" <<SCRIPT
#!/bin/bash
$NAP_LINES
SCRIPT
  cat >>"$WORK/hold.sh" <<'SCRIPT'
echo "attempt=${AUTO_RESUME_ATTEMPT:-none} rank=$SLURM_PROCID node=$SLURMD_NODENAME" >>"$1.started"
for ((i = 0; i < 1200; i++)); do
  [[ -f $1.finish ]] && exit 0
  nap 0.2
done
exit 1
SCRIPT
  # protected.sh NAME: a protected step of hold.sh, then srun's status.
  cat >"$WORK/protected.sh" <<SCRIPT
#!/bin/bash
srun --auto-resume=1 $WORK/hold.sh "\$1"
echo "srun exit \$?"
SCRIPT
  chmod 755 "$WORK/hold.sh" "$WORK/protected.sh"
}
# submit WHO NAME NODES [protected]: a job of WHO on NODES running hold.sh
# NAME (under WORK/<user>/) in one step, protected or plain; prints its id.
submit() {
  local who=$1 name=$2 nodes=$3 user dir count
  user=$(user_of "$who")
  dir=$WORK/$user
  count=$(scontrol show hostnames "$nodes" | wc -l)
  if [[ ${4:-} == protected ]]; then
    as "$who" sbatch --parsable -N "$count" -w "$nodes" -o "$dir/$name.out" \
      "$WORK/protected.sh" "$dir/$name"
  else
    as "$who" sbatch --parsable -N "$count" -w "$nodes" -o "$dir/$name.out" \
      --wrap "srun $WORK/hold.sh $dir/$name"
  fi
}
# tasks_started WHO NAME ATTEMPT COUNT: COUNT tasks of hold.sh NAME's ATTEMPT ran.
tasks_started() {
  local user
  user=$(user_of "$1")
  [[ $(grep -c "^attempt=$3 " "$WORK/$user/$2.started" 2>/dev/null) == "$4" ]]
}
finish() {  # WHO NAME: let hold.sh NAME end
  local user
  user=$(user_of "$1")
  touch "$WORK/$user/$2.finish"
}
step_nodes() { squeue -h -s --steps="$1" -o %N; }  # JOB.STEP: slurmctld's nodes
# stored JOB EXPR: EXPR (a Python expression of s, the newest stored step of
# JOB) as root's `auto-resume status --json` shows it.
stored() {
  "$AR_CLI" status --job "$1" --json | python3 -c "import json,sys; s=json.load(sys.stdin)['steps'][0]; print($2)"
}
decided() { [[ -n $(stored "$1" "s.get('verdict', '')") ]]; }  # JOB: its newest step is decided

# ---------------------------------------------------------------------------
# Hole 1: a request says which step, never which nodes; nothing the job does
# not hold is marked or replaced; a shrink by the job's user is no fault.
hole1_register() {
  local reply fields step
  for step in 77 4294967291 4294967292; do
    reply=$(request_as a register "$(register_fields "$JOB_A1" "$step" "made-up-$step")")
    case $step in
      77) assert_reply "$reply" not_found "step $JOB_A1\.77" "hole 1: A registers step 77, which slurmctld does not list" ;;
      *) assert_reply "$reply" bad_request "" "hole 1: A registers the batch or extern step $step of A's job" ;;
    esac
  done
  # A real step, with a node list naming B's nodes and an idle node.
  fields=$(register_fields "$JOB_A1" 0 hostile-nodelist "node1,node2,node5")
  assert_reply "$(request_as a register "$fields")" ok '"duplicate":false' \
    "hole 1: A registers a real step of A's job with a crafted nodelist"
  assert_eq "$(stored "$JOB_A1" "s['nodelist']")" "$(step_nodes "$JOB_A1.0")" \
    "hole 1: the stored nodelist of the crafted registration (slurmctld's, not the client's)"
  stays_calm 5 "hole 1: a registration naming B's node1 and node5 and the idle node2"
  # B's job.
  assert_reply "$(request_as a register "$(register_fields "$JOB_B" 0 hostile-b)")" forbidden \
    "belongs to uid $UID_B" "hole 1: A registers B's job"
}
hole1_shrink() {
  local job
  job=$(submit a shrink node3,node4 protected)
  JOB_SIZE[$job]=2
  wait_until 30 "hole 1: A's protected step on node3 and node4" tasks_started a shrink 0 2
  as a scontrol update JobId="$job" NumNodes=1 >/dev/null || fail "hole 1: A cannot shrink A's own job $job"
  JOB_SIZE[$job]=1
  wait_until 20 "hole 1: a verdict for the step of the shrunk job $job" decided "$job"
  assert_eq "$(stored "$job" "s['verdict']")" no_fault "hole 1: the verdict of a step whose job was shrunk"
  [[ $(stored "$job" "s['message']") == *"job $job was shrunk under step $job.0: node4 left it"* ]] ||
    fail "hole 1: the no_fault message of the shrunk job: $(stored "$job" "s['message']")"
  stays_calm 5 "hole 1: A shrank A's job $job off node4 under a protected step"
  finish a shrink
  wait_until 30 "hole 1: the shrunk job $job to end" job_ended_id "$job"
  unset "JOB_SIZE[$job]"
}

# Hole 1 too: a run id says which run; A cannot take, ask about or cancel B's.
hole1_foreign_run() {
  local run fields
  run=$(stored "$JOB_B" "s['run_id']")
  fields=$(register_fields "$JOB_L" 0 "$run" | sed 's/"attempt": 0/"attempt": 1/')
  assert_reply "$(request_as a register "$fields")" forbidden "" \
    "hole 1: A registers A's step as attempt 1 of B's run $run"
  # Answered as an unknown run: neither that it exists nor whose it is.
  assert_reply "$(request_as a verdict "{\"run_id\":\"$run\",\"attempt\":0,\"ended\":true}")" not_found \
    "no step is registered as run '$run' attempt 0" "hole 1: A says B's run $run ended"
  assert_reply "$(request_as a cancel "{\"run_id\":\"$run\",\"attempt\":0}")" not_found \
    "no step is registered as run '$run' attempt 0" "hole 1: A cancels B's run $run"
  assert_eq "$(stored "$JOB_B" "s['state']")" registered "hole 1: B's step after A's requests for its run"
}

# Hole 2: a host list from a request is bounded before it is expanded: one
# 4 KiB list naming millions of hosts changes nothing and stalls nothing.
hole2_nodelist() {
  local ghosts fields reply
  # ghost[0-65535] ranges (about 15 million names) and a last host name
  # that make 4,096 bytes, the field's limit; one byte more is refused.
  ghosts=$(python3 -c '
names, i = "ghost0[0-65535]", 1
while len(names) + len(f",ghost{i}[0-65535]") + 3 <= 4096:
    names += f",ghost{i}[0-65535]"
    i += 1
print(names + ",g" + "x" * (4096 - len(names) - 2))')
  assert_eq "${#ghosts}" 4096 "hole 2: the bytes of the ghost nodelist"
  fields=$(register_fields "$JOB_L" 0 hostile-ghosts-over "${ghosts}x")
  assert_reply "$(request_as a register "$fields")" bad_request "field 'nodelist' is longer than 4096 bytes" \
    "hole 2: A registers a real step with a nodelist over 4 KiB"
  fields=$(register_fields "$JOB_L" 0 hostile-ghosts "$ghosts")
  reply=$(request_as a register "$fields")
  assert_reply "$reply" ok "" "hole 2: A registers a real step with a 4 KiB nodelist of ghost hosts"
  timeout 30 "$AR_CLI" hello >/dev/null ||
    fail "hole 2: the controller did not answer hello after a 4 KiB nodelist"
  assert_eq "$(stored "$JOB_L" "s['nodelist']")" "$(step_nodes "$JOB_L.0")" \
    "hole 2: the stored nodelist of the ghost registration"
  # The engine is not stalled: it decides the step once A says it ended.
  assert_reply "$(request_as a verdict '{"run_id":"hostile-ghosts","attempt":0,"ended":true}')" ok "" \
    "hole 2: A says the ghost registration's step ended"
  wait_until 30 "hole 2: the engine to decide the ghost registration (not stalled by its nodelist)" \
    decided "$JOB_L"
  assert_eq "$(stored "$JOB_L" "s['verdict']")" no_fault "hole 2: the ghost registration's verdict"
  stays_calm 3 "hole 2: a 4 KiB nodelist of ghost hosts"
}

# Hole 3 (idle unauthenticated connections from another uid and address)
# is replayed by flood.sh, which runs the controller under a small
# descriptor limit. Hole 4 (required=1 under an optional plugstack line) is
# replayed by option.sh, which needs clusters with other plugstack lines.
# Hole 5 (a forged controller on the port while the real one is down; a
# replayed, reordered or altered request) is replayed by controller.sh.

# Hole 6: a node agent started with another node's --node (a copied unit
# file) speaks for that node from its own address: refused, the node not
# heard; the node's own agent, sending from its NodeAddr by default, is.
# (heartbeat.sh shows the refused agent hides no frozen node.)
hole6_heartbeat() {
  "$AR_AGENT" --node node2 --source 127.0.0.14 --interval 1 >copied-agent.log 2>&1 &
  local copied=$!
  on_exit "kill -TERM $copied 2>/dev/null"
  wait_until 10 "hole 6: the copied agent's heartbeats refused" grep -q \
    "heartbeat not taken: forbidden: a heartbeat for node2 from 127.0.0.14, which is not the node's address: node2 is at 127.0.0.12 (NodeAddr)" \
    copied-agent.log
  "$AR_CLI" nodes >nodes.txt
  assert_not_contains nodes.txt "node2" "hole 6: root's nodes while only the copied agent speaks for node2"
  agents_up node2
  wait_until 10 "hole 6: node2's own agent heard" heard 1
  assert_contains controller.log "heartbeats: node2 is heard over loopback \(127\.0\.0\.12\)" \
    "hole 6: the controller's warning about loopback origins"
  kill -TERM "$copied" "${AGENT_PID[node2]}"
}
# Hole 7 (srun's wait limits against a half-open controller or one that
# answers wait forever) is replayed by srun_wait.sh; the controller's own
# deadline by the unit tests ([limits]).

# Hole 8: bounded stored sizes and paged replies: long command lines and a
# flood of events leave root's status and events working.
hole8_flood() {
  local big over reply i lines cursor
  big=$(python3 -c 'import json; print(json.dumps(["srun", "x" * 16000]))')
  over=$(python3 -c 'import json; print(json.dumps(["srun", "x" * 16400]))')
  reply=$(request_as a register "$(register_fields "$JOB_L" 0 hostile-over "" "$over")")
  assert_reply "$reply" bad_request "more than the limit of 16384" \
    "hole 8: A registers a step whose argv is over 16 KiB"
  # The flood: FLOOD_RUNS registrations (the first 20 with a 16,000-byte
  # argv), each cancelled at once (two events each); a run id with
  # terminal escape sequences (refused: a run id holds letters, digits and
  # ._:@+- only), and a reason with them and a line separator (hole 10).
  for ((i = 0; i < FLOOD_RUNS; i++)); do
    if ((i < 20)); then
      echo "register $(register_fields "$JOB_L" 0 "hostile-flood-$i" "" "$big")"
    else
      echo "register $(register_fields "$JOB_L" 0 "hostile-flood-$i")"
    fi
    echo "cancel {\"run_id\":\"hostile-flood-$i\",\"attempt\":0}"
  done >flood.req
  printf '%s\n' "register $(register_fields "$JOB_L" 0 $'esc-\e]0;pwned\a-\e[2J')" \
    "register $(register_fields "$JOB_L" 0 hostile-esc)" \
    "cancel $(python3 -c 'import json; print(json.dumps({"run_id": "hostile-esc", "attempt": 0, "reason": "\x1b[31mred\x1b[0m reason\x07\u2028uid=0 op=replace"}))')" >>flood.req
  requests_as a <flood.req >flood.out
  assert_eq "$(wc -l <flood.out)" "$(wc -l <flood.req)" "hole 8: replies to A's flood"
  assert_eq "$(grep -c '"ok":true' flood.out)" "$(($(wc -l <flood.req) - 1))" "hole 8: accepted requests of A's flood"
  assert_reply "$(grep -v '"ok":true' flood.out)" bad_request \
    "field 'run_id' may hold only letters, digits and ._:@\+-, got .*esc-" \
    "hole 10: A registers a run id with escape sequences"
  # Root's raw replies fit the line limit.
  reply=$(request_as root status '{"limit":1000}')
  # (Its steps are decided: their argv is forgotten, hole 12, so the reply
  # is no longer cut short by its bytes.)
  assert_reply "$reply" ok '' "hole 8: root's status of 1000 rows"
  ((${#reply} < 65536)) || fail "hole 8: root's status reply line is ${#reply} bytes"
  reply=$(request_as root events '{"limit":1000}')
  assert_reply "$reply" ok "" "hole 8: root's events of 1000 rows"
  ((${#reply} < 65536)) || fail "hole 8: root's events reply line is ${#reply} bytes"
  # Root's CLI: every step and event, and pages with a cursor.
  "$AR_CLI" status --limit 1000 >status.txt 2>status.err || fail "hole 8: root's status failed: $(cat status.err)"
  lines=$(grep -c ' hostile-flood-' status.txt)
  assert_eq "$lines" "$FLOOD_RUNS" "hole 8: flood steps in root's status --limit 1000"
  "$AR_CLI" events >events.txt 2>events.err || fail "hole 8: root's events failed: $(cat events.err)"
  assert_eq "$(grep -c ' hostile-flood-[0-9]* cancelled: ' events.txt)" "$FLOOD_RUNS" \
    "hole 8: cancelled flood runs in root's events"
  awk 'length($0) >= 65536 { exit 1 }' status.txt events.txt || fail "hole 8: a line of 64 KiB or more"
  "$AR_CLI" status --limit 3 >spage1.txt 2>spage1.err || fail "hole 8: status --limit 3: $(cat spage1.err)"
  cursor=$(sed -n 's/^auto-resume: more to list: add --before \([0-9]*\)$/\1/p' spage1.err)
  [[ -n $cursor ]] || fail "hole 8: no cursor after status --limit 3: $(cat spage1.err)"
  "$AR_CLI" status --before "$cursor" --limit 3 >spage2.txt 2>/dev/null
  # The tables without the controller's own line (mode, pause, breaker) and their headers.
  table() { grep -v '^controller: ' "$1"; }
  assert_eq "$(table spage1.txt | tail -n +2; table spage2.txt | tail -n +2)" \
    "$(table status.txt | sed -n 2,7p)" \
    "hole 8: two pages of 3 steps in root's status"
  "$AR_CLI" events --limit 5 >page1.txt 2>page1.err || fail "hole 8: events --limit 5: $(cat page1.err)"
  assert_eq "$(wc -l <page1.txt)" 5 "hole 8: events with --limit 5"
  cursor=$(sed -n 's/^auto-resume: more to list: add --after \([0-9]*\)$/\1/p' page1.err)
  [[ -n $cursor ]] || fail "hole 8: no cursor after events --limit 5: $(cat page1.err)"
  "$AR_CLI" events --after "$cursor" --limit 5 >page2.txt 2>/dev/null
  assert_eq "$(cat page1.txt page2.txt)" "$(head -n 10 events.txt)" "hole 8: two pages of 5 events"
}

# Hole 12: the store's growth is bounded. A job registers at most
# max_job_steps_per_hour steps (70 here: the flood took 61): the next are
# refused (`busy`, naming the cap) and said once as a step_refused event; a
# decided step keeps its program's name alone of its argv (the flood's
# first 20 had 16,000 bytes each), and no cwd;
# another job of A's still registers.
hole12_growth() {
  local i replies
  for ((i = 0; i < 12; i++)); do
    echo "register $(register_fields "$JOB_L" 0 "hostile-cap-$i")"
    echo "cancel {\"run_id\":\"hostile-cap-$i\",\"attempt\":0}"
  done >cap.req
  requests_as a <cap.req >cap.out
  replies=$(grep -c '"error"' cap.out || true)
  ((replies > 0)) || fail "hole 12: A registered 73 steps in job $JOB_L within the hour, none refused"
  assert_reply "$(grep -m1 '"error"' cap.out)" busy \
    "job $JOB_L registered 70 protected steps within the last hour \(max_job_steps_per_hour=70\)" \
    "hole 12: A's registration past the job's cap"
  "$AR_CLI" events >cap-events.txt
  assert_eq "$(grep -c " step_refused: " cap-events.txt)" 1 "hole 12: step_refused events for the refused registrations"
  python3 - "$WORK/state/auto-resume.db" >cap-argv.txt <<'PY'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
print(db.execute("SELECT COUNT(*) FROM steps WHERE state = 'decided' AND"
                 " (json_array_length(argv) > 1 OR cwd != '')").fetchone()[0])
PY
  assert_eq "$(cat cap-argv.txt)" 0 "hole 12: decided steps that keep their argv"
  # (hole 1's registration in it goes first: one protected run a job.)
  assert_reply "$(request_as a cancel '{"run_id":"hostile-nodelist","attempt":0}')" ok "" \
    "hole 12: A cancels hole 1's registration"
  assert_reply "$(request_as a register "$(register_fields "$JOB_A1" 0 hostile-cap-other)")" ok "" \
    "hole 12: A registers in another job"
  assert_reply "$(request_as a cancel '{"run_id":"hostile-cap-other","attempt":0}')" ok "" \
    "hole 12: A cancels it"
}

# Hole 11 (audit) is checked at the end, on the repair of B's job.

# Hole 9: state_dir: a shared (1777) folder or another user's is refused,
# and left as it is.
hole9_state_dir() {
  local dir rc
  for dir in "$WORK/state-shared" "$WORK/state-of-a"; do
    mkdir "$dir"
    sed -e "s|^state_dir=.*|state_dir=$dir|" -e "s|^listen=.*|listen=127.0.0.1:$(free_port)|" \
      "$WORK/auto-resumed.conf" >"$dir.conf"
  done
  chmod 1777 "$WORK/state-shared"
  chown "$USER_A:" "$WORK/state-of-a"
  chmod 700 "$WORK/state-of-a"
  for dir in "$WORK/state-shared" "$WORK/state-of-a"; do
    rc=0
    timeout 30 "$AR_DAEMON" --config "$dir.conf" >"$dir.log" 2>&1 || rc=$?
    ((rc != 0 && rc != 124)) || fail "hole 9: the controller with state_dir $dir: exit status $rc"
  done
  assert_contains "$WORK/state-shared.log" \
    "state_dir $WORK/state-shared may be written by others \(mode 1777\)" "hole 9: a world-writable state_dir"
  assert_eq "$(stat -c %a "$WORK/state-shared")" 1777 "hole 9: the refused world-writable state_dir's mode"
  assert_contains "$WORK/state-of-a.log" \
    "state_dir $WORK/state-of-a belongs to uid $UID_A, not to this controller's uid 0" \
    "hole 9: a state_dir of another user"
  assert_eq "$(stat -c %u:%a "$WORK/state-of-a")" "$UID_A:700" "hole 9: the refused state_dir of A"
}

# Hole 10: what users chose reaches root's terminal escaped (the flood of
# hole 8 carried the sequences).
hole10_escapes() {
  local file
  for file in status.txt events.txt; do
    assert_not_contains "$file" $'[\x01-\x08\x0b-\x1f\x7f]' "hole 10: root's $file (raw control characters)"
  done
  assert_not_contains status.txt 'pwned' "hole 10: the refused run id in root's status"
  assert_contains events.txt 'hostile-esc cancelled: \\x1b\[31mred\\x1b\[0m reason\\x07\\u2028uid=0 op=replace' \
    "hole 10: the reason in root's events"
}

# ---------------------------------------------------------------------------
FLOOD_RUNS=60
phase() {  # FUNCTION: run it, saying when it began
  note "$1 (at ${SECONDS} s)"
  "$1"
}
# The users go once the cluster is down (lib.sh's _cleanup, in a subshell
# that ends with the test's status), whatever happens.
_exit_and_remove_users() {
  local rc=$?
  (
    set +e
    (exit "$rc")
    _cleanup
  )
  rc=$?
  users_down
  exit "$rc"
}
trap _exit_and_remove_users EXIT
users_up
share_with_users
cluster_up --nodes 5
CONTROLLER_CONF=$'end_window=1\nbackoff=1\nmax_job_steps_per_hour=70' controller_up
cd "$WORK" || exit
for user in "$USER_A" "$USER_B"; do
  mkdir "$WORK/$user"
  chown "$user:" "$WORK/$user"
done
make_scripts
phase hole9_state_dir

# B's protected step (node1, node5; its batch host node1), and A's job with
# a plain step on node3 and node4; node2 idle. (Each job's batch host is its
# first node, and stays first after the repair: see the kill below.)
JOB_B=$(submit b train node1,node5 protected)
JOB_A1=$(submit a plain node3,node4)
JOB_SIZE=([$JOB_B]=2 [$JOB_A1]=2)
wait_until 30 "B's protected step on node1 and node5" tasks_started b train 0 2
wait_until 30 "A's plain step on node3 and node4" tasks_started a plain none 2
calm_baseline
calm || fail "before the hostile requests: the cluster is not calm"
phase hole1_register
phase hole1_shrink

# A's plain step on node2, for the flood.
JOB_L=$(submit a flood node2)
JOB_SIZE[$JOB_L]=1
wait_until 30 "A's plain step on node2" tasks_started a flood none 1
phase hole1_foreign_run
phase hole2_nodelist
phase hole8_flood
phase hole12_growth
phase hole10_escapes
phase hole6_heartbeat
stays_calm 2 "holes 2, 6, 8 and 10"

# Hole 10, helper clean-up, and B's step through a real node kill: A's
# protected job J (node2, node5; batch host node2) and B's job share node5;
# B holds a job named as J's expand helper. node5 is killed: both steps are
# relaunched on node3 and node4, idle by then, and B's job of that name is
# left alone. The replacements sort after the batch hosts: a job whose first
# node is no longer its batch host is requeued by Slurm ("Batch JobId=J
# missing from batch node") when that first node registers; see the report.
note "the node kill (at $SECONDS s)"
JOB_A3=$(submit a repair node2,node5 protected)
wait_until 30 "A's protected step on node2 and node5" tasks_started a repair 0 2
decoy=$(as b sbatch --parsable --hold -J "auto-resume-expand-$JOB_A3" -o /dev/null --wrap true)
for job in "$JOB_A1" "$JOB_L"; do
  finish a "$([[ $job == "$JOB_A1" ]] && echo plain || echo flood)"
  wait_until 30 "A's job $job to end" job_ended_id "$job"
done
wait_until 30 "node3 and node4 idle, for the replacements" eval 'node_is node3 idle && node_is node4 idle'
"$CLUSTER_CMD" kill-node "$CLUSTER" node5 >/dev/null
killed=$SECONDS
wait_until 90 "B's step relaunched as attempt 1 on 2 nodes" tasks_started b train 1 2
note "node5 killed: B's attempt 1 running $((SECONDS - killed)) s later"
wait_until 60 "A's step relaunched as attempt 1 on 2 nodes" tasks_started a repair 1 2
# The repair submitted a helper, so its clean-up by name ran before.
# (Into a file: grep -q on a pipe would stop the CLI with SIGPIPE.)
"$AR_CLI" events >repair-events.txt
assert_contains repair-events.txt "job $JOB_A3 [^ ]+ expand_helper: helper job [0-9]+ allocates " \
  "hole 10: the events of the repair of A's job $JOB_A3 (an expand helper)"
assert_eq "$(job_state "$decoy")" PENDING \
  "hole 10: B's held job $decoy named auto-resume-expand-$JOB_A3, after the repair of A's job"
finish b train
finish a repair
wait_until 30 "B's job $JOB_B to end" job_ended_id "$JOB_B"
wait_until 30 "A's job $JOB_A3 to end" job_ended_id "$JOB_A3"
assert_eq "$(job_state "$decoy")" PENDING \
  "hole 10: B's held job $decoy named auto-resume-expand-$JOB_A3, after A's job ended"
scancel "$decoy"

b_out=$WORK/$USER_B/train.out
cat "$b_out"
assert_eq "$(job_state "$JOB_B")" COMPLETED "B's job after the node kill"
assert_contains "$b_out" "relaunching step $JOB_B\.0 of run $JOB_B\.0-[0-9a-f]{8} as attempt 1 on " "B's srun"
assert_contains "$b_out" "^srun exit 0$" "B's batch script"
"$AR_CLI" status --job "$JOB_B" --json >b-status.json
assert_eq "$(python3 -c 'import json,sys; print(sorted((s["attempt"], s.get("verdict", "")) for s in json.load(sys.stdin)["steps"]))' <b-status.json)" \
  "[(0, 'relaunch'), (1, 'no_fault')]" "the verdicts of B's run"
assert_eq "$(job_state "$JOB_A3")" COMPLETED "A's job after the node kill"

# Hole 11: what root did for B is audited with B's uid, op and run, in the
# log and in the events.
b_run=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["steps"][0]["run_id"])' <b-status.json)
assert_contains "$WORK/controller.log" \
  "auto-resumed audit: uid=$UID_B op=register run=$b_run node_out: job $JOB_B: node5 set FAIL" \
  "hole 11: the audit line of B's node_out"
"$AR_CLI" events --json >events.json
assert_eq "$(python3 -c 'import json,sys; print(sorted({e["uid"] for e in json.load(sys.stdin)["events"] if e["run_id"] == sys.argv[1]}))' "$b_run" <events.json)" \
  "[$UID_B]" "hole 11: the uid on the events of B's run"
note "ok"
