#include "autoresume/client.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace ar {

namespace {

using Clock = net::Clock;

// What the helpers below say at the deadline; call() adds the timeout.
constexpr std::string_view kTimedOut = net::kTimedOut;

// The connection closed before a reply: on a connection kept from an
// earlier call (the controller closes idle ones), the call is tried again
// on a new one.
class Closed : public ClientError {
 public:
  Closed() : ClientError("the controller closed the connection without a reply") {}
};

// Waits until `fd` is ready for `events` or the deadline passes; returns
// false on timeout. Throws on poll errors.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  pollfd pfd{fd, events, 0};
  const int ready = net::wait_until({&pfd, 1}, deadline);
  if (ready < 0) throw ClientError(std::strerror(errno));
  return ready > 0;
}

// A connected non-blocking socket to one of the endpoint's addresses, tried
// in turn; the last one's failure if none connects.
net::Fd connect_tcp(const Endpoint& endpoint, const std::string& source,
                    Clock::time_point deadline) {
  std::string error;
  const auto addresses = net::resolve_by(endpoint.host, endpoint.port, deadline, error);
  if (!addresses) throw ClientError("cannot resolve host: " + error);
  error = "no address";
  for (const addrinfo* addr = addresses.get(); addr != nullptr; addr = addr->ai_next) {
    if (auto sock = net::connect_by(*addr, deadline, error, source); sock.valid()) return sock;
  }
  throw ClientError(error);
}

void send_all(int fd, std::string_view data, Clock::time_point deadline) {
  while (!data.empty()) {
    const auto n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n >= 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_for(fd, POLLOUT, deadline)) throw ClientError(std::string(kTimedOut));
    } else if (errno == EPIPE || errno == ECONNRESET) {
      throw Closed();
    } else if (errno != EINTR) {
      throw ClientError(std::string("send failed: ") + std::strerror(errno));
    }
  }
}

// An unsigned error line (the controller could not or would not sign it):
// what it says, for a ClientError.
std::optional<std::string> unsigned_error(std::string_view line) {
  const auto value = proto::json::parse(line, nullptr, false);
  if (value.is_discarded() || !value.is_object() || value.contains("mac") ||
      !value.contains("error") || !value["error"].is_object())
    return std::nullopt;
  const auto& error = value["error"];
  return error.value("code", std::string("?")) + ": " + error.value("message", std::string());
}

}  // namespace

Client::Client(ClientOptions options)
    : Client(options, std::make_shared<MungeDaemon>(options.munge_socket)) {}

Client::Client(ClientOptions options, std::shared_ptr<Munge> munge)
    : options_(std::move(options)), munge_(std::move(munge)) {}

proto::json Client::call(std::string_view op, proto::json fields) {
  const auto deadline = Clock::now() + options_.timeout;
  try {
    const bool kept = socket_.valid();
    if (!kept) open(deadline);
    try {
      return exchange(op, fields, deadline);
    } catch (const Closed&) {
      if (!kept) throw;
      open(deadline);  // a kept connection the controller closed meanwhile
      return exchange(op, std::move(fields), deadline);
    }
  } catch (const Refused&) {
    throw;  // a signed reply: the session stays
  } catch (const ClientError& e) {
    socket_.reset(-1);
    if (e.what() == kTimedOut)
      throw ClientError("timed out after " + std::to_string(options_.timeout.count()) + " ms");
    throw;
  } catch (...) {
    socket_.reset(-1);
    throw;
  }
}

void Client::open(Clock::time_point deadline) {
  socket_.reset(-1);
  received_.clear();
  seq_ = 0;
  // The credential first: the connection is then ready to authenticate at once.
  const auto hello = session::make_client_hello(*munge_, options_.controller_uid);
  socket_ = connect_tcp(options_.endpoint, options_.source, deadline);
  send_all(socket_.get(), hello.line, deadline);
  const auto line = receive_line(deadline);
  try {
    keys_ = session::accept_server_hello(line, hello, *munge_, options_.controller_uid);
  } catch (const session::SessionError& e) {
    throw ClientError(e.what());
  }
}

proto::json Client::exchange(std::string_view op, proto::json fields, Clock::time_point deadline) {
  ++seq_;
  const auto body = proto::make_request(seq_, op, std::move(fields));
  send_all(socket_.get(), session::seal(keys_, session::Direction::request, seq_, body), deadline);
  const auto line = receive_line(deadline);
  if (const auto error = unsigned_error(line))
    throw ClientError("the controller refused " + std::string(op) + " without signing: " + *error);
  session::Opened opened;
  try {
    opened = session::open(line, keys_, session::Direction::reply);
  } catch (const proto::ProtocolError& e) {
    throw ClientError(std::string("the controller's reply is not authentic: ") + e.what());
  }
  if (opened.seq != seq_)
    throw ClientError("the controller's reply carries sequence number " +
                      std::to_string(opened.seq) + ", not " + std::to_string(seq_));
  proto::Reply reply;
  try {
    reply = proto::parse_reply(opened.body);
  } catch (const proto::ProtocolError& e) {
    throw ClientError(std::string("the controller sent a malformed reply: ") + e.what());
  }
  if (!reply.ok) throw Refused(reply.code, reply.message);
  return reply.result;
}

std::string Client::receive_line(Clock::time_point deadline) {
  char buffer[4096];
  for (;;) {
    if (const auto nl = received_.find('\n'); nl != std::string::npos) {
      auto line = received_.substr(0, nl);
      received_.erase(0, nl + 1);
      return line;
    }
    if (received_.size() > proto::kMaxLineBytes) throw ClientError("reply too large");
    if (!wait_for(socket_.get(), POLLIN, deadline)) throw ClientError(std::string(kTimedOut));
    const auto n = recv(socket_.get(), buffer, sizeof buffer, 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) throw Closed();
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw ClientError(std::string("receive failed: ") + std::strerror(errno));
    }
    received_.append(buffer, static_cast<std::size_t>(n));
  }
}

}  // namespace ar
