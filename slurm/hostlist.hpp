#pragma once
// Hostlist expressions ("node[1-4,7]"), with libslurm's own parser. Built as
// ar_hostlist, which links no libslurm: the controller's programs get it
// through ar_slurm, and the SPANK plugin from the process that loads it
// (srun's or slurmstepd's own libslurmfull).

#include <cstddef>
#include <string>
#include <vector>

namespace ar::slurm {

// The most hosts expand_hostlist gives unless told otherwise: Slurm's own
// limit of one range ("n[1-65536]").
inline constexpr std::size_t kMaxHosts = 65536;

// The hosts of `expression`, in Slurm's order. Throws std::runtime_error
// naming an expression that is not of the form slurmctld writes (entries
// of letters, digits, '-', '_', '.' and bracketed ranges of numbers of at
// most 18 digits: "rack[1-2]-n[01-10,12]") or that Slurm cannot parse, and
// one naming more than `max_hosts` hosts; both before libslurm reads it
// (it expands a product of ranges, "a[0-9999]b[0-9999]", whole, and
// never ends a range that ends at its largest unsigned long).
std::vector<std::string> expand_hostlist(const std::string& expression,
                                         std::size_t max_hosts = kMaxHosts);

// Slurm's compressed form of `hosts` ("node[1-3]").
std::string compress_hostlist(const std::vector<std::string>& hosts);

}  // namespace ar::slurm
