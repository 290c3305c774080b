// The device mesh of a training step and what it leaves each chip: the parallelism axes (data
// over DCN; fsdp, tensor and context within a slice), the per-chip sizes after tensor and context
// sharding, and the ICI axes a collective over a mesh axis runs on (torus dimensions spanned,
// wraparound from the chip file).
#pragma once
#include <cstdint>
#include <string>

#include "models/workload/model_config.h"
#include "sim/chip_spec.h"
#include "sim/ir/program.h"

namespace tpusim {

struct Mesh {
  int64_t data = 1;  // slices, over DCN
  int64_t fsdp = 1;  // within a slice
  int64_t tensor = 1;
  // Context parallelism: the sequence sharded over this many chips of the slice. Weights are
  // FSDP-sharded over fsdp x context (MaxText's rules shard the embed dimension over both).
  int64_t context = 1;
  // Expert parallelism (MaxText ici_expert_parallelism): on megablox's path an MoE layer's
  // experts are split over it and the token copies travel to their experts by all-to-all;
  // elsewhere (and on the dense einsum path) it acts as one more FSDP axis (MaxText's rules
  // shard the embed dimension and the batch over it too).
  int64_t expert = 1;
  int64_t weight_shards() const { return fsdp * context * tensor * expert; }
};

// Per-chip sizes after tensor and context parallelism.
struct LocalSizes {
  int64_t tokens, batch, seq, q_heads, kv_heads, mlp, gdn_value_heads, gdn_key_heads;
};
LocalSizes local_sizes(const ModelConfig& m, const Mesh& mesh, int64_t batch_per_chip, int64_t seq);

// The ICI axis of a slice of `chips_per_slice` chips that a collective over a mesh axis of
// `size` chips runs on. `tensor_axis`: the tensor axis keeps one torus dimension to itself.
MeshAxis slice_axis(const ChipSpec& chip, int64_t chips_per_slice, const Mesh& mesh,
                    const std::string& name, int64_t size, bool tensor_axis);

}  // namespace tpusim
