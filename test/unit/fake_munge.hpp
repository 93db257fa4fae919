#pragma once
// munged in memory: the credentials of several fake processes (each a
// FakeMunge with its own uid) held in one shared realm, with munge's rules:
// a credential decodes once, and only by its restricted uid when it has one.

#include <sys/types.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "autoresume/munge_cred.hpp"

namespace ar::test {

struct MungeRealm {
  struct Cred {
    MungeIdentity identity;
    std::optional<uid_t> restrict_uid;
    bool decoded = false;
  };
  std::mutex mutex;
  std::map<std::string, Cred> creds;
  int next = 0;
};

class FakeMunge final : public Munge {
 public:
  FakeMunge(std::shared_ptr<MungeRealm> realm, uid_t uid) : realm_(std::move(realm)), uid_(uid) {}

  std::string encode(const std::string& payload,
                     std::optional<uid_t> restrict_uid = std::nullopt) override {
    std::lock_guard lock(realm_->mutex);
    auto cred = "FAKE:" + std::to_string(++realm_->next) + ":";
    realm_->creds[cred] = {{uid_, uid_, payload}, restrict_uid, false};
    return cred;
  }

  MungeIdentity decode(const std::string& cred) override {
    std::lock_guard lock(realm_->mutex);
    const auto it = realm_->creds.find(cred);
    if (it == realm_->creds.end())
      throw MungeError("invalid credential: Invalid credential format");
    if (it->second.restrict_uid && *it->second.restrict_uid != uid_)
      throw MungeError("invalid credential: Unauthorized credential for client UID");
    if (it->second.decoded) throw MungeError("invalid credential: Replayed credential");
    it->second.decoded = true;
    return it->second.identity;
  }

 private:
  std::shared_ptr<MungeRealm> realm_;
  uid_t uid_;
};

}  // namespace ar::test
