#include "provision/instances.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <stdexcept>

#include "autoresume/keyvalue.hpp"
#include "autoresume/text.hpp"

namespace ar {

namespace {

bool id_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
         std::string_view("._:/@-").find(c) != std::string_view::npos;
}

bool host_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == ':' || c == '-';
}

std::string checked(std::string_view key, std::string_view value, bool (*allowed)(char),
                    std::size_t max) {
  if (value.empty() || value.size() > max || !std::ranges::all_of(value, allowed))
    throw std::invalid_argument("the provider printed a bad " + std::string(key) + " '" +
                                printable(shortened(value, 80)) + "'");
  return std::string(value);
}

// Calls `each(line)` for every line of `text`, blanks trimmed, empty ones skipped.
template <typename Each>
void for_lines(std::string_view text, Each each) {
  std::size_t start = 0;
  while (start < text.size()) {
    const auto end = std::min(text.find('\n', start), text.size());
    const auto line = trim(text.substr(start, end - start));
    start = end + 1;
    if (!line.empty()) each(line);
  }
}

}  // namespace

CreateOutput parse_create_output(std::string_view output) {
  CreateOutput out;
  for_lines(output, [&](std::string_view line) {
    const auto eq = line.find('=');
    if (eq == std::string_view::npos) return;
    const auto key = line.substr(0, eq);
    const auto value = line.substr(eq + 1);
    std::string* field = key == "instance_id"     ? &out.instance_id
                         : key == "node_addr"     ? &out.node_addr
                         : key == "node_hostname" ? &out.node_hostname
                                                  : nullptr;
    if (field == nullptr) return;  // free text
    if (!field->empty())
      throw std::invalid_argument("the provider printed " + std::string(key) + " twice");
    *field = key == "instance_id" ? checked(key, value, id_char, 128)
                                  : checked(key, value, host_char, 253);
  });
  return out;
}

std::vector<ListedInstance> parse_list_output(std::string_view output) {
  std::vector<ListedInstance> out;
  for_lines(output, [&](std::string_view line) {
    ListedInstance item;
    for (const auto pair : blank_split(line)) {
      const auto eq = pair.find('=');
      const auto key = pair.substr(0, std::min(eq, pair.size()));
      if (key == "token") item.token = checked("token", pair.substr(eq + 1), id_char, 300);
      if (key == "instance_id")
        item.instance_id = checked("instance_id", pair.substr(eq + 1), id_char, 128);
    }
    if (item.token.empty() || item.instance_id.empty())
      throw std::invalid_argument("the provider's list printed '" +
                                  printable(shortened(line, 120)) +
                                  "', not 'token=T instance_id=I'");
    if (out.size() == kMaxListed)
      throw std::invalid_argument("the provider's list printed more than " +
                                  std::to_string(kMaxListed) + " instances");
    out.push_back(std::move(item));
  });
  return out;
}

std::optional<TokenParts> split_token(std::string_view token) {
  const auto first = token.find(':');
  const auto last = token.rfind(':');
  if (first == std::string_view::npos || first == last) return std::nullopt;
  TokenParts parts{std::string(token.substr(0, first)),
                   std::string(token.substr(first + 1, last - first - 1)), 0};
  const auto number = token.substr(last + 1);
  const auto [ptr, ec] =
      std::from_chars(number.data(), number.data() + number.size(), parts.attempt);
  if (parts.group.empty() || parts.node.empty() || number.empty() || ec != std::errc() ||
      ptr != number.data() + number.size())
    return std::nullopt;
  return parts;
}

std::int64_t billable_seconds(const InstanceRecord& record, std::int64_t since, std::int64_t now) {
  if (record.started == 0) return 0;
  const auto from = std::max(record.started, since);
  const auto to = std::min(record.terminated == 0 ? now : record.terminated, now);
  return std::max<std::int64_t>(0, to - from);
}

std::vector<GroupUsage> usage(const std::vector<InstanceRecord>& records, std::int64_t since,
                              std::int64_t now) {
  std::map<std::string, GroupUsage> by_group;
  for (const auto& record : records) {
    const auto seconds = billable_seconds(record, since, now);
    if (seconds == 0) continue;
    auto& group = by_group[record.group];
    group.group = record.group;
    ++group.instances;
    group.instance_hours += static_cast<double>(seconds) / 3600.0;
  }
  std::vector<GroupUsage> out;
  for (auto& [name, group] : by_group) out.push_back(std::move(group));
  return out;
}

}  // namespace ar
