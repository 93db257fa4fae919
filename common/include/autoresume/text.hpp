#pragma once
// Small text helpers shared across the project.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ar {

// `items` with `separator` between each two: join({"a", "b"}, ", ") is
// "a, b"; no items make "".
inline std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += separator;
    out += items[i];
  }
  return out;
}

// `text` safe to write to a terminal: control characters (C0, DEL, and C1
// as UTF-8 encodes them) become \xNN, so that text a user chose (a run id,
// a command line, a reason) cannot move the cursor or retitle the window of
// whoever reads it. Everything else, other UTF-8 included, stays.
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
