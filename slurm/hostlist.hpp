#pragma once
// Hostlist expressions ("node[1-4,7]"), with libslurm's own parser. Built as
// ar_hostlist, which links no libslurm: the controller's programs get it
// through ar_slurm, and the SPANK plugin from the process that loads it
// (srun's or slurmstepd's own libslurmfull).

#include <string>
#include <vector>

namespace ar::slurm {

// The hosts of `expression`, in Slurm's order. Throws std::runtime_error
// naming an expression Slurm cannot parse.
std::vector<std::string> expand_hostlist(const std::string& expression);

// Slurm's compressed form of `hosts` ("node[1-3]").
std::string compress_hostlist(const std::vector<std::string>& hosts);

}  // namespace ar::slurm
