// The dcgm listener's parser of `dcgmi policy --reg` as the node agent feeds
// it, one line at a time (ar::health::DcgmPolicyListener). Any line must
// give nothing or a "dcgm" verdict with a detail, never a crash or an
// exception.

#include "autoresume/health_dcgm.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ar::health::DcgmPolicyListener listener("0");
  for (const auto& line : ar::fuzz::split(ar::fuzz::text(data, size), '\n')) {
    const auto result = listener.feed(line);
    if (result && (result->check != "dcgm" || result->detail.empty()))
      ar::fuzz::finding("no verdict for '" + line + "': " + result->check + " " + result->detail);
  }
  return 0;
}
