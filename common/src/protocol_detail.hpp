#pragma once
// What the protocol's sources (protocol.cpp and protocol_*.cpp) share: the
// field readers that check a field's presence, type and size and throw
// ProtocolError naming it. Private to common/src.

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "autoresume/protocol.hpp"
#include "autoresume/text.hpp"

namespace ar::proto::detail {

[[noreturn]] inline void bad(const std::string& message) {
  throw ProtocolError(code::kBadRequest, message);
}

inline std::string named(const char* field) { return std::string("field '") + field + "'"; }

// `value` as an error message shows it: its JSON, cut to 64 bytes. A reply
// escapes the message once more, and must fit in a line.
inline std::string shown(const json& value) {
  constexpr std::size_t kShown = 64;
  auto text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > kShown) text.replace(kShown - 3, std::string::npos, "...");
  return text;
}

inline const json& required(const json& body, const char* field) {
  const auto it = body.find(field);
  if (it == body.end()) bad(std::string("missing field '") + field + "'");
  return *it;
}

inline std::string get_string(const json& body, const char* field, std::size_t max_len = 4096) {
  const auto& value = required(body, field);
  if (!value.is_string()) bad(named(field) + " must be a string");
  auto text = value.get<std::string>();
  if (text.size() > max_len)
    bad(named(field) + " is longer than " + std::to_string(max_len) + " bytes");
  return text;
}

inline std::uint32_t get_u32(const json& body, const char* field) {
  const auto& value = required(body, field);
  const bool fits = value.is_number_unsigned()
                        ? value.get<std::uint64_t>() <= 0xffffffffULL
                        : value.is_number_integer() && value.get<std::int64_t>() >= 0 &&
                              value.get<std::int64_t>() <= 0xffffffffLL;
  if (!fits) bad(named(field) + " must be an unsigned 32-bit integer, got " + shown(value));
  return static_cast<std::uint32_t>(value.get<std::uint64_t>());
}

// An optional one: `fallback` when absent.
inline std::uint32_t get_u32(const json& body, const char* field, std::uint32_t fallback) {
  return body.contains(field) ? get_u32(body, field) : fallback;
}

inline std::int64_t get_i64(const json& body, const char* field) {
  const auto& value = required(body, field);
  const bool fits = value.is_number_unsigned() ? value.get<std::uint64_t>() <= 0x7fffffffffffffffULL
                                               : value.is_number_integer();
  if (!fits) bad(named(field) + " must be a 64-bit integer, got " + shown(value));
  return value.get<std::int64_t>();
}

inline bool get_bool(const json& body, const char* field) {
  const auto& value = required(body, field);
  if (!value.is_boolean()) bad(named(field) + " must be true or false, got " + shown(value));
  return value.get<bool>();
}

// An optional boolean: `fallback` when absent.
inline bool get_bool(const json& body, const char* field, bool fallback) {
  return body.contains(field) ? get_bool(body, field) : fallback;
}

inline std::vector<std::string> get_string_list(const json& body, const char* field,
                                                std::size_t max_items = 1024) {
  const auto& value = required(body, field);
  if (!value.is_array()) bad(named(field) + " must be an array of strings");
  if (value.size() > max_items)
    bad(named(field) + " has more than " + std::to_string(max_items) + " items");
  std::vector<std::string> out;
  for (const auto& item : value) {
    if (!item.is_string()) bad(named(field) + " must be an array of strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

// `node`, the value of `field`, if it is a node name as slurm.conf spells
// one.
inline std::string node_name(std::string node, const char* field) {
  if (node.empty() || node.size() > kMaxNodeNameBytes ||
      !std::ranges::all_of(node, [](unsigned char c) {
        return std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.';
      }))
    bad(named(field) + ": '" + node + "' is not a node name");
  return node;
}

inline std::string get_node_name(const json& body, const char* field) {
  return node_name(get_string(body, field, kMaxNodeNameBytes), field);
}

// A node group's name, as its file's name gives it (the controller's
// provision/groups.hpp).
inline std::string get_group_name(const json& body, const char* field) {
  auto name = get_string(body, field, 4096);
  if (!is_slurm_name(name, kMaxGroupNameBytes))
    bad(named(field) + ": " + shown(json(name)) +
        " is not a group name (letters, digits, '_' and '-', starting with a letter, at most " +
        std::to_string(kMaxGroupNameBytes) + " bytes)");
  return name;
}

// A state by its name (states.hpp); `what` names the kind in the error.
template <typename E>
E get_named(const json& body, const char* field, const char* what) {
  const auto text = get_string(body, field, 64);
  const auto value = parse_name<E>(text);
  if (!value) bad(named(field) + ": unknown " + what + " '" + text + "'");
  return *value;
}

// A reply's result: an object, whatever its fields.
inline const json& result_object(const json& result) {
  if (!result.is_object()) bad("the result must be a JSON object, got " + shown(result));
  return result;
}

// An object nested in `field` (of an array, at `index`), parsed by Item.
template <typename Item>
Item nested(const json& item, const char* field, std::optional<std::size_t> index = {}) {
  const auto where = named(field) + (index ? " item " + std::to_string(*index) : "");
  if (!item.is_object()) bad(where + " must be an object, got " + shown(item));
  try {
    return Item::from_json(item);
  } catch (const ProtocolError& e) {
    bad(where + ": " + e.what());
  }
}

template <typename Item>
std::vector<Item> get_items(const json& body, const char* field) {
  const auto& value = required(body, field);
  if (!value.is_array()) bad(named(field) + " must be an array of objects");
  std::vector<Item> out;
  for (std::size_t i = 0; i < value.size(); ++i) out.push_back(nested<Item>(value[i], field, i));
  return out;
}

template <typename Item>
json to_json_array(const std::vector<Item>& items) {
  json out = json::array();
  for (const auto& item : items) out.push_back(item.to_json());
  return out;
}

// The paging fields of a list (status, events, usage): its rows per page
// (`limit`), and a cursor.
inline std::optional<std::uint32_t> get_limit(const json& body) {
  if (!body.contains("limit")) return std::nullopt;
  const auto limit = get_u32(body, "limit");
  if (limit == 0 || limit > kMaxPageRows)
    bad("field 'limit' must be 1-" + std::to_string(kMaxPageRows) + ", got " +
        std::to_string(limit));
  return limit;
}

inline std::optional<std::int64_t> get_cursor(const json& body, const char* field) {
  if (!body.contains(field)) return std::nullopt;
  const auto cursor = get_i64(body, field);
  if (cursor < 0) bad(named(field) + " must not be negative, got " + std::to_string(cursor));
  return cursor;
}

}  // namespace ar::proto::detail
