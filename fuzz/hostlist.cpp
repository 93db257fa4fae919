// Hostlist expressions with libslurm's parser, as the plugin and the
// controller use them (ar::slurm::expand_hostlist, compress_hostlist).
// Bad input must be refused with a std::runtime_error naming it, nothing
// else; hosts with node names (letters, digits, '-', '_', '.') must
// compress to an expression of the same hosts. (libslurm takes some
// malformed expressions for one odd name: "n[1-3]x[" is the host
// "n[1-3]x]", which is no expression. Slurm's node names cannot be such.)

#include "hostlist.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "fuzz.hpp"

namespace {

bool node_name(const std::string& host) {
  return !host.empty() && std::ranges::all_of(host, [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.';
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string expression(ar::fuzz::text(data, size));
  std::vector<std::string> hosts;
  try {
    hosts = ar::slurm::expand_hostlist(expression);
  } catch (const std::runtime_error&) {
    return 0;
  }
  const auto compressed = ar::slurm::compress_hostlist(hosts);
  if (!std::ranges::all_of(hosts, node_name)) return 0;
  std::vector<std::string> again;
  try {
    again = ar::slurm::expand_hostlist(compressed);
  } catch (const std::runtime_error& e) {
    ar::fuzz::finding("'" + expression + "' compresses to '" + compressed + "': " + e.what());
  }
  if (again != hosts)
    ar::fuzz::finding("'" + expression + "' compresses to '" + compressed +
                      "', which names other hosts");
  return 0;
}
