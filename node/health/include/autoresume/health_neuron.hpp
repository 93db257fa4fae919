#pragma once
// AWS Neuron devices (Trainium, Inferentia), from the Neuron driver's sysfs
// tree. Reads files; runs nothing and marks nothing.

#include <filesystem>

#include "autoresume/health.hpp"

namespace ar::health {

// Where the Neuron driver (aws-neuronx-dkms) puts its tree.
inline constexpr const char* kNeuronSysfs = "/sys/devices/virtual/neuron_device";

// The check "neuron": reads the tree under `root`, one directory
// neuron<N> per device and in it one neuron_core<M> per NeuronCore:
//
//   neuron<N>/stats/hardware/{sram_ecc_uncorrected, mem_ecc_uncorrected,
//                             mem_ecc_repairable_uncorrected}
//   neuron<N>/neuron_core<M>/stats/status/{hw_error, hw_hbm_ue_error,
//       hw_nc_ue_error, hw_dma_abort_error, hw_repairable_hbm_ue_error}/total
//   neuron<N>/neuron_core<M>/stats/other_info/reset_fail_count/total
//
// (a hardware counter is a file holding the count; where one is a counter
// directory instead, its "total" is read). The counts run from the driver's
// load. `expected_devices` 0 makes the check not applicable.
//
// Fails when `root` is missing or cannot be listed (no driver loaded), when
// fewer neuron<N> devices than expected are there, on each counter above
// that is not 0 (naming device, core, counter and count: "neuron3
// mem_ecc_uncorrected=2", "neuron1/neuron_core0 hw_error=4") and on a
// counter file that cannot be read or holds no count. A counter an older
// driver does not have is not looked for.
Result check_neuron_sysfs(const std::filesystem::path& root, unsigned expected_devices);

}  // namespace ar::health
