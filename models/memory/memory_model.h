// Peak HBM per chip of a training step: the persistent state (parameters, gradients and AdamW
// moments, sharded; the saved layer inputs; the activations the remat policy keeps, on device or
// offloaded to host), then the largest working set of the step: a layer's backward (the peak of
// the buffers its program holds live, sim/ir/liveness.h; Qwen3-Next's block of four layers,
// recomputed together) with the gradients and its gathered weights, or the logits. A layer's
// backward holds the running layer's gathered weights and the next one's, prefetched, unless
// that does not fit HBM and holding the running layer's alone does: then, as the compiled C5 #14
// step does, the backward's gathers are not prefetched but synchronous.
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

struct MemoryModel {
  std::vector<MemoryItem> items;  // persistent items, then the peak working set (the last item)
  // false: the backward's FSDP gathers are synchronous, not prefetched behind the previous
  // layer's backward, to fit HBM.
  bool backward_gathers_prefetched = true;
};

MemoryModel memory_model(const StepConfig& c, const LocalSizes& l);

// Columns of a residual-stream activation [tokens, d_model] per chip: sharded over the tensor
// axis (MaxText's activation_embed rule).
int64_t residual_columns(const StepConfig& c);

// Bytes one layer sends to pinned host memory in its forward and reads back in its backward: the
// activations the remat policy offloads (an attention layer's and its MLP's; a GDN layer names only
// its MLP's) and the layer input if it is offloaded.
int64_t offloaded_bytes_per_layer(const StepConfig& c, const LocalSizes& l, bool attention);

}  // namespace tpusim
