#include "autoresume/protocol.hpp"

#include <catch2/catch.hpp>
#include <string>

using ar::proto::json;
using ar::proto::ProtocolError;
using Catch::Matchers::Contains;

namespace {

// The code of the ProtocolError `line` raises.
std::string error_code(const std::string& line) {
  try {
    ar::proto::parse_request(line);
  } catch (const ProtocolError& e) {
    return e.code();
  }
  return "none";
}

json valid_step() {
  return {{"job_id", 12},
          {"step_id", 0},
          {"run_id", "12.0-abc"},
          {"attempt", 0},
          {"argv", {"srun", "--auto-resume=1", "train.sh"}},
          {"cwd", "/home/u"},
          {"nodelist", "node[1-4]"}};
}

}  // namespace

TEST_CASE("a request made by make_request parses back", "[protocol]") {
  const auto line = ar::proto::make_request("r1", "register", "CRED", valid_step());
  REQUIRE(line.back() == '\n');
  const auto request = ar::proto::parse_request(line.substr(0, line.size() - 1));
  CHECK(request.id == "r1");
  CHECK(request.op == "register");
  CHECK(request.cred == "CRED");
  CHECK(ar::proto::StepRegistration::from_json(request.body).run_id == "12.0-abc");
}

TEST_CASE("malformed requests are refused with a reason", "[protocol]") {
  CHECK(error_code("{not json") == "bad_request");
  CHECK(error_code("[1,2]") == "bad_request");
  CHECK(error_code(R"({"op":"hello","cred":"c"})") == "bad_request");
  CHECK(error_code(R"({"v":"1","op":"hello","cred":"c"})") == "bad_request");
  CHECK(error_code(R"({"v":2,"op":"hello","cred":"c"})") == "bad_version");
  CHECK(error_code(R"({"v":1,"cred":"c"})") == "bad_request");
  CHECK(error_code(R"({"v":1,"op":"hello"})") == "bad_request");
  CHECK(error_code(R"({"v":1,"op":7,"cred":"c"})") == "bad_request");
  CHECK(error_code(std::string(ar::proto::kMaxMessageBytes + 1, ' ')) == "too_large");
  CHECK(error_code(R"({"v":1,"id":[[[1]]],"op":"hello","cred":"c"})") == "bad_request");
  CHECK(error_code(R"({"v":1,"id":")" + std::string(129, 'x') + R"(","op":"hello","cred":"c"})") ==
        "bad_request");
  CHECK_THROWS_WITH(ar::proto::parse_request(R"({"v":1,"cred":"c"})"), Contains("'op'"));
  CHECK_THROWS_WITH(ar::proto::parse_request(R"({"v":9,"op":"x","cred":"c"})"),
                    Contains("version 9"));
}

TEST_CASE("a step registration names the field it finds wrong", "[protocol]") {
  CHECK(ar::proto::StepRegistration::from_json(valid_step()).argv.size() == 3);
  const std::pair<const char*, json> bad[] = {
      {"job_id", -1},   {"job_id", "12"}, {"job_id", 4294967296LL}, {"step_id", 1.5},
      {"run_id", ""},   {"run_id", 5},    {"attempt", nullptr},     {"argv", json::array()},
      {"argv", {1, 2}}, {"argv", "srun"}, {"cwd", false},           {"nodelist", json::object()}};
  for (const auto& [field, value] : bad) {
    INFO(field << " = " << value.dump());
    auto body = valid_step();
    body[field] = value;
    CHECK_THROWS_WITH(ar::proto::StepRegistration::from_json(body), Contains(field));
  }
  auto missing = valid_step();
  missing.erase("cwd");
  CHECK_THROWS_WITH(ar::proto::StepRegistration::from_json(missing),
                    Contains("missing field 'cwd'"));
}

TEST_CASE("replies carry the version, the id and the outcome", "[protocol]") {
  const auto ok = json::parse(ar::proto::ok_reply(5, {{"a", 1}}));
  CHECK(ok["v"] == ar::proto::kVersion);
  CHECK(ok["id"] == 5);
  CHECK(ok["ok"] == true);
  CHECK(ok["result"]["a"] == 1);
  const auto error = json::parse(ar::proto::error_reply(nullptr, "forbidden", "not yours"));
  CHECK(error["ok"] == false);
  CHECK_FALSE(error.contains("id"));
  CHECK(error["error"]["code"] == "forbidden");
  CHECK(error["error"]["message"] == "not yours");
}
