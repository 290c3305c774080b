// A whole training step of a model on one chip of a slice: per-layer programs built from the
// kernels (attention, GDN, MLP, norms, embedding and logits, AdamW), played on the timing engine
// once per layer kind and multiplied by the layer count; FSDP weight all-gathers and gradient
// reduce-scatters overlapped with each layer's compute as XLA's asynchronous collectives are
// (only what exceeds the compute is exposed); tensor-parallel all-reduces on the critical path;
// the data-parallel gradient all-reduce over DCN overlapped with the backward pass. Also the
// model FLOPs as MaxText counts them, and peak HBM per chip.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernels/gdn/layer.h"
#include "models/workload/model_config.h"
#include "models/workload/remat.h"
#include "sim/chip_spec.h"
#include "sim/error.h"
#include "sim/ir/program.h"
#include "sim/timing/result.h"

namespace tpusim {

struct Mesh {
  int64_t data = 1;  // slices, over DCN
  int64_t fsdp = 1;  // within a slice
  int64_t tensor = 1;
  // Context parallelism: the sequence sharded over this many chips of the slice. Weights are
  // FSDP-sharded over fsdp x context (MaxText's rules shard the embed dimension over both).
  int64_t context = 1;
  int64_t weight_shards() const { return fsdp * context * tensor; }
};

struct StepConfig {
  ChipSpec chip;
  ModelConfig model;
  int64_t chips_per_slice = 1;
  Mesh mesh;
  int64_t seq = 4096;
  int64_t batch_per_chip = 1;
  // What the backward recomputes, keeps in HBM or offloads to pinned host memory (the host
  // transfers are not timed).
  RematPolicy remat;
  // MaxText weight_dtype: the parameters, and (assumed) their gradients and AdamW moments.
  DType weight_dtype = DType::f32;
  // MaxText num_vocab_tiling: the logits and their gradient exist for 1/N of the tokens at a time.
  int64_t vocab_tiles = 1;
  // MaxText `quantization: int8` (AQT): the layers' weight matmuls run on int8 operands, forward
  // and both backward products, each operand quantized by an XLA fusion first. Attention and
  // the logits stay bf16.
  bool int8_matmuls = false;
  kernels::gdn::LayerOptions gdn;
  int64_t gdn_chunk = 128;
  int64_t attention_block = 512;
};

struct StepPart {
  std::string name;  // "attention layer", "gdn layer", "embedding + logits", "optimizer", ...
  int64_t count = 1;
  double compute_s = 0;     // per instance
  double collective_s = 0;  // per instance, overlappable
  double exposed_s = 0;     // per instance: collectives not hidden + critical-path collectives
  double forward_s = 0;     // per instance: compute of the forward pass ("fwd" stages)
  double backward_s = 0;    // per instance: compute of the backward pass (recompute included)
  std::array<double, kNumCauses> time_s{};  // per instance, by cause (compute only)
  // Per instance: the mean busy time of the chip's units of each group ("mxu" over every MXU of
  // every TensorCore, "vpu", "eup", "dma", "hbm", "scalar"); collectives are in collective_s.
  std::map<std::string, double> unit_busy_s;
  double flops = 0;  // per instance, executed (algorithmic)
};

struct MemoryItem {
  std::string what;
  int64_t bytes = 0;
  bool on_device = true;  // false: offloaded to pinned host memory, not counted in peak HBM
};

struct StepPrediction {
  double step_time_s = 0;
  double tokens_per_s_per_chip = 0;
  double model_flops_per_chip = 0;  // per step, MaxText's count
  double tflops_per_s_per_chip = 0;
  double mfu = 0;
  std::vector<StepPart> parts;
  std::vector<MemoryItem> memory;  // persistent items, then the peak working set
  int64_t peak_hbm_bytes = 0;
  int64_t hbm_capacity_bytes = 0;
  bool fits_hbm = true;
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

// Checks the configuration (mesh product, divisibility), then builds every part's program and
// runs the engine's static checks on it (block shapes, VMEM), so that a configuration whose
// kernels cannot exist fails before anything is simulated. Throws ConfigError.
void check(const StepConfig& c);
StepPrediction predict_step(const StepConfig& c);

// One layer of each kind and the embedding and logits, back to back, with stage labels
// "part / stage": what `tpusim run --trace` records. Left out: the collectives (accounted
// analytically in predict_step) and the AdamW update, a single HBM-bound pass over the local
// parameters whose ~10^6 small grid steps would dominate the trace file.
Program one_of_each_part(const StepConfig& c);

// MaxText's calculate_tflops_training_per_device (xla_lowering.md 4.2), in FLOPs per device. It
// counts causal attention at half since mid-2025 and in full before (measured_runs.md C3), so a
// logged TFLOP/s is compared with the count of its time.
enum class AttentionCount { causal, full };
double maxtext_flops_per_device(const ModelConfig& m, int64_t batch_per_chip, int64_t seq,
                                AttentionCount count = AttentionCount::causal);

}  // namespace tpusim
