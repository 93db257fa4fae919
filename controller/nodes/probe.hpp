#pragma once
// The controller's seam for probing nodes (autoresume/probe.hpp has the
// probe itself): the TCP probe, or a test's stand-in.

#include <chrono>
#include <vector>

#include "autoresume/probe.hpp"

namespace ar {

class Prober {
 public:
  virtual ~Prober() = default;
  // As probe_all.
  virtual std::vector<ProbeResult> probe(const std::vector<ProbeTarget>& targets,
                                         std::chrono::milliseconds timeout, ProbeDepth depth) = 0;
};

class TcpProber final : public Prober {
 public:
  std::vector<ProbeResult> probe(const std::vector<ProbeTarget>& targets,
                                 std::chrono::milliseconds timeout, ProbeDepth depth) override {
    return probe_all(targets, timeout, depth);
  }
};

}  // namespace ar
