#include "autoresume/munge_cred.hpp"

#include <munge.h>

#include <cstdlib>
#include <memory>

namespace ar {

namespace {

struct ContextDeleter {
  void operator()(munge_ctx_t ctx) const { munge_ctx_destroy(ctx); }
};
using Context = std::unique_ptr<std::remove_pointer_t<munge_ctx_t>, ContextDeleter>;

Context make_context(const std::string& socket) {
  Context ctx(munge_ctx_create());
  if (!ctx) throw MungeError("cannot create a munge context");
  if (!socket.empty() &&
      munge_ctx_set(ctx.get(), MUNGE_OPT_SOCKET, socket.c_str()) != EMUNGE_SUCCESS)
    throw MungeError("cannot use munge socket '" + socket + "': " + munge_ctx_strerror(ctx.get()));
  return ctx;
}

}  // namespace

std::string MungeDaemon::encode(const std::string& payload, std::optional<uid_t> restrict_uid) {
  auto ctx = make_context(socket_);
  if (restrict_uid &&
      munge_ctx_set(ctx.get(), MUNGE_OPT_UID_RESTRICTION, *restrict_uid) != EMUNGE_SUCCESS)
    throw MungeError("cannot restrict a munge credential to uid " + std::to_string(*restrict_uid) +
                     ": " + munge_ctx_strerror(ctx.get()));
  char* cred = nullptr;
  if (const auto rc =
          munge_encode(&cred, ctx.get(), payload.data(), static_cast<int>(payload.size()));
      rc != EMUNGE_SUCCESS)
    throw MungeError(std::string("munge_encode failed: ") + munge_strerror(rc));
  std::unique_ptr<char, decltype(&std::free)> owned(cred, &std::free);
  return std::string(cred);
}

MungeIdentity MungeDaemon::decode(const std::string& cred) {
  auto ctx = make_context(socket_);
  void* payload = nullptr;
  int length = 0;
  MungeIdentity identity;
  const auto rc =
      munge_decode(cred.c_str(), ctx.get(), &payload, &length, &identity.uid, &identity.gid);
  if (payload != nullptr && length > 0)
    identity.payload.assign(static_cast<const char*>(payload), static_cast<std::size_t>(length));
  std::free(payload);
  if (rc != EMUNGE_SUCCESS)
    throw MungeError(std::string("invalid credential: ") + munge_strerror(rc));
  return identity;
}

}  // namespace ar
