// The gpu check's parser of `nvidia-smi -q -x` (XML, with pugixml):
// ar::health::check_nvidia_smi on the input, for a node of 2 GPUs. Any
// input must give a verdict ("gpu", pass or fail with a detail), never a
// crash or an exception.

#include "autoresume/health.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto result = ar::health::check_nvidia_smi(ar::fuzz::text(data, size), 2);
  if (result.check != "gpu" || result.status == ar::health::Status::not_applicable ||
      result.detail.empty())
    ar::fuzz::finding("no verdict: " + result.check + " " + result.detail);
  (void)ar::health::node_reason(result, ar::health::Action::replace);
  return 0;
}
