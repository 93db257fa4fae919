#include "nodes/origin.hpp"

#include <algorithm>
#include <boost/asio/ip/network_v4.hpp>
#include <boost/asio/ip/network_v6.hpp>
#include <stdexcept>

#include "autoresume/connect.hpp"
#include "hostlist.hpp"

namespace ar::origin {

namespace asio = boost::asio;

std::optional<Address> parse(const std::string& text) {
  boost::system::error_code error;
  auto address = asio::ip::make_address(text, error);
  if (error) return std::nullopt;
  if (address.is_v6() && address.to_v6().is_v4_mapped())
    address = asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
  return address;
}

bool Network::contains(const Address& peer) const {
  if (peer.is_v4() != address.is_v4()) return false;
  const auto length = static_cast<unsigned short>(prefix);
  if (address.is_v4())
    return asio::ip::network_v4(peer.to_v4(), length).canonical() ==
           asio::ip::network_v4(address.to_v4(), length).canonical();
  return asio::ip::network_v6(peer.to_v6(), length).canonical() ==
         asio::ip::network_v6(address.to_v6(), length).canonical();
}

std::string Network::str() const {
  const bool whole = prefix == (address.is_v4() ? 32U : 128U);
  return address.to_string() + (whole ? "" : "/" + std::to_string(prefix));
}

std::map<std::string, std::vector<Network>> bind_map(const std::vector<HeartbeatBind>& binds) {
  std::map<std::string, std::vector<Network>> out;
  std::size_t hosts = 0;
  for (const auto& bind : binds) {
    const auto address = parse(bind.address);
    if (!address)
      throw std::runtime_error("heartbeat_bind entry '" + bind.str() + "': not a numeric address");
    std::vector<std::string> nodes;
    try {
      nodes = slurm::expand_hostlist(bind.nodes, kMaxBindHosts - hosts);
    } catch (const std::exception& e) {
      throw std::runtime_error("heartbeat_bind entry '" + bind.str() + "': " + e.what());
    }
    hosts += nodes.size();
    for (auto& node : nodes) out[std::move(node)].push_back({*address, bind.prefix});
  }
  return out;
}

std::vector<Address> resolve(const std::string& name, std::chrono::milliseconds timeout,
                             std::string& error) {
  const auto found = net::resolve_by(name, 0, net::Clock::now() + timeout, error);
  std::vector<Address> out;
  for (const addrinfo* a = found.get(); a != nullptr; a = a->ai_next) {
    if (const auto address = parse(net::numeric_host(*a));
        address && std::ranges::find(out, *address) == out.end())
      out.push_back(*address);
  }
  if (out.empty() && error.empty()) error = "no address";
  return out;
}

}  // namespace ar::origin
