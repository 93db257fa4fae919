-- cli_filter.lua: sets --no-kill for every sbatch or salloc job that asks
-- for in-job spares (--auto-resume-spares=K, K > 0).
--
-- Install: CliFilterPlugins=cli_filter/lua in slurm.conf, and this file as
-- cli_filter.lua beside slurm.conf on every host users submit from.
--
-- Why: Slurm ends (or requeues) a job without --no-kill when any of its
-- nodes goes DOWN, an idle spare included. auto-resumed shrinks a failed
-- node out of a protected job before Slurm's SlurmdTimeout runs out, but
-- with --no-kill Slurm removes a dead node itself, which also covers the
-- moments the controller is down. The controller cannot read or set the
-- flag on a running job, and job_submit/lua has no field for it in Slurm
-- 22.05; a cli_filter runs in sbatch and salloc themselves, so a user can
-- still leave it out (both kinds of job are repaired).

function slurm_cli_setup_defaults(options, early_pass)
  return slurm.SUCCESS
end

function slurm_cli_pre_submit(options, offset)
  if options.type ~= "sbatch" and options.type ~= "salloc" then
    return slurm.SUCCESS
  end
  local spank = options.spank
  local ours = spank and spank["auto_resume"]
  local spares = ours and ours["auto-resume-spares"]
  if spares ~= nil and tonumber(spares) ~= nil and tonumber(spares) > 0 then
    options["no-kill"] = "set"
  end
  return slurm.SUCCESS
end

function slurm_cli_post_submit(offset, job_id, step_id)
  return slurm.SUCCESS
end
