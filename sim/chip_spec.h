// ChipSpec: the hardware parameters the timing engine reads. Values come from models/chips/*.yaml,
// where each carries its provenance (published source, derivation, calibration fit or assumption).
#pragma once
#include <cmath>
#include <cstdint>
#include <map>
#include <string>

namespace tpusim {

// Which grid axis of a kernel a megacore chip splits over its TensorCores: the first parallel
// axis whose size the core count divides (else the first parallel axis longer than one), or
// always the leading parallel axis (a batch-1 leading axis then leaves one core idle).
enum class MegacoreSplit { first_divisible_parallel, leading_parallel };

struct ChipSpec {
  std::string name;

  // TensorCore
  double clock_hz = 0;
  int tensorcores = 1;  // 2 = megacore (v5p)
  MegacoreSplit megacore_split = MegacoreSplit::first_divisible_parallel;
  int mxus_per_core = 4;
  int mxu_dim = 128;
  // Latency from a dot's last row in to its last result out, in units of mxu_dim (one value for
  // every generation; unpublished, calibrated), and in cycles (derived by the loader).
  double mxu_fill_drain_per_dim = 2;
  int64_t mxu_fill_drain_cycles = 0;
  double peak_bf16_flops = 0;  // per chip, as published (used for MFU and a consistency test)
  double peak_int8_ops = 0;    // per chip, as published: an int8 dot streams this much faster
  double int8_speedup() const { return peak_int8_ops / peak_bf16_flops; }

  // VPU: vreg ops per cycle by op class, and result latency
  double vpu_simple_per_cycle = 2;
  double vpu_divide_per_cycle = 0.5;
  double vpu_transcendental_per_cycle = 0.5;
  double vpu_cross_lane_per_cycle = 0.5;
  // Multiplies the four rates above: how many times the chip's vector units outrun the v4/v5
  // figures they come from (1 on v5e/v5p; calibrated on v6e, whose rates are unpublished).
  double vector_rate_scale = 1;
  int64_t vpu_latency_cycles = 2;
  // The dependent latency of one row step of XLA's TPU triangular inversion
  // (InvertDiagBlocksLowerTriangular), beyond the unit latency of its vector work: the custom
  // call's algorithm is not public, so this is calibrated (on measured_runs.md C4).
  int64_t xla_row_solve_step_cycles = 0;
  // This chip's row step against v6e's, where it is calibrated: the TPU compiler's own cost model
  // estimates the custom call per block differently per chip (derived in the chip files).
  double xla_row_solve_step_scale = 1;
  int64_t row_solve_step_cycles() const {
    return std::llround(static_cast<double>(xla_row_solve_step_cycles) * xla_row_solve_step_scale);
  }
  // Vector instructions per vreg of an f32 <-> bf16 cast: packing and unpacking the 16-bit
  // layout takes several on chips without bf16 vector arithmetic (from Mosaic's lowered kernels).
  double vpu_cast_ops_per_vreg = 1;

  // Memories
  int64_t vmem_bytes = 0;
  int64_t scoped_vmem_bytes = 0;
  int64_t hbm_bytes = 0;
  double hbm_bytes_per_s = 0;  // nominal, as published
  // The fraction of it a streaming transfer achieves (the TPU compiler's own cost model).
  double hbm_efficiency = 1;

  // DMA and scalar issue
  int dma_queues = 4;
  int64_t dma_latency_cycles = 0;
  int64_t grid_step_overhead_cycles = 0;
  int64_t while_loop_overhead_cycles = 0;
  double host_dispatch_s = 0;

  // Interconnect
  int ici_dims = 2;  // 2D torus (v5e, v6e) or 3D (v5p)
  // The smallest slice whose axes have wraparound links (a full 16 x 16 pod on v5e, a whole
  // 4 x 4 x 4 cube on v5p); smaller slices are meshes.
  int64_t ici_wraparound_chips = 0;
  double ici_link_bytes_per_s = 0;  // one direction, one link
  double ici_hop_latency_s = 0;
  double ici_efficiency = 1;  // achieved fraction of the links' bandwidth in a collective
  // Whether the compiler routes a synchronous all-gather of a weight over every torus dimension
  // (v5e's AllGatherWithNetRouterEmitter: a DMA per link direction) rather than around one ring
  // in both directions (1DAllGather..., the form of every asynchronous gather on every chip).
  bool routed_weight_gathers = false;
  // The scalar loop a fusion carrying an async collective runs over the collective's devices
  // before its own work, in bundles per device (libtpu's final bundles).
  int64_t async_collective_setup_cycles_per_device = 0;
  double dcn_bytes_per_s_per_chip = 0;
  // What each slice adds to a reduction over DCN beyond its bandwidth, per step of a ring over
  // the slices (calibrated; no public figure).
  double dcn_slice_latency_s = 0;
  // To and from pinned host memory (remat offload), one direction.
  double host_link_bytes_per_s = 0;
  // The pinned host memory one chip's program may hold (what remat offloads, all of it at once).
  int64_t pinned_host_bytes = 0;
  // Slices: hosts hold chips_per_host chips; a slice spans whole hosts (or part of one) and at
  // most max_slice_chips (a pod on v5e/v6e).
  int64_t chips_per_host = 1;
  int64_t max_slice_chips = 1;

  // Provenance of every value, keyed by YAML key: "source: ...", "derived: ...", ...
  std::map<std::string, std::string> provenance;
  // Every value as its chip file writes it, keyed the same (for `tpusim chip`).
  std::map<std::string, std::string> value_text;

  int64_t fill_drain_cycles_from_dim() const {
    return static_cast<int64_t>(mxu_fill_drain_per_dim * mxu_dim + 0.5);
  }
  double cycles_to_s(int64_t c) const { return static_cast<double>(c) / clock_hz; }
  int64_t s_to_cycles(double s) const { return static_cast<int64_t>(s * clock_hz + 0.5); }
  double hbm_effective_bytes_per_s() const { return hbm_bytes_per_s * hbm_efficiency; }
  double hbm_bytes_per_cycle() const { return hbm_effective_bytes_per_s() / clock_hz; }
  double mxu_flops_per_cycle() const {
    return 2.0 * tensorcores * mxus_per_core * mxu_dim * mxu_dim;
  }
};

}  // namespace tpusim
