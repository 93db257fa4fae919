#include "server/metrics_http.hpp"

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
    if (*open_ >= kMaxConnections) continue;  // closed as it goes out of scope
    asio::co_spawn(acceptor_.get_executor(), serve(std::move(socket)), asio::detached);
  }
}

asio::awaitable<std::string> MetricsServer::render_on_worker() { co_return render_(); }

asio::awaitable<void> MetricsServer::serve(tcp::socket socket) {
  ++*open_;
  struct Release {
    std::shared_ptr<std::size_t> open;
    ~Release() { --*open; }
  } release{open_};
  beast::tcp_stream stream(std::move(socket));
  stream.expires_after(kRequestTimeout);  // a scrape's request is a few lines
  beast::flat_buffer buffer(16 * 1024);
  http::request_parser<http::empty_body> parser;
  parser.header_limit(8 * 1024);
  boost::system::error_code error;
  co_await http::async_read(stream, buffer, parser,
                            asio::redirect_error(net::use_awaitable, error));
  if (error == http::error::end_of_stream || error == beast::error::timeout ||
      error == asio::error::operation_aborted || error == asio::error::connection_reset)
    co_return;
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
