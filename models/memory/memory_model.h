// Peak HBM per chip of a training step: the persistent state (parameters, gradients and AdamW
// moments, sharded; the saved layer inputs; the activations the remat policy keeps, on device or
// offloaded to host), then the largest working set of the step (a layer's backward with its
// gathered weights, or the logits and their gradient).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/workload/step_config.h"

namespace tpusim {

struct MemoryItem {
  std::string what;
  int64_t bytes = 0;
  bool on_device = true;  // false: offloaded to pinned host memory, not counted in peak HBM
};

// Persistent items, then the peak working set (the last item).
std::vector<MemoryItem> memory_model(const StepConfig& c, const LocalSizes& l);

}  // namespace tpusim
