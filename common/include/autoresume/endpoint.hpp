#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ar {

// The controller's TCP port unless configured otherwise.
inline constexpr std::uint16_t kDefaultPort = 7860;

struct Endpoint {
  std::string host;
  std::uint16_t port = kDefaultPort;

  std::string str() const;
  bool operator==(const Endpoint&) const = default;
};

// "HOST:PORT" or "[IPv6]:PORT". Throws ConfigError naming key and value.
Endpoint parse_endpoint(std::string_view key, std::string_view text);

}  // namespace ar
