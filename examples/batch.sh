#!/bin/bash
#SBATCH --job-name=train-auto-resume
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=1
#SBATCH --exclusive
# A batch job whose training step asks for auto-resume. Submit it from the
# repository's top folder (the job runs there):
#   sbatch examples/batch.sh
# The one srun below is what auto-resume protects; give --auto-resume=1 to
# sbatch instead to make it the default for every srun of the job.
set -euo pipefail

srun --auto-resume=1 examples/train_step.sh
