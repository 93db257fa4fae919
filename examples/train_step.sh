#!/bin/bash
# A stand-in for a training launcher: one task per node reports where it runs
# and whether the step runs with auto-resume (AUTO_RESUME=1), then does a few
# "steps". The real PyTorch example replaces it.
set -euo pipefail
echo "rank ${SLURM_PROCID}/${SLURM_NTASKS} on ${SLURMD_NODENAME}: AUTO_RESUME=${AUTO_RESUME:-unset} run ${AUTO_RESUME_RUN_ID:-none} attempt ${AUTO_RESUME_ATTEMPT:-none}"
for step in 1 2 3; do
  sleep 0.2
  [[ $SLURM_PROCID != 0 ]] || echo "step $step done"
done
