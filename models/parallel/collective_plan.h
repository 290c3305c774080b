// The collectives of a training step and what they cost, in one place: per layer the FSDP weight
// all-gathers and gradient reduction (hidden behind the layer's compute as XLA's asynchronous
// collectives are, only the excess exposed; the forward's one at a time, an attention layer's
// first synchronous; on a pure-FSDP mesh the gradient's bf16 all-reduce
// is synchronous, as the compiled steps run it), the tensor-parallel activation
// all-reduces and the context-parallel key/value gather and gradient scatter (on the critical
// path); the data-parallel gradient all-reduce over DCN (per layer iteration, pipelined behind
// the backward loop, its last iteration and the embedding exposed); the remat offload over the
// host link.
// The context-parallel state prefix of the GDN layer runs inside the layer's program (its ppermute
// rounds are program collectives the engine times with the same collective_seconds) on the axis
// context_axis() gives.
#pragma once
#include <cstdint>
#include <vector>

#include "models/workload/step_config.h"

namespace tpusim {

struct CollectiveTime {
  double total_s = 0;    // every collective of the part
  double exposed_s = 0;  // what compute does not hide
};

// What a part's collectives depend on: an attention layer gathers keys and values over the context
// axis; a layer (either kind) of an MoE model moves its token copies over the expert axis.
enum class PartKind { attention_layer, gdn_layer, embedding };

// Whether the step reduces each layer's gradient synchronously (exposed) rather than behind the
// backward: what the compiled pure-FSDP steps do (fsdp only; tensor, expert and context 1).
bool synchronous_gradient_reduction(const StepConfig& c);

// A weight the forward pass reads, in the order it reads them: its elements on this chip's
// tensor shard, and the forward compute from the op that reads it to the op that reads the next
// (the last: to the end of the pass).
struct ForwardWeight {
  int64_t elements = 0;
  double compute_s = 0;
};

// One layer (or the embedding and logits, whose FSDP collectives follow from the model's
// vocabulary and width rather than `params`) given its compute time in the forward pass and in
// the recompute + backward, and whether the backward's FSDP gathers are prefetched (hidden behind
// it) or synchronous (the memory model's MemoryModel says which).
// `forward_weights` (a layer's): its forward gathers run one at a time, as the compiled layer
// bodies schedule them (collective_plan.cpp); without them they hide behind the whole forward.
CollectiveTime layer_collectives(const StepConfig& c, int64_t params, PartKind kind,
                                 double forward_s, double backward_s,
                                 bool backward_gathers_prefetched,
                                 const std::vector<ForwardWeight>& forward_weights = {});

// A layer's remat offload over the chip's host link: what it sends to pinned host memory in the
// forward and reads back in the backward, each hidden behind that pass's compute (the compiled C5
// #11 step starts them asynchronously in its forward and backward loop bodies), only the excess
// exposed.
CollectiveTime host_offload(const StepConfig& c, PartKind kind, double forward_s,
                            double backward_s);

// The data-parallel gradient all-reduce over DCN, as the compiled multi-slice step runs it: per
// scanned layer iteration, in bf16, pipelined behind the next iteration's share of
// `layers_backward_s` (the layers' recompute + backward); the last iteration's and the
// embedding's after the backward.
CollectiveTime dcn_gradient_all_reduce(const StepConfig& c, double layers_backward_s);

// The ICI axis the sequence is sharded over under context parallelism.
MeshAxis context_axis(const StepConfig& c);

}  // namespace tpusim
