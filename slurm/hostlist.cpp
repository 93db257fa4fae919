#include "hostlist.hpp"

extern "C" {
#include <slurm/slurm.h>
}

#include <charconv>
#include <cstdlib>
#include <memory>
#include <optional>
#include <stdexcept>
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

// Numbers in a hostlist from here on are refused: libslurm wraps around
// past its unsigned long ("x[18446744073709551615]y[1]" never ends).
constexpr unsigned long long kMaxNumber = 999'999'999'999'999'999ULL;

// What a bracketed group's part starts with, as strtoul reads it (blanks
// and a '+' first): a number, none, or one of more than kMaxNumber.
struct Number {
  std::optional<unsigned long long> value;
  bool too_large = false;
};
Number leading_number(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\n\v\f\r+");
  if (first == std::string_view::npos) return {};
  unsigned long long n = 0;
  const auto [ptr, ec] = std::from_chars(text.data() + first, text.data() + text.size(), n);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && n > kMaxNumber))
    return {std::nullopt, true};
  if (ec != std::errc()) return {};
  return {n, false};
}

// The hosts of one bracketed group's ranges ("1-4,7": 5); a part that is
// no range counts 1 (Slurm refuses it). Nothing if a number is too large.
std::optional<std::size_t> group_size(std::string_view group, std::size_t cap) {
  std::size_t total = 0;
  std::size_t start = 0;
  while (start <= group.size()) {
    const auto end = std::min(group.find(',', start), group.size());
    const auto part = group.substr(start, end - start);
    start = end + 1;
    const auto dash = part.find('-');
    const auto low = leading_number(part.substr(0, dash));
    const auto high = dash == std::string_view::npos ? low : leading_number(part.substr(dash + 1));
    if (low.too_large || high.too_large) return std::nullopt;
    const bool range = low.value && high.value && *high.value >= *low.value;
    const auto size =
        range ? std::min<unsigned long long>(*high.value - *low.value, cap - 1) + 1 : 1;
    total = plus(total, static_cast<std::size_t>(size), cap);
  }
  return total;
}

// An upper bound of the hosts `expression` names, as Slurm reads it
// without expanding it: the sum over its entries (separated by commas or
// blanks outside brackets) of the product of its bracketed groups' sizes
// ("r[1-2]n[1-4]": 8). Saturates at `cap`; nothing if a number in a group
// is too large.
std::optional<std::size_t> host_bound(std::string_view expression, std::size_t cap) {
  std::size_t total = 0;
  std::size_t entry = 1;
  for (std::size_t i = 0; i < expression.size(); ++i) {
    const char c = expression[i];
    if (c == '[') {
      const auto close = expression.find(']', i);
      if (close == std::string_view::npos) break;  // no group: one odd name
      const auto size = group_size(expression.substr(i + 1, close - i - 1), cap);
      if (!size) return std::nullopt;
      entry = times(entry, *size, cap);
      i = close;
    } else if (c == ',' || c == ' ' || c == '\t' || c == '\n') {
      total = plus(total, entry, cap);
      entry = 1;
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
  const auto bound = host_bound(expression, max_hosts + 1);
  if (!bound)
    throw std::runtime_error("cannot parse the node list '" + shown(expression) +
                             "': a number in it is larger than " + std::to_string(kMaxNumber));
  if (*bound > max_hosts) too_many(expression, max_hosts);
  Hostlist list(slurm_hostlist_create(expression.c_str()), &slurm_hostlist_destroy);
  if (!list) throw std::runtime_error("cannot parse the node list '" + expression + "'");
  const int count = slurm_hostlist_count(list.get());
  if (count < 0 || static_cast<std::size_t>(count) > max_hosts) too_many(expression, max_hosts);
  std::vector<std::string> hosts;
  hosts.reserve(static_cast<std::size_t>(count));
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
