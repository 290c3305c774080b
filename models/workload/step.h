// A whole training step of a model on one chip of a slice, assembled from its parts: the layer
// programs (models/workload/layers.h) played on the timing engine once per layer kind and
// multiplied by the layer count, the collectives each part hides or exposes
// (models/parallel/collective_plan.h), the host dispatch, MaxText's FLOP count
// (models/workload/flops.h) and peak HBM (models/memory/memory_model.h).
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "models/memory/memory_model.h"
#include "models/parallel/collective_plan.h"
#include "models/workload/flops.h"
#include "models/workload/layers.h"
#include "models/workload/step_config.h"
#include "sim/ir/program.h"
#include "sim/timing/result.h"

namespace tpusim {

struct StepPart {
  std::string name;  // "attention layer", "gdn layer", "embedding + logits", "optimizer", ...
  int64_t count = 1;
  double compute_s = 0;     // per instance
  double collective_s = 0;  // per instance, overlappable
  double exposed_s = 0;     // per instance: collectives not hidden + critical-path collectives
  double forward_s = 0;     // per instance: compute of the forward pass ("fwd" stages)
  double backward_s = 0;    // per instance: compute of the backward pass (recompute included)
  double recompute_s = 0;   // per instance: the recompute ("remat" stages), part of backward_s
  std::array<double, kNumCauses> time_s{};  // per instance, by cause (compute only)
  // Per instance: the mean busy time of the chip's units of each group ("mxu" over every MXU of
  // every TensorCore, "vpu", "eup", "dma", "hbm", "scalar"); collectives are in collective_s.
  std::map<std::string, double> unit_busy_s;
  double flops = 0;  // per instance, executed (algorithmic)
};

// A mixture of experts' layers with the dense MLP instead (moe.dense_layers).
inline constexpr const char* kDenseMlpLayer = "attention layer (dense MLP)";

// A decoder layer's part ("attention layer", kDenseMlpLayer, "gdn layer"): what the scanned
// layer loops run.
bool is_layer(const StepPart& p);

// The compute a layer's FSDP collectives can hide behind: a gather or reduction in flight
// advances only while a fusion carries its ring steps, XLA's dot fusions (a loop of them), not a
// Pallas kernel, whose custom call runs no collective (C5 #11's compiled forward body: wi_0's
// gather is carried by the q, k, v and output projections' fusions and waits through the splash
// attention kernel between them).
struct GatherWindows {
  // The forward's weight reads, each with the carrying compute from it to the next read.
  std::vector<ForwardWeight> forward;
  double backward_s = 0;  // the backward's carrying compute (recompute included)
};
// `p` simulated into `r`, with its forward's weight `reads` (layers.h) and the forward's and the
// backward's compute as StepPart::forward_s and backward_s.
GatherWindows gather_windows(const Program& p, const RunResult& r,
                             const std::vector<WeightRead>& reads, double forward_s,
                             double backward_s);

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
  // What the remat policy offloads to pinned host memory, all of it held at once through the
  // step, against what a chip's program may pin (ChipSpec::pinned_host_bytes).
  int64_t host_offload_bytes = 0;
  int64_t host_capacity_bytes = 0;
  bool fits_host = true;
  // false: the backward's FSDP gathers are synchronous because prefetching them would not fit
  // HBM (memory_model.h).
  bool backward_gathers_prefetched = true;
  // The TPU compiler's peak HBM for the same step (scenario `compiled:`; -1: not compiled, or it
  // does not fit) and its verdict; with `memory: compiler` (memory_source "compiler") the peak
  // and fits_hbm above are the compiler's.
  int64_t compiled_peak_hbm_bytes = -1;
  bool compiled_fits = true;
  std::string compiled_verdict;
  // XLA's largest HBM buffer slots for the same step, when the compile recorded them: "2.32 GiB
  // f32[1,4096,151936]", each slot with the values that take it in turn.
  std::vector<std::string> compiled_largest_buffers;
  // What is live in HBM at the compiled step's peak, when the compile recorded its live ranges:
  // all of it and the step's parameters among it, bytes, the instruction it is at, and the
  // largest other values: "2.32 GiB f32[1,4096,151936] fusion (jvp()/convert_element_type)".
  std::vector<std::string> compiled_peak_live;
  int64_t compiled_peak_live_bytes = -1, compiled_peak_live_parameter_bytes = 0;
  std::string compiled_peak_live_at;
  std::string memory_source = "model";
  int64_t model_peak_hbm_bytes = -1;  // tpusim's own peak when the compiler's replaced it
  // The compiled step's own program (its optimized HLO, compiled with the run's XLA flags)
  // simulated on the chip, s; -1 when the scenario's compiled step has no HLO.
  double compiled_program_s = -1;
  // false: only the memory and the FLOP count (predict_memory); no time, no parts.
  bool timed = true;

  // The step can run: its HBM and its pinned host memory both fit.
  bool fits() const { return fits_hbm && fits_host; }
};

// Checks the configuration (mesh product, divisibility), then builds every part's program and
// runs the engine's static checks on it (block shapes, VMEM), so that a configuration whose
// kernels cannot exist fails before anything is simulated. Throws ConfigError.
void check(const StepConfig& c);
StepPrediction predict_step(const StepConfig& c);
// The step's peak HBM and MaxText's FLOP count without simulating anything (`timed` false):
// what `tpusim run` reports for a step that does not fit unless asked to time it.
StepPrediction predict_memory(const StepConfig& c);

// What batching buys: each part's share of the step (count x (compute + exposed collectives))
// split into what does not grow with the per-chip batch (a chain of dependent steps, a loop's
// trips, a kernel launch, weights gathered once) and what each sample adds, from the step
// predicted at batch B (`at_b`) and at 2B: per_sample = (t(2B) - t(B)) / B, fixed = t(B) -
// B x per_sample. Parts are matched by name.
struct BatchSplit {
  std::string part;
  double fixed_s = 0, per_sample_s = 0;
};
std::vector<BatchSplit> batch_split(const StepConfig& c, const StepPrediction& at_b);

// One layer of each kind and the embedding and logits, back to back, with stage labels
// "part / stage": what `tpusim run --trace` records. Left out: the collectives (accounted
// analytically in predict_step) and the AdamW update, a single HBM-bound pass over the local
// parameters whose ~10^6 small grid steps would dominate the trace file.
Program one_of_each_part(const StepConfig& c);

}  // namespace tpusim
