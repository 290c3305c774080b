// A chip with round numbers, so tests can derive cycle counts by hand: 1 GHz, 4 MXUs of 128x128
// with a 256-cycle fill/drain, VPU 2 vreg ops per cycle with latency 2, HBM 1000 bytes per cycle,
// DMA latency 100 cycles, grid-step overhead 50 cycles, no host dispatch, 2 DMA queues.
#pragma once
#include "sim/chip_spec.h"
#include "sim/ir/kernel.h"

namespace tpusim::testing {

inline ChipSpec round_chip(int tensorcores = 1) {
  ChipSpec c;
  c.name = "round";
  c.clock_hz = 1e9;
  c.tensorcores = tensorcores;
  c.mxus_per_core = 4;
  c.mxu_dim = 128;
  c.mxu_fill_drain_cycles = 256;
  c.peak_bf16_flops = c.mxu_flops_per_cycle() * c.clock_hz;
  c.peak_int8_ops = 2 * c.peak_bf16_flops;
  c.vpu_simple_per_cycle = 2;
  c.vpu_divide_per_cycle = 0.5;
  c.vpu_transcendental_per_cycle = 0.5;
  c.vpu_cross_lane_per_cycle = 0.5;
  c.vpu_latency_cycles = 2;
  c.vmem_bytes = 128 << 20;
  c.scoped_vmem_bytes = 16 << 20;
  c.hbm_bytes = int64_t{16} << 30;
  c.hbm_bytes_per_s = 1e12;
  c.dma_queues = 2;
  c.dma_latency_cycles = 100;
  c.grid_step_overhead_cycles = 50;
  c.while_loop_overhead_cycles = 0;
  c.host_dispatch_s = 0;
  c.ici_link_bytes_per_s = 4.5e10;
  c.ici_hop_latency_s = 1e-6;
  c.dcn_bytes_per_s_per_chip = 3.125e9;
  return c;
}

// One grid step: z[256,128] f32 = x[256,128] bf16 @ w[128,128] bf16, then copied to the output.
inline std::shared_ptr<const Kernel> one_matmul_kernel() {
  KernelBuilder b("one");
  b.grid({1}, {DimSemantics::parallel});
  const auto whole = IndexMap({constant(0), constant(0)});
  const ValueId x = b.input({"x", {256, 128}, DType::bf16}, {256, 128}, whole);
  const ValueId w = b.input({"w", {128, 128}, DType::bf16}, {128, 128}, whole);
  const ValueId z = b.output({"z", {256, 128}, DType::f32}, {256, 128}, whole);
  b.copy("z = x @ w", b.dot("x @ w", x, w, DType::f32), z);
  return b.build();
}

}  // namespace tpusim::testing
