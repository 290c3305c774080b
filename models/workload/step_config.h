// What a training step runs: chip, slice and mesh, model, sequence and batch, remat policy,
// parameter dtype, vocabulary tiling, int8 matmuls and the kernels' knobs; and the error an
// inconsistent configuration raises.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "kernels/gdn/layer.h"
#include "models/parallel/mesh.h"
#include "models/workload/model_config.h"
#include "models/workload/remat.h"
#include "sim/chip_spec.h"
#include "sim/error.h"

namespace tpusim {

struct StepConfig {
  ChipSpec chip;
  ModelConfig model;
  int64_t chips_per_slice = 1;
  Mesh mesh;
  int64_t seq = 4096;
  int64_t batch_per_chip = 1;
  // What the backward recomputes, keeps in HBM or offloads to pinned host memory (over the host
  // link, collective_plan.h's host_offload), as the scenario names it; layer_remat() is what the
  // layers see.
  RematPolicy remat;
  // MaxText fused_qkv / fused_mlp: one projection weight for q, k and v, one for the up
  // projections. The work is the same (tpusim runs each as one dot either way); what changes is
  // their checkpoint names (qkv_proj, mlpwi), so which remat policies save them.
  bool fused_qkv = false, fused_mlp = false;
  // MaxText weight_dtype: the parameters, and (assumed) their gradients and AdamW moments.
  DType weight_dtype = DType::f32;
  // MaxText num_vocab_tiling: the logits and their gradient exist for 1/N of the tokens at a time.
  int64_t vocab_tiles = 1;
  // MaxText `quantization: int8` (AQT): the layers' weight matmuls run on int8 operands, forward
  // and both backward products, each operand quantized by an XLA fusion first. Attention and
  // the logits stay bf16.
  bool int8_matmuls = false;
  // MaxText's MoE path (moe.py): sparse_matmul (megablox grouped matmuls, base.yml's default), or
  // dense einsums dropping what exceeds capacity_factor (> 0; -1: no dropping, every expert).
  bool moe_sparse_matmul = true;
  double capacity_factor = -1;
  kernels::gdn::LayerOptions gdn;
  int64_t gdn_chunk = 128;
  int64_t attention_block = 512;

  // AQT's local shards of the weight gradient's contraction (MaxText's
  // quantization_local_shard_count, whose -1 means the run host's local devices, configs/types.py
  // L4430-4435): the chips of one host of the slice.
  int64_t int8_local_shards() const { return std::min(chip.chips_per_host, chips_per_slice); }
  LocalSizes local() const { return local_sizes(model, mesh, batch_per_chip, seq); }
  RematPolicy layer_remat() const { return remat.fused(fused_qkv, fused_mlp); }
  MeshAxis axis(const std::string& name, int64_t size, bool tensor_axis) const {
    return slice_axis(chip, chips_per_slice, mesh, name, size, tensor_axis);
  }
};

// An invalid StepConfig. `key` is the scenario key that sets what is wrong ("mesh.tensor",
// "gdn.chunk", ...; "gdn" or "attention" for a kernel of that layer that cannot exist; empty when
// no key does); `over_vmem` marks a kernel that needs more VMEM than its limit.
class ConfigError : public Error {
 public:
  ConfigError(std::string key, const std::string& what, bool over_vmem = false)
      : Error(what), key(std::move(key)), over_vmem(over_vmem) {}
  std::string key;
  bool over_vmem;
};

// The configuration's own consistency (mesh product, divisibility, build and parallelism);
// throws ConfigError.
void check_config(const StepConfig& c);

}  // namespace tpusim
