#pragma once
// The wire protocol between auto-resumed and its clients (the srun plugin,
// node agents, the CLI): newline-delimited JSON over TCP, one request and one
// reply per line, versioned and size-limited. docs/protocol.md describes it.

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ar::proto {

using nlohmann::json;

inline constexpr int kVersion = 1;
// The longest line either side accepts, newline excluded.
inline constexpr std::size_t kMaxMessageBytes = 64 * 1024;

// Error codes a reply can carry.
namespace code {
inline constexpr const char* kBadRequest = "bad_request";           // malformed or invalid
inline constexpr const char* kTooLarge = "too_large";               // over kMaxMessageBytes
inline constexpr const char* kVersion = "bad_version";              // unsupported version
inline constexpr const char* kUnauthenticated = "unauthenticated";  // no valid credential
inline constexpr const char* kForbidden = "forbidden";              // not the caller's job
inline constexpr const char* kNotFound = "not_found";
inline constexpr const char* kUnavailable = "unavailable";  // a dependency failed
inline constexpr const char* kInternal = "internal";
}  // namespace code

// A request or reply the peer got wrong; `code` is one of code::*.
class ProtocolError : public std::runtime_error {
 public:
  ProtocolError(std::string code, const std::string& message)
      : std::runtime_error(message), code_(std::move(code)) {}
  const std::string& code() const { return code_; }

 private:
  std::string code_;
};

struct Request {
  json id;           // echoed in the reply: null, a number, or a short string
  std::string op;    // what to do
  std::string cred;  // a munge credential, decoded by the server
  json body;         // the whole object, for the operation's own fields
};

// Parses one line. Throws ProtocolError (bad_request, bad_version, too_large)
// naming what is wrong.
Request parse_request(std::string_view line);

// Serialized replies, newline included.
std::string ok_reply(const json& id, json result);
std::string error_reply(const json& id, std::string_view code, std::string_view message);

// A serialized request, newline included.
std::string make_request(const json& id, std::string_view op, std::string_view cred, json fields);

// Field access that names the field and the expected type on error.
std::string get_string(const json& body, const char* field, std::size_t max_len = 4096);
std::uint32_t get_u32(const json& body, const char* field);
// An optional boolean: `fallback` when absent.
bool get_bool(const json& body, const char* field, bool fallback);
std::vector<std::string> get_string_list(const json& body, const char* field,
                                         std::size_t max_items = 1024);

// A step the srun plugin asks the controller to protect.
struct StepRegistration {
  std::uint32_t job_id = 0;
  std::uint32_t step_id = 0;
  std::string run_id;  // stable across relaunches of one protected launch
  std::uint32_t attempt = 0;
  std::vector<std::string> argv;
  std::string cwd;
  std::string nodelist;

  json to_json() const;
  static StepRegistration from_json(const json& body);  // throws ProtocolError
};

}  // namespace ar::proto
