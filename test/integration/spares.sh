#!/usr/bin/env bash
# provider=spares: the controller keeps one spare per partition, drained with
# reason "spare" so that normal jobs do not land on it; a resume takes the
# spare at once (no waiting for a replacement), the failed node is replaced
# in the background and goes back to the pool as the new spare.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

cluster_up --nodes 5 --accounting
CONTROLLER_PROVIDER="provider=spares
spares=1
local_restart_command=$CLUSTER_CMD restart-node $CLUSTER {node} --kill"
CONTROLLER_CONF='end_window=1' controller_up
cd "$WORK" || exit
spares() { sinfo -h -N -t drain -R -o '%N %E' | awk '$2 == "spare" {print $1}' | sort | paste -sd,; }
one_spare() { [[ $(spares) =~ ^node[0-9]$ ]]; }
wait_until 20 "a spare in the pool" one_spare
spare=$(spares)
note "the spare: $spare"
# The event follows the drain's answer, at the controller's next look.
wait_until 10 "the pool's event" event_seen "node $spare spare_added: $spare drained as a spare of partition [a-z]+ \(1 of 1\)"

make_training_step
make_training_job 400
job=$(sbatch --parsable -N4 -o job.out job.sh)
wait_until 60 "attempt 0 on 4 nodes" started 0
wait_until 30 "attempt 0 to reach step 3" past 3
# Normal work does not use the spare (a whole node is free only there).
plain=$(sbatch --parsable -N1 --exclusive --wrap "true")
waits_for_resources() { [[ $(squeue -h -j "$plain" -o %r) == Resources ]]; }
wait_until 10 "the plain job to wait for resources" waits_for_resources
[[ $(squeue -h -j "$plain" -o %T) == PENDING ]] || fail "the plain job ran: $(squeue -h -j "$plain")"

# The fault: the third node of the job (not its batch host).
victim=$(scontrol show hostnames "$(job_field NodeList)" | sed -n 3p)
"$CLUSTER_CMD" kill-node "$CLUSTER" "$victim" >/dev/null
killed_at=$SECONDS
wait_until 30 "attempt 1 on 4 nodes" started 1
note "attempt 1 running $((SECONDS - killed_at)) s after $victim was killed"
assert_contains step.out "^0: attempt=1 .* nodes=[^ ]*$spare" "attempt 1 on the spare"
"$AR_CLI" events >events.txt
assert_contains events.txt "job $job [^ ]+ spare_taken: spare $spare of partition [a-z]+ taken for job $job" "the step's event"
# The failed node is replaced in the background and becomes the new spare.
wait_until 90 "$victim back as the spare" event_seen "node $victim replaced: $victim is back in service: .* kept as a spare of [a-z]+"
victim_is_spare() { [[ $(spares) == "$victim" ]]; }
wait_until 20 "$victim in the pool" victim_is_spare
scancel "$plain" "$job"
wait_until 60 "the job to end" job_ended
note "ok"
