#pragma once
// Tool outputs under test/unit/fixtures/<tool>/, written by hand after the
// tools' formats except where a directory's README says one was captured
// (each README says where they come from).

#include <fmt/core.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>

inline std::string fixture(const std::string& tool, const std::string& name) {
  std::ifstream in(fmt::format("{}/{}/{}", AR_FIXTURES, tool, name));
  REQUIRE(in);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}
