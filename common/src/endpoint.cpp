#include "autoresume/endpoint.hpp"

#include "autoresume/keyvalue.hpp"

namespace ar {

std::string Endpoint::str() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Endpoint parse_endpoint(std::string_view key, std::string_view text) {
  const auto fail = [&](std::string_view why) -> Endpoint { invalid_value(key, text, why); };
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) return fail("expected HOST:PORT");
  auto host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  else if (host.find(':') != std::string_view::npos)
    return fail("write an IPv6 address as [ADDRESS]:PORT");
  if (host.empty()) return fail("the host is empty");
  if (host.find_first_of(" \t[]") != std::string_view::npos) return fail("bad host");
  const auto port_text = text.substr(colon + 1);
  try {
    const auto port = parse_uint(key, port_text, 1, 65535);
    return {std::string(host), static_cast<std::uint16_t>(port)};
  } catch (const ConfigError&) {
    return fail("the port must be a number from 1 to 65535");
  }
}

}  // namespace ar
