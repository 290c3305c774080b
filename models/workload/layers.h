// The programs of a training step's parts, per chip: an attention layer and a GDN layer (the
// forward, its recompute as the remat policy asks, the backward; the GDN core by build), the
// embedding and logits (with vocabulary tiling), and the AdamW update. Every dot is an XLA dot
// (int8 with AQT's quantize fusions where configured), every elementwise chain an XLA fusion;
// items carry stage labels ("fwd: mlp", "bwd: attention", ...) for the breakdown.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/gdn/shape.h"
#include "kernels/transformer.h"
#include "models/workload/step_config.h"
#include "sim/ir/program.h"

namespace tpusim {

kernels::gdn::GdnShape gdn_shape(const StepConfig& c, const LocalSizes& l);
// The attention kernels' shape: local heads, the block size, queries' and values' head dims.
kernels::AttentionShape attention_shape(const StepConfig& c, const LocalSizes& l);

// An op of a layer's forward pass that reads one of the layer's weights (its elements on this
// chip's tensor shard), which FSDP gathers before it; several weights may share one op (q, k
// and v in one dot, an MLP's two up projections).
struct WeightRead {
  int item = 0;  // the op's index in the program
  int64_t elements = 0;
};

// A layer's program and its forward pass's weight reads, in program order.
struct LayerPrograms {
  Program program;
  std::vector<WeightRead> forward_weights;
};

LayerPrograms attention_layer(const StepConfig& c, const LocalSizes& l);
LayerPrograms gdn_layer(const StepConfig& c, const LocalSizes& l);
Program embedding_and_logits(const StepConfig& c, const LocalSizes& l);
Program optimizer(const StepConfig& c);

}  // namespace tpusim
