#pragma once
// munge credentials: each connection to the controller starts with one
// each way (session.hpp), from which the controller learns the caller's uid,
// as Slurm itself authenticates, and the client that it talks to the
// controller.

#include <sys/types.h>

#include <optional>
#include <stdexcept>
#include <string>

namespace ar {

class MungeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct MungeIdentity {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string payload;
};

// munged as the controller and its clients use it, behind an interface so
// that tests can put a fake in its place.
class Munge {
 public:
  virtual ~Munge() = default;
  // A fresh credential of the calling process carrying `payload`; with
  // `restrict_uid`, only a process of that uid can decode it
  // (MUNGE_OPT_UID_RESTRICTION). Throws MungeError.
  virtual std::string encode(const std::string& payload,
                             std::optional<uid_t> restrict_uid = std::nullopt) = 0;
  // Decodes `cred` (once only: munge refuses a replay). Throws MungeError
  // saying why it is not valid.
  virtual MungeIdentity decode(const std::string& cred) = 0;
};

// The munged listening on a socket (empty: munge's default one).
class MungeDaemon : public Munge {
 public:
  explicit MungeDaemon(std::string socket) : socket_(std::move(socket)) {}
  std::string encode(const std::string& payload,
                     std::optional<uid_t> restrict_uid = std::nullopt) override;
  MungeIdentity decode(const std::string& cred) override;

 private:
  std::string socket_;
};

}  // namespace ar
