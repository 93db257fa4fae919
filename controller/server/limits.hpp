#pragma once
// How many connections the controller holds, and of whom (docs/protocol.md,
// "Limits"): a flood of idle or unauthenticated connections, or of one
// user's, must leave room for the engine's own descriptors and for root's
// and SlurmUser's connections.

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "autoresume/daemon_config.hpp"

namespace ar {

struct ConnectionLimits {
  // A connection not authenticated this long after it was accepted is
  // closed; an authenticated one idle for idle_timeout too.
  std::chrono::milliseconds auth_timeout{5'000};
  std::chrono::milliseconds idle_timeout{60'000};
  // At most this many wait to authenticate at once.
  std::size_t max_unauthenticated = 128;
  // Authenticated connections of one user (not root, not SlurmUser).
  std::size_t max_user_connections = 1024;
  // All connections: the descriptors left for them.
  std::size_t max_connections = 1024;
  // Of max_connections, those only root and SlurmUser may hold.
  std::size_t privileged_connections = 128;

  // What all users but root and SlurmUser may hold together once
  // authenticated: neither the privileged share nor the unauthenticated one.
  std::size_t users_share() const {
    return max_connections - privileged_connections - max_unauthenticated;
  }
};

// The limits of `config` for a daemon that may keep `descriptors` more
// descriptors open than it has now: max_connections is what reserved_fds
// leaves of them. Throws ConfigError, naming the numbers, when that leaves
// no room for one user's connection.
ConnectionLimits connection_limits(const DaemonConfig& config, std::size_t descriptors);

// Raises this process's soft limit of open descriptors (RLIMIT_NOFILE) to
// its hard limit, and returns how many more it may open than it has open now.
std::size_t free_descriptors();

// Refused connections, logged at most once per interval with a count, so
// that a flood does not flood the log too.
class RefusalLog {
 public:
  using Clock = std::chrono::steady_clock;
  explicit RefusalLog(Clock::duration interval) : interval_(interval) {}

  // Counts a refusal (`why`) at `now`: the line to log now, if one is due.
  std::optional<std::string> refused(std::string_view why, Clock::time_point now);
  // The refusals not logged yet, once their interval is over at `now`.
  std::optional<std::string> flush(Clock::time_point now);
  // When flush has something to say; nothing when nothing is pending.
  std::optional<Clock::time_point> due() const;

 private:
  std::string summary(Clock::time_point now);

  Clock::duration interval_;
  std::optional<Clock::time_point> last_line_;
  std::size_t pending_ = 0;
  std::string last_why_;
};

}  // namespace ar
