#!/bin/bash
#SBATCH --job-name=train-auto-resume
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=1
#SBATCH --exclusive
# A batch job whose training step asks for auto-resume: a PyTorch DDP
# training over all nodes of the job, one torchrun per node, that checkpoints
# every 10 steps and resumes from its last checkpoint when relaunched.
# Submit it from the repository's top folder (the job runs there):
#   sbatch examples/batch.sh                      # 100 steps of 0.1 s
#   sbatch examples/batch.sh --steps 500 --checkpoint-every 50
# Arguments, if any, replace the default training arguments below. The
# checkpoints go to $CHECKPOINT_DIR if set (sbatch passes your environment
# on), else to checkpoints/JOB_ID under the folder the job was submitted from;
# see examples/README.md.
# The one srun below is what auto-resume protects; give --auto-resume=1 to
# sbatch instead to make it the default for every srun of the job. The
# training beats through AUTO_RESUME_PROGRESS (examples/train.py), so
# --auto-resume-hang-timeout=auto also relaunches it when it hangs, from a
# timeout learned from its own pace (docs/resume.md, "Hangs and crashes").
set -euo pipefail

args=("$@")
((${#args[@]})) || args=(--steps 100 --checkpoint-every 10 --step-seconds 0.1)
srun --auto-resume=1 --auto-resume-hang-timeout=auto examples/train_auto_resume.sh "${args[@]}"
