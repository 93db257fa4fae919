#pragma once
// This node's name as slurm.conf spells it, for the programs that run on
// nodes (the health checker, the node agent).

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace ar {

// $SLURMD_NODENAME (set by slurmd for its HealthCheckProgram), else the
// short host name.
inline std::string this_node_name() {
  if (const char* name = std::getenv("SLURMD_NODENAME"); name != nullptr && *name != '\0')
    return name;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string name(host);
  return name.substr(0, name.find('.'));
}

}  // namespace ar
