// Hostlist expressions with libslurm's parser, as the plugin and the
// controller use them (ar::slurm::expand_hostlist, compress_hostlist).
// Bad input must be refused with a std::runtime_error naming it, nothing
// else; an expression naming more hosts than asked for (4,096 here, to
// keep the runs quick; kMaxHosts by default) too, before libslurm expands
// anything (the memory limit and the timeout catch that). Hosts named as
// slurm.conf names nodes (a letter, then letters, digits, '-', '_', '.';
// numbers within 64 bits) must compress to an expression of the same
// hosts.

#include "hostlist.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

#include "fuzz.hpp"

namespace {

bool node_name(const std::string& host) {
  std::size_t digits = 0;  // in a row
  for (const char ch : host) {
    const auto c = static_cast<unsigned char>(ch);
    digits = std::isdigit(c) != 0 ? digits + 1 : 0;
    if (digits > 18 || (std::isalnum(c) == 0 && c != '-' && c != '_' && c != '.')) return false;
  }
  return !host.empty() && std::isalpha(static_cast<unsigned char>(host.front())) != 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string expression(ar::fuzz::text(data, size));
  std::vector<std::string> hosts;
  constexpr std::size_t kMax = 4096;
  try {
    hosts = ar::slurm::expand_hostlist(expression, kMax);
  } catch (const std::runtime_error&) {
    return 0;
  }
  if (hosts.size() > kMax)
    ar::fuzz::finding("'" + expression + "' expands to " + std::to_string(hosts.size()) + " hosts");
  const auto compressed = ar::slurm::compress_hostlist(hosts);
  if (!std::ranges::all_of(hosts, node_name)) return 0;
  std::vector<std::string> again;
  try {
    again = ar::slurm::expand_hostlist(compressed, kMax);
  } catch (const std::runtime_error& e) {
    ar::fuzz::finding("'" + expression + "' compresses to '" + compressed + "': " + e.what());
  }
  if (again != hosts)
    ar::fuzz::finding("'" + expression + "' compresses to '" + compressed +
                      "', which names other hosts");
  return 0;
}
