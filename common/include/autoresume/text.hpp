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

}  // namespace ar
