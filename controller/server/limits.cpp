#include "server/limits.hpp"

#include <dirent.h>
#include <fmt/core.h>
#include <sys/resource.h>

#include "autoresume/keyvalue.hpp"

namespace ar {

ConnectionLimits connection_limits(const DaemonConfig& config, std::size_t descriptors) {
  ConnectionLimits limits;
  limits.auth_timeout = config.auth_timeout;
  limits.max_unauthenticated = config.max_unauthenticated;
  limits.max_user_connections = config.max_user_connections;
  limits.privileged_connections = config.privileged_connections;
  const std::size_t kept =
      std::size_t{config.reserved_fds} + config.privileged_connections + config.max_unauthenticated;
  if (descriptors <= kept)
    throw ConfigError(fmt::format(
        "{} descriptors are free (RLIMIT_NOFILE; LimitNOFILE= in a systemd unit): too few for "
        "reserved_fds={} + privileged_connections={} + max_unauthenticated={} and one user's "
        "connection; raise the limit or lower these",
        descriptors, config.reserved_fds, config.privileged_connections,
        config.max_unauthenticated));
  limits.max_connections = descriptors - config.reserved_fds;
  return limits;
}

std::size_t free_descriptors() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);  // best effort: the limit read below is what holds
  }
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  std::size_t open = 0;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (const dirent* entry = readdir(dir))
      if (entry->d_name[0] != '.') ++open;
    closedir(dir);
  }
  const auto max = limit.rlim_cur == RLIM_INFINITY ? std::size_t{1} << 20
                                                   : static_cast<std::size_t>(limit.rlim_cur);
  return max > open ? max - open : 0;
}

std::optional<std::string> RefusalLog::refused(std::string_view why, Clock::time_point now) {
  ++pending_;
  last_why_ = why;
  if (last_line_ && now < *last_line_ + interval_) return std::nullopt;
  return summary(now);
}

std::optional<std::string> RefusalLog::flush(Clock::time_point now) {
  const auto at = due();
  if (!at || now < *at) return std::nullopt;
  return summary(now);
}

std::optional<RefusalLog::Clock::time_point> RefusalLog::due() const {
  if (pending_ == 0) return std::nullopt;
  return last_line_ ? *last_line_ + interval_ : Clock::time_point{};
}

std::string RefusalLog::summary(Clock::time_point now) {
  const auto seconds = std::chrono::duration<double>(interval_).count();
  auto line = pending_ == 1 && !last_line_
                  ? fmt::format("refused a connection: {}", last_why_)
                  : fmt::format("refused {} connection(s) in the last {:g} s, the last one: {}",
                                pending_, seconds, last_why_);
  pending_ = 0;
  last_line_ = now;
  return line;
}

}  // namespace ar
