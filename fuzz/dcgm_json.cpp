// The dcgm and dcgm-diag checks' parsers of dcgmi's JSON (`dcgmi health -c
// -j`, `dcgmi diag -r LEVEL -j`): ar::health::check_dcgm_health and
// check_dcgm_diag on the input as the output of a run that exited 0, and
// of one that failed. Any input must give a verdict with a detail, never a
// crash or an exception.

#include "autoresume/health_dcgm.hpp"
#include "fuzz.hpp"

namespace {

void expect_verdict(const ar::health::Result& result, std::string_view check) {
  if (result.check != check || result.status == ar::health::Status::not_applicable ||
      result.detail.empty())
    ar::fuzz::finding("no verdict of " + std::string(check) + ": " + result.check + " " +
                      result.detail);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  for (const int status : {0, 1}) {
    const ar::health::ToolRun run{status, std::string(ar::fuzz::text(data, size)), ""};
    expect_verdict(ar::health::check_dcgm_health(run, 2), "dcgm");
    expect_verdict(ar::health::check_dcgm_diag(run, 2), "dcgm-diag");
  }
  return 0;
}
