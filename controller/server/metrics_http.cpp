#include "server/metrics_http.hpp"

#include <algorithm>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <exception>

#include "log.hpp"

namespace ar {

namespace asio = net::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using net::tcp;

MetricsServer::MetricsServer(asio::io_context& io, asio::thread_pool& workers,
                             const Endpoint& listen, Render render)
    : acceptor_(io), workers_(workers), render_(std::move(render)) {
  try {
    const auto endpoint = net::resolve_listen(io, listen);
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen();
  } catch (const boost::system::system_error& e) {
    throw std::runtime_error("metrics_listen=" + listen.str() + ": " + e.code().message());
  }
}

void MetricsServer::start() {
  asio::co_spawn(acceptor_.get_executor(), accept_loop(), asio::detached);
}

asio::awaitable<void> MetricsServer::accept_loop() {
  for (;;) {
    boost::system::error_code error;
    auto socket = co_await acceptor_.async_accept(asio::redirect_error(net::use_awaitable, error));
    if (error == asio::error::operation_aborted) co_return;
    if (error) {
      // E.g. out of file descriptors: retrying at once would spin.
      asio::steady_timer pause(acceptor_.get_executor(), std::chrono::milliseconds(100));
      co_await pause.async_wait(net::use_awaitable);
      continue;
    }
    boost::system::error_code ignored;
    const auto remote = socket.remote_endpoint(ignored);
    const auto peer = ignored ? std::string() : remote.address().to_string();
    if (!admit(peer)) continue;  // closed as it goes out of scope
    auto stream = std::make_shared<beast::tcp_stream>(std::move(socket));
    const auto id = open_->next++;
    open_->connections.emplace(id, Connection{peer, stream, false});
    asio::co_spawn(acceptor_.get_executor(), serve(std::move(stream), id), asio::detached);
  }
}

bool MetricsServer::admit(const std::string& peer) {
  auto& open = open_->connections;
  const auto from_peer = static_cast<std::size_t>(
      std::ranges::count_if(open, [&](const auto& entry) { return entry.second.peer == peer; }));
  if (from_peer >= kMaxPerPeer) return false;
  if (open.size() < kMaxConnections) return true;
  // All taken: an address with none open takes the place of the oldest
  // connection still waiting for its request.
  if (from_peer > 0) return false;
  const auto waiting =
      std::ranges::find_if(open, [](const auto& entry) { return !entry.second.asked; });
  if (waiting == open.end()) return false;
  if (const auto stream = waiting->second.stream.lock()) {
    boost::system::error_code ignored;
    stream->socket().close(ignored);  // its read ends: its coroutine ends
  }
  open.erase(waiting);
  return true;
}

asio::awaitable<std::string> MetricsServer::render_on_worker() { co_return render_(); }

asio::awaitable<void> MetricsServer::serve(std::shared_ptr<beast::tcp_stream> held,
                                           std::uint64_t id) {
  struct Release {
    std::shared_ptr<Open> open;
    std::uint64_t id;
    ~Release() { open->connections.erase(id); }
  } release{open_, id};
  auto& stream = *held;
  stream.expires_after(kRequestTimeout);  // a scrape's request is a few lines
  beast::flat_buffer buffer(16 * 1024);
  http::request_parser<http::empty_body> parser;
  parser.header_limit(8 * 1024);
  boost::system::error_code error;
  co_await http::async_read(stream, buffer, parser,
                            asio::redirect_error(net::use_awaitable, error));
  if (error == http::error::end_of_stream || error == beast::error::timeout ||
      error == asio::error::operation_aborted || error == asio::error::connection_reset ||
      error == asio::error::bad_descriptor || !stream.socket().is_open())
    co_return;
  // Asked: no longer a place a new peer may take.
  if (const auto it = release.open->connections.find(id); it != release.open->connections.end())
    it->second.asked = true;
  stream.expires_after(kTimeout);
  http::response<http::string_body> response;
  response.set(http::field::server, "auto-resumed");
  response.set(http::field::content_type, "text/plain; charset=utf-8");
  response.keep_alive(false);
  const auto answer = [&response](http::status status, std::string body) {
    response.result(status);
    response.body() = std::move(body);
  };
  if (error) {
    answer(http::status::bad_request, "bad request: " + error.message() + "\n");
  } else {
    const auto& request = parser.get();
    response.version(request.version());
    auto target = std::string_view(request.target().data(), request.target().size());
    target = target.substr(0, target.find('?'));
    if (request.method() != http::verb::get) {
      answer(http::status::method_not_allowed, "only GET\n");
      response.set(http::field::allow, "GET");
    } else if (target == "/metrics") {
      try {
        auto text = co_await asio::co_spawn(workers_, render_on_worker(), net::use_awaitable);
        answer(http::status::ok, std::move(text));
        response.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      } catch (const std::exception& e) {
        log::error("metrics: cannot render: {}", e.what());
        answer(http::status::internal_server_error, std::string(e.what()) + "\n");
      }
    } else if (target == "/") {
      answer(http::status::ok, "auto-resumed: the metrics are at /metrics\n");
    } else {
      answer(http::status::not_found, "not found: the metrics are at /metrics\n");
    }
  }
  response.prepare_payload();
  co_await http::async_write(stream, response, asio::redirect_error(net::use_awaitable, error));
  stream.socket().shutdown(tcp::socket::shutdown_both, error);
}

}  // namespace ar
