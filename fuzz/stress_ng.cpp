// The cpu check's parser of `stress-ng --metrics-brief`
// (ar::health::check_cpu_stress, cpu_ops_per_second), with and without a
// recorded baseline. Any input must give a verdict with a detail, never a
// crash or an exception; a rate read must be a number.

#include <cmath>

#include "autoresume/health.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto output = ar::fuzz::text(data, size);
  if (const auto rate = ar::health::cpu_ops_per_second(output); rate && std::isnan(*rate))
    ar::fuzz::finding("a rate that is not a number");
  for (const auto baseline : {std::optional<double>{}, std::optional<double>{1000.0}}) {
    const auto result = ar::health::check_cpu_stress(output, 0, baseline, 0.5);
    if (result.check != "cpu" || result.detail.empty())
      ar::fuzz::finding("no verdict: " + result.check + " " + result.detail);
  }
  return 0;
}
