#include "hostlist.hpp"

extern "C" {
#include <slurm/slurm.h>
}

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace ar::slurm {

namespace {

using Hostlist =
    std::unique_ptr<std::remove_pointer_t<hostlist_t>, decltype(&slurm_hostlist_destroy)>;

// a * b and a + b, saturating at `cap`.
std::size_t times(std::size_t a, std::size_t b, std::size_t cap) {
  return b != 0 && a > cap / b ? cap : std::min(a * b, cap);
}
std::size_t plus(std::size_t a, std::size_t b, std::size_t cap) { return std::min(a + b, cap); }

// A number of a range: 1 to 18 digits. libslurm reads numbers into an
// unsigned long and never ends a range that ends at its largest value
// ("x[18446744073709551615]y[1]", or any longer number, which strtoul
// makes that).
std::optional<unsigned long long> range_number(std::string_view text) {
  unsigned long long n = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || text.size() > 18 || ec != std::errc() || ptr != text.data() + text.size())
    return std::nullopt;
  return n;
}

// The hosts of one bracketed group's ranges ("1-4,7": 5), saturating at
// `cap`; nothing if it is not a list of ranges.
std::optional<std::size_t> group_size(std::string_view group, std::size_t cap) {
  std::size_t total = 0;
  std::size_t start = 0;
  while (start <= group.size()) {
    const auto end = std::min(group.find(',', start), group.size());
    const auto part = group.substr(start, end - start);
    start = end + 1;
    const auto dash = part.find('-');
    const auto low = range_number(part.substr(0, dash));
    const auto high = dash == std::string_view::npos ? low : range_number(part.substr(dash + 1));
    if (!low || !high || *high < *low) return std::nullopt;
    total = plus(total,
                 static_cast<std::size_t>(std::min<unsigned long long>(*high - *low, cap - 1) + 1),
                 cap);
  }
  return total;
}

// The hosts `expression` names, saturating at `cap`, counted without
// expanding it; nothing if it is not a hostlist of the form slurmctld
// writes, which is all that is handed to libslurm (whose parser takes odd
// forms in odd ways): entries separated by commas or blanks, each of
// letters, digits, '-', '_', '.' and bracketed groups of ranges
// ("rack[1-2]-n[01-10,12]": 22).
std::optional<std::size_t> count_hosts(std::string_view expression, std::size_t cap) {
  std::size_t total = 0;
  std::size_t entry = 0;  // 0: no entry under way
  for (std::size_t i = 0; i < expression.size(); ++i) {
    const auto c = static_cast<unsigned char>(expression[i]);
    if (c == ',' || c == ' ' || c == '\t' || c == '\n') {
      total = plus(total, entry, cap);
      entry = 0;
    } else if (c == '[') {
      const auto close = expression.find(']', i);
      if (close == std::string_view::npos) return std::nullopt;
      const auto size = group_size(expression.substr(i + 1, close - i - 1), cap);
      if (!size) return std::nullopt;
      entry = times(std::max<std::size_t>(entry, 1), *size, cap);
      i = close;
    } else if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.') {
      entry = std::max<std::size_t>(entry, 1);
    } else {
      return std::nullopt;
    }
  }
  return plus(total, entry, cap);
}

// `expression` as an error message shows it: cut to 200 bytes.
std::string shown(const std::string& expression) {
  return expression.size() > 200 ? expression.substr(0, 200) + "..." : expression;
}

[[noreturn]] void too_many(const std::string& expression, std::size_t max_hosts) {
  throw std::runtime_error("the node list '" + shown(expression) + "' names more than " +
                           std::to_string(max_hosts) + " hosts");
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& expression, std::size_t max_hosts) {
  const auto count = count_hosts(expression, max_hosts + 1);
  if (!count) throw std::runtime_error("cannot parse the node list '" + shown(expression) + "'");
  if (*count > max_hosts) too_many(expression, max_hosts);
  Hostlist list(slurm_hostlist_create(expression.c_str()), &slurm_hostlist_destroy);
  if (!list) throw std::runtime_error("cannot parse the node list '" + shown(expression) + "'");
  const int slurm_count = slurm_hostlist_count(list.get());
  if (slurm_count < 0 || static_cast<std::size_t>(slurm_count) > max_hosts)
    too_many(expression, max_hosts);
  std::vector<std::string> hosts;
  hosts.reserve(static_cast<std::size_t>(slurm_count));
  while (char* host = slurm_hostlist_shift(list.get())) {
    hosts.emplace_back(host);
    std::free(host);
  }
  return hosts;
}

std::string compress_hostlist(const std::vector<std::string>& hosts) {
  Hostlist list(slurm_hostlist_create(""), &slurm_hostlist_destroy);
  if (!list) throw std::runtime_error("cannot make a node list");
  for (const auto& host : hosts) slurm_hostlist_push_host(list.get(), host.c_str());
  char* ranged = slurm_hostlist_ranged_string_malloc(list.get());
  std::string out = ranged != nullptr ? ranged : "";
  std::free(ranged);
  return out;
}

}  // namespace ar::slurm
