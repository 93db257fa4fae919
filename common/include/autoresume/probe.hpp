#pragma once
// Can the controller be reached? A TCP connection attempt with a deadline,
// in plain POSIX so that the SPANK plugin pulls in no event loop.

#include <chrono>
#include <optional>
#include <string>

#include "autoresume/endpoint.hpp"

namespace ar {

// Connects to `endpoint` within `timeout`. Returns nothing on success, or why
// it failed ("connection refused", "timed out after 2000 ms", a resolver
// error), naming no endpoint: the caller says which one.
std::optional<std::string> probe_tcp(const Endpoint& endpoint, std::chrono::milliseconds timeout);

}  // namespace ar
