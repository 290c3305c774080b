// Physical sanity on the real chip specs: bandwidth and peak are reached where they should be,
// and the time accounting is exact.
#include <gtest/gtest.h>

#include <numeric>

#include "kernels/generic.h"
#include "models/chip_loader.h"
#include "sim/timing/engine.h"

namespace tpusim {
namespace {

ChipSpec chip_without_dispatch(const std::string& name) {
  ChipSpec c = load_chip(name);
  c.host_dispatch_s = 0;
  return c;
}

class Physics : public ::testing::TestWithParam<std::string> {};

TEST_P(Physics, LargeHbmBoundCopyReachesConfiguredBandwidth) {
  // The configured rate is the nominal one times the chip's hbm_efficiency.
  const ChipSpec chip = chip_without_dispatch(GetParam());
  const RunResult r = simulate_kernel(chip, kernels::elementwise_scale(32768, 2048, 512));
  const double achieved = r.hbm_bytes() / r.time_s;
  EXPECT_GT(achieved, 0.97 * chip.hbm_effective_bytes_per_s());
  EXPECT_LE(achieved, chip.hbm_effective_bytes_per_s() * 1.0000001);
}

TEST_P(Physics, LargeMatmulApproachesPeak) {
  // Blocks big enough to be compute-bound at each chip's FLOP/byte ratio; v6e needs more VMEM
  // than its 32 MiB scoped default for that (MaxText raises the limit to 96 MiB, MT-xla).
  ChipSpec chip = chip_without_dispatch(GetParam());
  chip.scoped_vmem_bytes = chip.vmem_bytes;
  const kernels::MatmulShape s = chip.mxu_dim == 256
                                     ? kernels::MatmulShape{8192, 8192, 8192, 2048, 1024, 2048}
                                     : kernels::MatmulShape{8192, 8192, 8192, 512, 1024, 1024};
  const RunResult r = simulate_kernel(chip, kernels::pallas_matmul(s));
  const double flops_per_s = r.flops / r.time_s;
  EXPECT_GT(flops_per_s, 0.90 * chip.peak_bf16_flops);
  EXPECT_LT(flops_per_s, 1.005 * chip.peak_bf16_flops);
}

TEST_P(Physics, BusyAndStallsAddUpToTheTotal) {
  const ChipSpec chip = load_chip(GetParam());
  for (const auto& k :
       {kernels::pallas_matmul({2048, 2048, 2048, 128, 128, 128}),
        kernels::pallas_matmul({4096, 4096, 4096, 512, 1024, 1024}),
        kernels::xla_dot(chip, 1024, 1024, 1024), kernels::elementwise_scale(8192, 1024, 256)}) {
    const RunResult r = simulate_kernel(chip, k);
    EXPECT_EQ(std::accumulate(r.time.begin(), r.time.end(), int64_t{0}), r.cycles) << k->name;
    int64_t per_kernel = 0;
    for (int64_t t : r.kernels.at(0).time) per_kernel += t;
    EXPECT_EQ(per_kernel, r.kernels[0].cycles) << k->name;
  }
}

TEST_P(Physics, PeakMatchesMxuGeometryAndClock) {
  const ChipSpec chip = load_chip(GetParam());
  EXPECT_NEAR(chip.mxu_flops_per_cycle() * chip.clock_hz / chip.peak_bf16_flops, 1.0, 0.01);
  EXPECT_NEAR(chip.int8_speedup(), 2.0, 0.01);  // every generation here: int8 at 2x bf16
}

INSTANTIATE_TEST_SUITE_P(Chips, Physics, ::testing::Values("v5e", "v6e", "v5p"));

}  // namespace
}  // namespace tpusim
