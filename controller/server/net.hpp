#pragma once

// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
// clang-format off
#include <utility>
#include <boost/asio.hpp>
// clang-format on

#include "autoresume/endpoint.hpp"

namespace ar::net {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using asio::awaitable;
using asio::use_awaitable;

// The address to bind for `listen` (a name resolved, a port numeric).
inline tcp::endpoint resolve_listen(asio::io_context& io, const Endpoint& listen) {
  tcp::resolver resolver(io);
  const auto results = resolver.resolve(listen.host, std::to_string(listen.port),
                                        tcp::resolver::passive | tcp::resolver::numeric_service);
  return results.begin()->endpoint();
}
}  // namespace ar::net
