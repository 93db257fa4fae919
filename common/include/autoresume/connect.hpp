#pragma once
// TCP connections made within a deadline, in plain POSIX so that the SPANK
// plugin pulls in no event loop. A connect is started without blocking and
// then waited for until the deadline: the controller's client tries one
// address at a time (connect_by); the node prober starts one connect per
// node and waits for all of them in one poll (start_connect, wait_until,
// connect_error).

#include <netdb.h>
#include <poll.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace ar::net {

using Clock = std::chrono::steady_clock;

// What connect_by says at the deadline.
inline constexpr std::string_view kTimedOut = "timed out";

// A descriptor that closes itself; -1 when it holds none.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept {
    reset(other.release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(-1); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd);

 private:
  int fd_;
};

struct AddressesDeleter {
  void operator()(addrinfo* list) const { freeaddrinfo(list); }
};
// getaddrinfo's list, freed when it goes.
using Addresses = std::unique_ptr<addrinfo, AddressesDeleter>;

// The addresses of `host` (a name or a numeric address) for a TCP connection
// to `port`, in getaddrinfo's order; nothing, with `error` set to
// getaddrinfo's message, when it does not resolve.
Addresses resolve(const std::string& host, std::uint16_t port, std::string& error);

// `address` as numeric text ("10.1.0.5", "fd00::7"); empty when it has none.
std::string numeric_host(const addrinfo& address);

// How a name is looked up: getaddrinfo's signature (tests pass a fake).
using Lookup = std::function<int(const char* host, const char* service, const addrinfo* hints,
                                 addrinfo** found)>;

// resolve() by `deadline`: a numeric address at once, without a lookup; a
// name looked up on a thread of its own, which the caller leaves at the
// deadline (nothing, with `error` set to kTimedOut): the thread ends, and
// frees what it found, whenever the lookup returns.
Addresses resolve_by(const std::string& host, std::uint16_t port, Clock::time_point deadline,
                     std::string& error, const Lookup& lookup = ::getaddrinfo);

// Starts a non-blocking TCP connection to `address`: the socket, its
// connection made or under way (the socket polls writable once the attempt
// is over; connect_error says how it went), or no socket, with `error`
// (strerror's text) saying why the attempt failed at once.
Fd start_connect(const addrinfo& address, std::string& error);

// How the connection attempt on `fd` went, once it polled writable (or with
// an error): 0 when it connected, else the errno value of the failure.
int connect_error(int fd);

// Polls `fds` until one of them is ready or `deadline` passes, resuming
// after signals: how many are ready, 0 at the deadline, -1 (errno set) when
// poll itself fails.
int wait_until(std::span<pollfd> fds, Clock::time_point deadline);

// Connects to `address` by `deadline`: the connected non-blocking socket,
// or no socket, with `error` saying why (strerror's text, or kTimedOut).
// With `source` (a numeric address), the socket is bound to it first, so
// that the connection comes from that address: `error` names it when it
// is not one of this host's (or not of `address`'s family).
Fd connect_by(const addrinfo& address, Clock::time_point deadline, std::string& error,
              const std::string& source = {});

}  // namespace ar::net
