#include "autoresume/session.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <unistd.h>

#include <array>

namespace ar::session {

namespace {

using proto::json;
using proto::ProtocolError;
namespace code = proto::code;

constexpr std::size_t kNonceBytes = 32;
constexpr std::size_t kSessionIdBytes = 16;
constexpr std::size_t kKeyBytes = 32;
constexpr std::size_t kMaxCredBytes = 16 * 1024;

// OpenSSL, initialized once without its exit handler: srun calls the
// plugin's exit hook from its own exit handlers (spank_fini), which would
// otherwise run after OpenSSL had cleaned itself up.
void init_openssl() {
  static const bool done = OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr) == 1;
  if (!done) throw std::runtime_error("OpenSSL cannot be initialized");
}

std::string hex(const unsigned char* data, std::size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (std::size_t i = 0; i < size; ++i) {
    out.push_back(kDigits[data[i] >> 4]);
    out.push_back(kDigits[data[i] & 0xf]);
  }
  return out;
}

// The bytes of lower-case hex `text`; nothing when it is not that.
std::optional<std::string> unhex(std::string_view text) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (text.size() % 2 != 0) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < text.size(); i += 2) {
    const int high = digit(text[i]), low = digit(text[i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    out.push_back(static_cast<char>(high * 16 + low));
  }
  return out;
}

std::string text_of(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

// A line's JSON object with "v": 2; ProtocolError otherwise, bad_version
// (naming the upgrade rule) for another version.
json parse_line(std::string_view line) {
  auto value = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) throw ProtocolError(code::kBadRequest, "not valid JSON");
  if (!value.is_object()) throw ProtocolError(code::kBadRequest, "a line must be a JSON object");
  const auto v = value.find("v");
  if (v == value.end() || !v->is_number_integer() || v->get<long long>() != proto::kVersion) {
    const auto which = v == value.end() ? std::string("without 'v'") : "version " + v->dump();
    throw ProtocolError(code::kVersion,
                        "protocol " + which + " is not supported: " + upgrade_rule());
  }
  return value;
}

std::string string_field(const json& object, const char* field, std::size_t max) {
  const auto it = object.find(field);
  if (it == object.end() || !it->is_string())
    throw ProtocolError(code::kBadRequest, std::string("missing string field '") + field + "'");
  if (it->get_ref<const std::string&>().size() > max)
    throw ProtocolError(code::kBadRequest, std::string("field '") + field + "' is too long");
  return it->get<std::string>();
}

std::string hello_payload(std::string_view body) {
  return std::string(kTag) + " hello " + sha256_hex(body);
}

std::string session_payload(const std::string& id, std::string_view hello_body,
                            const std::string& key) {
  return std::string(kTag) + " session " + id + " " + sha256_hex(hello_body) + " " +
         hex(reinterpret_cast<const unsigned char*>(key.data()), key.size());
}

std::string mac_of(const Keys& keys, Direction direction, std::uint64_t seq,
                   std::string_view body) {
  std::string data(kTag);
  data += direction == Direction::request ? " request " : " reply ";
  data += keys.id + " " + std::to_string(seq) + "\n";
  data += body;
  return hmac_hex(keys.key, data);
}

}  // namespace

std::string upgrade_rule() {
  return "this controller speaks protocol " + std::to_string(proto::kVersion) +
         "; upgrade the controller first, then the login and batch hosts (the srun plugin and "
         "the CLI), then the node agents (docs/protocol.md)";
}

std::string sha256_hex(std::string_view data) {
  init_openssl();
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  if (EVP_Digest(data.data(), data.size(), digest.data(), &size, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("SHA-256 failed");
  return hex(digest.data(), size);
}

std::string hmac_hex(std::string_view key, std::string_view data) {
  init_openssl();
  std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
  unsigned int size = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac.data(),
           &size) == nullptr)
    throw std::runtime_error("HMAC-SHA256 failed");
  return hex(mac.data(), size);
}

std::string random_hex(std::size_t bytes) {
  init_openssl();
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes)) != 1)
    throw std::runtime_error("no random bytes from OpenSSL");
  return hex(reinterpret_cast<const unsigned char*>(raw.data()), raw.size());
}

std::string error_line(std::string_view code, std::string_view message) {
  return text_of({{"v", proto::kVersion},
                  {"ok", false},
                  {"error", {{"code", std::string(code)}, {"message", std::string(message)}}}}) +
         "\n";
}

ClientHello make_client_hello(Munge& munge, uid_t controller_uid) {
  ClientHello hello;
  hello.body = text_of({{"nonce", random_hex(kNonceBytes)}});
  const auto cred = munge.encode(hello_payload(hello.body), controller_uid);
  hello.line = text_of({{"v", proto::kVersion}, {"hello", hello.body}, {"cred", cred}}) + "\n";
  return hello;
}

ServerHello answer_client_hello(std::string_view line, Munge& munge) {
  const auto value = parse_line(line);
  if (!value.contains("hello"))
    throw ProtocolError(code::kBadRequest,
                        "a connection starts with a hello (docs/protocol.md, Sessions)");
  const auto body = string_field(value, "hello", 1024);
  const auto cred = string_field(value, "cred", kMaxCredBytes);
  MungeIdentity identity;
  try {
    identity = munge.decode(cred);
  } catch (const MungeError& e) {
    std::string why = e.what();
    if (geteuid() != 0 && why.find("Unauthorized") != std::string::npos)
      why += " (clients restrict their credential to root unless told the controller's uid " +
             std::to_string(geteuid()) +
             ": controller_uid= in plugstack.conf, --controller-uid for the CLI and the agent)";
    throw ProtocolError(code::kUnauthenticated, why);
  }
  if (identity.payload != hello_payload(body))
    throw ProtocolError(code::kUnauthenticated,
                        "the credential was not made for this hello (another payload)");
  ServerHello out;
  out.uid = identity.uid;
  out.gid = identity.gid;
  out.keys.id = random_hex(kSessionIdBytes);
  out.keys.key = *unhex(random_hex(kKeyBytes));
  std::string own;
  try {
    own = munge.encode(session_payload(out.keys.id, body, out.keys.key), identity.uid);
  } catch (const MungeError& e) {
    throw ProtocolError(code::kInternal, e.what());
  }
  out.line = text_of({{"v", proto::kVersion}, {"session", out.keys.id}, {"cred", own}}) + "\n";
  return out;
}

namespace {

// The controller's refusal of a hello, as the client says it.
[[noreturn]] void refused_hello(const json& value) {
  const auto error = value.value("error", json::object());
  const auto code = error.is_object() ? error.value("code", std::string("?")) : "?";
  const auto message = error.is_object() ? error.value("message", std::string()) : "";
  auto what = "the controller refused the session: " + code + ": " + message;
  if (code == code::kVersion && message.find("upgrade") == std::string::npos)
    what +=
        " (the controller is older than this client: upgrade it first, then the login and "
        "batch hosts, then the node agents)";
  throw SessionError(what);
}

}  // namespace

Keys accept_server_hello(std::string_view line, const ClientHello& hello, Munge& munge,
                         uid_t controller_uid) {
  const auto value = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded() || !value.is_object())
    throw SessionError("the controller sent a malformed reply to the hello");
  if (value.contains("error")) refused_hello(value);
  if (value.value("v", 0) != proto::kVersion || !value.contains("session") ||
      !value["session"].is_string() || !value.contains("cred") || !value["cred"].is_string())
    throw SessionError("the controller sent a malformed reply to the hello");
  const auto id = value["session"].get<std::string>();
  MungeIdentity identity;
  try {
    identity = munge.decode(value["cred"].get<std::string>());
  } catch (const MungeError& e) {
    throw SessionError(std::string("the reply to the hello carries no valid credential (") +
                       e.what() + "): whoever listens at this address is not the controller");
  }
  if (identity.uid != 0 && identity.uid != controller_uid)
    throw SessionError("the reply to the hello comes from uid " + std::to_string(identity.uid) +
                       ", not from root or the controller's uid " + std::to_string(controller_uid) +
                       ": whoever listens at this address is not the controller");
  const auto prefix = std::string(kTag) + " session " + id + " " + sha256_hex(hello.body) + " ";
  const auto& payload = identity.payload;
  const auto key = payload.starts_with(prefix)
                       ? unhex(std::string_view(payload).substr(prefix.size()))
                       : std::nullopt;
  if (!key || key->size() != kKeyBytes)
    throw SessionError("the controller's credential does not answer this hello");
  return {id, *key};
}

std::string seal(const Keys& keys, Direction direction, std::uint64_t seq, std::string_view body) {
  return text_of({{"v", proto::kVersion},
                  {"seq", seq},
                  {"body", std::string(body)},
                  {"mac", mac_of(keys, direction, seq, body)}}) +
         "\n";
}

Opened open(std::string_view line, const Keys& keys, Direction direction) {
  const auto value = parse_line(line);
  const auto seq = value.find("seq");
  if (seq == value.end() || !seq->is_number_unsigned() || seq->get<std::uint64_t>() == 0)
    throw ProtocolError(code::kBadRequest, "field 'seq' must be a positive integer");
  Opened out{seq->get<std::uint64_t>(), string_field(value, "body", proto::kMaxMessageBytes)};
  const auto mac = string_field(value, "mac", 128);
  const auto expected = mac_of(keys, direction, out.seq, out.body);
  if (mac.size() != expected.size() || CRYPTO_memcmp(mac.data(), expected.data(), mac.size()) != 0)
    throw ProtocolError(code::kUnauthenticated,
                        "the message's MAC does not match: it was altered, or made for another "
                        "session");
  return out;
}

}  // namespace ar::session
