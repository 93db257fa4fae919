#include "autoresume/option.hpp"

#include <string>

#include "autoresume/keyvalue.hpp"

namespace ar {

bool parse_auto_resume(const char* value) {
  if (value == nullptr)
    throw ConfigError(std::string("--") + kOptionName + " requires a value: 0 or 1");
  if (std::string_view(value) == "0") return false;
  if (std::string_view(value) == "1") return true;
  throw ConfigError(std::string("invalid --") + kOptionName + " value '" + value +
                    "': expected 0 or 1");
}

}  // namespace ar
