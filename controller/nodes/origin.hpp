#pragma once
// Where a node agent's heartbeat may come from: the node's own addresses
// (its NodeAddr and NodeHostname, resolved) or those heartbeat_bind gives
// it. This catches an agent started with another node's --node; it does not
// stop a node's root, who can send from any address it holds (and munge's
// origin address is stamped by the sender's own munged).

#include <boost/asio/ip/address.hpp>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "autoresume/daemon_config.hpp"

namespace ar::origin {

// Only the address header: the whole of Boost.Asio would be parsed again by
// every file that includes the node keeper.
using Address = boost::asio::ip::address;

// A numeric address (an IPv4-mapped IPv6 address as its IPv4 one); nothing
// for anything else.
std::optional<Address> parse(const std::string& text);

// A network of heartbeat_bind.
struct Network {
  Address address;
  unsigned prefix = 0;
  bool contains(const Address& peer) const;
  std::string str() const;
};

// heartbeat_bind by node: each entry's hostlist expanded (at most
// kMaxBindHosts hosts in all). Throws std::runtime_error naming a bad entry.
inline constexpr std::size_t kMaxBindHosts = 65536;
std::map<std::string, std::vector<Network>> bind_map(const std::vector<HeartbeatBind>& binds);

// The numeric addresses `name` (a name or a numeric address) resolves to,
// looked up by `timeout`; empty with `error` set when it does not.
std::vector<Address> resolve(const std::string& name, std::chrono::milliseconds timeout,
                             std::string& error);

}  // namespace ar::origin
