#!/usr/bin/env bash
# The local cluster runs real jobs on all its nodes: sbatch and salloc.
# shellcheck source=test/integration/lib.sh
source "$(dirname "$0")/lib.sh"

cluster_up --nodes 4
[[ $(sinfo -h -N -o '%N %T' | sort | tr '\n' ' ') == "node1 idle node2 idle node3 idle node4 idle " ]] ||
  fail "expected 4 idle nodes, got: $(sinfo -h -N -o '%N %T' | tr '\n' ' ')"

cat >"$WORK/job.sh" <<'SCRIPT'
#!/bin/bash
srun -N4 hostname > hosts.txt
srun -N4 printenv SLURMD_NODENAME | sort > names.txt
SCRIPT
(cd "$WORK" && sbatch --wait -N4 -o "$WORK/job.out" "$WORK/job.sh" >/dev/null) ||
  fail "sbatch job failed: $(cat "$WORK/job.out")"
assert_eq "$(wc -l <"$WORK/hosts.txt")" 4 "hostname lines"
assert_eq "$(tr '\n' ' ' <"$WORK/names.txt")" "node1 node2 node3 node4 " "SLURMD_NODENAME of the 4 tasks"

out=$(salloc -N2 srun -N2 printenv SLURMD_NODENAME 2>"$WORK/salloc.err" | sort | tr '\n' ' ') ||
  fail "salloc failed: $(cat "$WORK/salloc.err")"
[[ $out =~ ^node[1-4]\ node[1-4]\ $ ]] || fail "salloc -N2 srun -N2 gave: '$out'"
read -r a b <<<"$out"
[[ $a != "$b" ]] || fail "salloc's two tasks ran on the same node: $out"
note "ok"
