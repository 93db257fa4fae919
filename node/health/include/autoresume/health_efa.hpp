#pragma once
// AWS Elastic Fabric Adapter (EFA) devices, from libfabric's own tools:
// `fi_info -p efa` lists them, `fi_pingpong` sends through each. Pure
// functions of what the tools printed; the checker runs them.

#include <string>
#include <string_view>
#include <vector>

#include "autoresume/health.hpp"

namespace ar::health {

// The reliable-datagram (FI_EP_RDM) domains `fi_info -p efa` lists, one per
// EFA device, each once and in order, e.g. {"rdmap16s27-rdm",
// "rdmap32s27-rdm"}. fi_info prints for each fi_info structure
//
//   provider: efa
//       fabric: efa            (newer libfabric also lists "efa-direct")
//       domain: rdmap16s27-rdm
//       version: 122.0
//       type: FI_EP_RDM
//       protocol: FI_PROTO_EFA
//
// and also the devices' datagram domains ("-dgrm", FI_EP_DGRAM), not
// counted. Entries of another provider are skipped.
std::vector<std::string> efa_devices(std::string_view fi_info_output);

// One loopback fi_pingpong over `domain`: a server, and a client sent to
// 127.0.0.1 through the same device.
struct EfaPingpong {
  std::string domain;
  ToolRun server;
  ToolRun client;
};

// The check "efa": `fi_info` is the run of `fi_info -p efa`, `pingpongs`
// one per device it lists, in its order (the checker stops after the first
// failing one). `expected_devices` 0 makes the check not applicable.
// Fails when fi_info did not run or failed (e.g. "fi_getinfo: -61 (No data
// available)": no EFA device or no provider), on fewer devices than
// expected, on a pingpong whose server or client did not exit 0 (naming
// the device and the tool's last line or the runner's error), and on a
// device with no pingpong.
Result check_efa(const ToolRun& fi_info, unsigned expected_devices,
                 const std::vector<EfaPingpong>& pingpongs);

}  // namespace ar::health
