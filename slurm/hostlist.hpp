#pragma once
// Hostlist expressions ("node[1-4,7]"), with libslurm's own parser. Built as
// ar_hostlist, which links no libslurm: the controller's programs get it
// through ar_slurm, and the SPANK plugin from the process that loads it
// (srun's or slurmstepd's own libslurmfull).

#include <cstddef>
#include <string>
#include <vector>

namespace ar::slurm {

// The most hosts a list may expand to: a few bytes name millions of hosts
// ("a[0-9999999]"), so every list is counted before it is expanded.
inline constexpr std::size_t kMaxHosts = 65536;

// The hosts of `expression`, in Slurm's order. Throws std::runtime_error
// naming an expression Slurm cannot parse or one of more than `max_hosts`
// hosts.
std::vector<std::string> expand_hostlist(const std::string& expression,
                                         std::size_t max_hosts = kMaxHosts);

// Slurm's compressed form of `hosts` ("node[1-3]").
std::string compress_hostlist(const std::vector<std::string>& hosts);

}  // namespace ar::slurm
