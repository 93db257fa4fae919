#pragma once
// Small text helpers shared across the project.

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace ar {

// `items` with `separator` between each two: join({"a", "b"}, ", ") is
// "a, b"; no items make "". With `name`, what it gives for each item (a
// member pointer: join(table, ", ", &Row::name)).
template <class Items, class Name>
std::string join(const Items& items, std::string_view separator, Name name) {
  std::string out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out += separator;
    first = false;
    out += std::string_view(std::invoke(name, item));
  }
  return out;
}
inline std::string join(const std::vector<std::string>& items, std::string_view separator) {
  return join(items, separator, std::identity{});
}

// The words of `text`, split on blanks (spaces and tabs); no empty word.
// Each views `text`.
inline std::vector<std::string_view> blank_split(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start < text.size()) {
    const auto end = std::min(text.find_first_of(" \t", start), text.size());
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// Whether `text` is a name the controller writes into Slurm's
// configuration (a node group's, a partition's, a node prefix): letters,
// digits, '_' and '-', starting with a letter, at most `max_bytes`.
inline bool is_slurm_name(std::string_view text, std::size_t max_bytes) {
  const auto name_char = [](unsigned char c) {
    return std::isalnum(c) != 0 || c == '_' || c == '-';
  };
  return !text.empty() && text.size() <= max_bytes &&
         std::isalpha(static_cast<unsigned char>(text.front())) != 0 &&
         std::ranges::all_of(text, name_char);
}

// The code point of the line separator or bidirectional control UTF-8
// encodes at text[i] (see printable), or 0.
inline unsigned invisible(std::string_view text, std::size_t i) {
  const auto at = [&](std::size_t k) {
    return k < text.size() ? static_cast<unsigned char>(text[k]) : 0U;
  };
  if (at(i) == 0xd8 && at(i + 1) == 0x9c) return 0x061c;
  if (at(i) != 0xe2) return 0;
  const unsigned code = 0x2000U | ((at(i + 1) & 0x3fU) << 6) | (at(i + 2) & 0x3fU);
  if ((at(i + 1) & 0xc0U) != 0x80 || (at(i + 2) & 0xc0U) != 0x80) return 0;
  const bool hidden = code == 0x200e || code == 0x200f || (code >= 0x2028 && code <= 0x202e) ||
                      (code >= 0x2066 && code <= 0x2069);
  return hidden ? code : 0;
}

// `text` safe to write to a terminal or a log: control characters (C0,
// DEL, and C1 as UTF-8 encodes them) become \xNN, and the line and
// paragraph separators and the bidirectional controls (U+061C, U+200E,
// U+200F, U+2028 to U+202E, U+2066 to U+2069) \uNNNN, so that text a user
// chose (a run id, a command line, a reason) cannot move the cursor,
// retitle the window, start a line or reorder what a reader sees.
// Everything else, other UTF-8 included, stays.
inline std::string printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  auto escape = [&](unsigned char c) {
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 0xf];
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const unsigned char next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1])
                                                   : static_cast<unsigned char>(0);
    if (c < 0x20 || c == 0x7f) {
      escape(c);
    } else if (c == 0xc2 && next >= 0x80 && next <= 0x9f) {  // U+0080..U+009F
      escape(c);
      escape(next);
      ++i;
    } else if (const auto code = invisible(text, i); code != 0) {
      out += "\\u";
      for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(code >> shift) & 0xf];
      i += code == 0x061c ? 1 : 2;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// `text` cut to at most `max_bytes` (at least 3), "..." marking a cut; a
// cut never splits a UTF-8 character.
inline std::string shortened(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  std::size_t keep = max_bytes < 3 ? 0 : max_bytes - 3;
  while (keep > 0 && (static_cast<unsigned char>(text[keep]) & 0xc0) == 0x80) --keep;
  return std::string(text.substr(0, keep)) + "...";
}

}  // namespace ar
