// The efa check's parsers: `fi_info -p efa`'s listing
// (ar::health::efa_devices) up to the first line "--", the rest as what
// fi_pingpong printed on each device (ar::health::check_efa, the server
// exiting 0 and the client 1). Any input must give a verdict with a
// detail, never a crash or an exception.

#include <algorithm>

#include "autoresume/health_efa.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto input = ar::fuzz::text(data, size);
  const auto cut = input.find("\n--\n");
  const auto listing = input.substr(0, cut);
  const auto pingpong = cut == std::string_view::npos ? "" : input.substr(cut + 4);
  const auto devices = ar::health::efa_devices(listing);
  for (std::size_t i = 0; i < devices.size(); ++i)
    if (devices[i].empty() || std::find(devices.begin(), devices.begin() + static_cast<long>(i),
                                        devices[i]) != devices.begin() + static_cast<long>(i))
      ar::fuzz::finding("device '" + devices[i] + "' empty or listed twice");
  std::vector<ar::health::EfaPingpong> pingpongs;
  for (const auto& device : devices)
    pingpongs.push_back({device, {0, std::string(pingpong), ""}, {1, std::string(pingpong), ""}});
  const ar::health::ToolRun fi_info{0, std::string(listing), ""};
  for (const unsigned expected : {1U, 2U}) {
    const auto result = ar::health::check_efa(fi_info, expected, pingpongs);
    if (result.check != "efa" || result.detail.empty())
      ar::fuzz::finding("no verdict: " + result.check + " " + result.detail);
  }
  return 0;
}
