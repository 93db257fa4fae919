#!/usr/bin/env bash
# The plugin exports exactly the SPANK entry points: nothing of C++ leaks into
# srun or slurmstepd.
set -euo pipefail
plugin=$1
expected="plugin_name
plugin_type
plugin_version
slurm_spank_exit
slurm_spank_init
slurm_spank_init_post_opt
slurm_spank_local_user_init
slurm_spank_task_exit
slurm_spank_task_init
slurm_spank_task_init_privileged
spank_plugin_version"
actual=$(nm -D --defined-only "$plugin" | awk '{print $3}' | sort)
# A C++ symbol is named first: the exact list below would fail it too, with
# less said.
if cxx=$(grep '^_Z' <<<"$actual"); then
  echo "FAIL: C++ symbols exported: $(tr '\n' ' ' <<<"$cxx")" >&2
  exit 1
fi
if [[ "$actual" != "$expected" ]]; then
  echo "FAIL: exported symbols differ" >&2
  diff <(echo "$expected") <(echo "$actual") >&2 || true
  exit 1
fi
[[ $(basename "$plugin") == auto_resume.so ]] || { echo "FAIL: plugin named $(basename "$plugin")" >&2; exit 1; }
echo "ok"
