// Whole-kernel timing through the SystemC engine against hand-derived cycle counts on the test
// chip (tests/test_chip.h): BlockSpec pipelining, DMA-bound kernels, no refetch of unchanged
// blocks, megacore, and the accounting identity busy + stalls = total.
#include "sim/timing/engine.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "kernels/generic.h"
#include "sim/error.h"
#include "tests/test_chip.h"

namespace tpusim {
namespace {

using testing::round_chip;

// The engine's every step, recorded: these tests count the events of hand-derived schedules.
const SimOptions kFullTimeline{.record_timeline = true, .fast_forward = false};

int64_t time_of(const RunResult& r, Cause c) { return r.time[static_cast<int>(c)]; }
int64_t total_of(const RunResult& r) {
  return std::accumulate(r.time.begin(), r.time.end(), int64_t{0});
}
int unit(const RunResult& r, const std::string& name) {
  for (size_t u = 0; u < r.units.size(); ++u)
    if (r.units[u].name == name) return static_cast<int>(u);
  ADD_FAILURE() << "no unit " << name;
  return -1;
}
int count_label(const RunResult& r, const std::string& label) {
  int n = 0;
  for (const TimelineEvent& e : r.events)
    if (e.cause == Cause::busy && r.labels[e.label] == label &&
        r.units[e.unit].kind == UnitKind::dma)
      ++n;
  return n;
}

TEST(Engine, OneStepMatmulByHand) {
  const RunResult r = simulate_kernel(round_chip(), testing::one_matmul_kernel());
  // x (64 KiB) on queue 0: HBM from 100 (DMA latency) for 66 cycles -> 166. w (32 KiB) on queue 1:
  // requested at 100, HBM busy until 166, served [166, 199). Step overhead [0, 50); wait for the
  // inputs until 199. Body 387 cycles (body_schedule_test) -> 586. z (128 KiB) written back:
  // HBM [686, 818). Total 818.
  EXPECT_EQ(r.cycles, 818);
  EXPECT_EQ(time_of(r, Cause::step_overhead), 50);
  EXPECT_EQ(time_of(r, Cause::dma_wait), (199 - 50) + (818 - 586));
  EXPECT_EQ(time_of(r, Cause::busy), 144);
  EXPECT_EQ(time_of(r, Cause::mxu_fill_drain), 241);
  EXPECT_EQ(total_of(r), r.cycles);
  EXPECT_EQ(r.hbm_read_bytes, 65536 + 32768);
  EXPECT_EQ(r.hbm_write_bytes, 131072);
}

// A fusion carrying an async collective's ring steps first runs a scalar loop over the
// collective's devices (4 x 10 cycles here), before it fetches anything: the whole schedule above
// moves by 40 cycles, charged as scalar overhead.
TEST(Engine, ACarrierRunsItsSetupLoopBeforeItsFirstFetch) {
  ChipSpec chip = round_chip();
  chip.async_collective_setup_cycles_per_device = 10;
  Kernel carrier = *testing::one_matmul_kernel();
  carrier.carried_group = 4;
  const RunResult r = simulate_kernel(chip, std::make_shared<const Kernel>(carrier));
  EXPECT_EQ(r.cycles, 818 + 40);
  EXPECT_EQ(time_of(r, Cause::step_overhead), 50 + 40);
  EXPECT_EQ(time_of(r, Cause::dma_wait), (199 - 50) + (818 - 586));
  EXPECT_EQ(total_of(r), r.cycles);
}

// The compiled VLIW schedule's length is a floor on a call: 1000 cycles beyond the 818 the units
// take are waited out at its end as vliw_schedule; a floor below 818 changes nothing.
TEST(Engine, ACallLastsAtLeastItsCompiledSchedule) {
  Kernel floored = *testing::one_matmul_kernel();
  floored.vliw_floor_cycles = 1818;
  const RunResult r = simulate_kernel(round_chip(), std::make_shared<const Kernel>(floored));
  EXPECT_EQ(r.cycles, 1818);
  EXPECT_EQ(time_of(r, Cause::vliw_schedule), 1000);
  EXPECT_EQ(time_of(r, Cause::dma_wait), (199 - 50) + (818 - 586));
  EXPECT_EQ(total_of(r), r.cycles);
  floored.vliw_floor_cycles = 500;
  const RunResult below = simulate_kernel(round_chip(), std::make_shared<const Kernel>(floored));
  EXPECT_EQ(below.cycles, 818);
  EXPECT_EQ(time_of(below, Cause::vliw_schedule), 0);
}

TEST(Engine, DmaBoundKernelHidesComputeBehindTransfers) {
  // y = 2x over [1024, 1024] f32 in two blocks of 512 rows (2 MiB = 2097.152 HBM cycles each; the
  // pipe is held for the fraction, a requester sees its data at the next whole cycle).
  const RunResult r =
      simulate_kernel(round_chip(), kernels::elementwise_scale(1024, 1024, 512), kFullTimeline);
  // x0 [100, 2197.152), arrives 2198. Step 0: overhead to 50, wait to 2198, prefetch x1 (HBM
  // [2298, 4395.152), arrives 4396), body 256 + 2 cycles to 2456, write y0: requested 2556, HBM
  // free at 4395.152 -> [4395.152, 6492.304). Step 1: overhead to 2506, wait x1 until 4396, body
  // to 4654, write y1: HBM [6492.304, 8589.456), done at 8590. The HBM timeline rounds each
  // interval's ends: 2097 + 2097 + 2097 + 2097 cycles busy.
  EXPECT_EQ(r.cycles, 8590);
  EXPECT_EQ(time_of(r, Cause::busy), 2 * 256);
  EXPECT_EQ(r.unit_busy[unit(r, "hbm")], 4 * 2097);
  EXPECT_EQ(r.unit_busy[unit(r, "tc0.vpu")], 2 * 256);
  EXPECT_EQ(total_of(r), r.cycles);
  // The prefetch of x1 overlaps step 0's compute: x1's transfer starts before step 0's body ends.
  int64_t x1_start = -1;
  for (const TimelineEvent& e : r.events)
    if (r.labels[e.label] == "fetch x" && e.unit == unit(r, "hbm") && e.step == 1)
      x1_start = e.start;
  EXPECT_EQ(x1_start, 2298);
}

TEST(Engine, UnchangedBlockIndexIsNotRefetched) {
  // grid (4): x blocks follow the grid, w's index is constant: fetched once.
  KernelBuilder b("bcast");
  b.grid({4}, {DimSemantics::arbitrary});
  const ValueId x =
      b.input({"x", {512, 128}, DType::bf16}, {128, 128}, IndexMap({axis(0), constant(0)}));
  const ValueId w =
      b.input({"w", {128, 128}, DType::bf16}, {128, 128}, IndexMap({constant(0), constant(0)}));
  const ValueId z =
      b.output({"z", {512, 128}, DType::f32}, {128, 128}, IndexMap({axis(0), constant(0)}));
  b.copy("z = x @ w", b.dot("x @ w", x, w, DType::f32), z);
  const RunResult r = simulate_kernel(round_chip(), b.build(), kFullTimeline);
  EXPECT_EQ(count_label(r, "fetch x"), 4);
  EXPECT_EQ(count_label(r, "fetch w"), 1);
  EXPECT_EQ(count_label(r, "write z"), 4);
  EXPECT_EQ(r.hbm_read_bytes, 4 * 32768 + 32768);
}

TEST(Engine, OutputWrittenBackOnlyWhenItsIndexChanges) {
  // The matmul's z block stays put over the k axis: one write per (i, j), not per step.
  const RunResult r = simulate_kernel(
      round_chip(), kernels::pallas_matmul({256, 512, 256, 128, 128, 128}), kFullTimeline);
  EXPECT_EQ(count_label(r, "write z"), 4);
  EXPECT_EQ(count_label(r, "fetch x"), 16);
  EXPECT_EQ(r.hbm_write_bytes, 4 * 128 * 128 * 2);
}

std::shared_ptr<const Kernel> compute_bound(int64_t steps) {
  KernelBuilder b("compute");
  b.grid({steps}, {DimSemantics::parallel});
  const ValueId x = b.input({"x", {steps * 1024, 128}, DType::bf16}, {1024, 128},
                            IndexMap({axis(0), constant(0)}));
  const ValueId w =
      b.input({"w", {128, 128}, DType::bf16}, {128, 128}, IndexMap({constant(0), constant(0)}));
  const ValueId o =
      b.output({"o", {steps * 8, 128}, DType::f32}, {8, 128}, IndexMap({axis(0), constant(0)}));
  ValueId v = x;
  for (int i = 0; i < 8; ++i) v = b.dot("dot", v, w, DType::bf16);  // a long dependent chain
  b.reduce("sum", v, {0});
  b.fill("o", o, 0);
  return b.build();
}

TEST(Engine, MegacoreSplitsTheParallelGridOverTwoCores) {
  const auto k = compute_bound(8);
  const RunResult one = simulate_kernel(round_chip(1), k, kFullTimeline);
  const RunResult two = simulate_kernel(round_chip(2), k, kFullTimeline);
  // Each core runs 4 of the 8 steps: steps 0-3 on tc0, 4-7 on tc1.
  std::set<int64_t> tc0, tc1;
  for (const TimelineEvent& e : two.events) {
    if (two.units[e.unit].kind != UnitKind::mxu) continue;
    (two.units[e.unit].core == 0 ? tc0 : tc1).insert(e.step);
  }
  EXPECT_EQ(tc0, (std::set<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(tc1, (std::set<int64_t>{4, 5, 6, 7}));
  // The body dominates and the cores only share HBM: the time halves, up to the first fetch.
  const double ratio = static_cast<double>(two.cycles) / one.cycles;
  EXPECT_GT(ratio, 0.5);
  EXPECT_LT(ratio, 0.52);
  EXPECT_EQ(total_of(two), two.cycles);
  EXPECT_EQ(two.flops, one.flops);
}

TEST(Engine, TheChipsSplitRuleDecidesWhetherABatchOneKernelUsesBothCores) {
  // Grid (batch 1, 8 heads), both parallel, as the GDN kernels put the batch first. Splitting the
  // first axis the core count divides deals the heads to the two cores; splitting the leading
  // axis leaves one core idle and takes twice as long.
  KernelBuilder b("batch first");
  b.grid({1, 8}, {DimSemantics::parallel, DimSemantics::parallel});
  const ValueId x =
      b.input({"x", {8 * 1024, 128}, DType::bf16}, {1024, 128}, IndexMap({axis(1), constant(0)}));
  const ValueId w =
      b.input({"w", {128, 128}, DType::bf16}, {128, 128}, IndexMap({constant(0), constant(0)}));
  const ValueId o =
      b.output({"o", {8 * 8, 128}, DType::f32}, {8, 128}, IndexMap({axis(1), constant(0)}));
  ValueId v = x;
  for (int i = 0; i < 8; ++i) v = b.dot("dot", v, w, DType::bf16);
  b.reduce("sum", v, {0});
  b.fill("o", o, 0);
  const auto k = b.build();
  auto cores_used = [](const RunResult& r) {
    std::set<int> cores;
    for (const TimelineEvent& e : r.events)
      if (r.units[e.unit].kind == UnitKind::mxu) cores.insert(r.units[e.unit].core);
    return cores.size();
  };
  ChipSpec chip = round_chip(2);
  chip.megacore_split = MegacoreSplit::first_divisible_parallel;
  const RunResult both = simulate_kernel(chip, k, kFullTimeline);
  chip.megacore_split = MegacoreSplit::leading_parallel;
  const RunResult one = simulate_kernel(chip, k, kFullTimeline);
  EXPECT_EQ(cores_used(both), 2u);
  EXPECT_EQ(cores_used(one), 1u);
  const double ratio = static_cast<double>(one.cycles) / both.cycles;
  EXPECT_GT(ratio, 1.9);
  EXPECT_LT(ratio, 2.0);
}

TEST(Engine, ArbitraryAxisIsNotSplitAcrossCores) {
  const RunResult r = simulate_kernel(
      round_chip(2), kernels::pallas_matmul({128, 1024, 128, 128, 128, 128}), kFullTimeline);
  for (const TimelineEvent& e : r.events) {
    if (e.cause == Cause::busy) {
      EXPECT_NE(r.units[e.unit].core, 1) << r.labels[e.label];
    }
  }
}

TEST(Engine, VmemOverflowNamesBuffersAndLimit) {
  try {
    simulate_kernel(round_chip(), kernels::pallas_matmul({4096, 4096, 4096, 2048, 2048, 2048}));
    FAIL() << "expected a VMEM error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("over the scoped VMEM limit on round of 16.00 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("input y block [2048,2048] bf16 x2 buffers = 16.00 MiB"), std::string::npos)
        << m;
    EXPECT_EQ(m.find('\n'), std::string::npos);
  }
}

TEST(Engine, ImpossibleBlockShapeIsRejected) {
  try {
    simulate_kernel(round_chip(), kernels::pallas_matmul({1000, 1024, 1024, 100, 1024, 1024}));
    FAIL() << "expected a block shape error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("neither a multiple of 8 nor the full dimension"),
              std::string::npos)
        << e.what();
  }
}

TEST(Engine, CollectiveOverlapsComputeAndDependentKernelWaits) {
  ChipSpec chip = round_chip();
  Program p;
  p.name = "overlap";
  const auto k = compute_bound(2);
  // 45 MB all-gather over a 4-chip line: 3/4 * 45e6 / 4.5e10 s + 3 hops * 1 us = 753 us.
  const int ag =
      p.add_collective("ag", {CollectiveKind::all_gather, 45'000'000, {"fsdp", 4, false, 1}});
  p.add_kernel(k);
  p.add_kernel(k, {ag});
  const RunResult r = simulate(chip, p);
  const RunResult alone = simulate_kernel(chip, k);
  EXPECT_EQ(r.cycles, 753'000 + alone.cycles);
  EXPECT_EQ(time_of(r, Cause::collective), 753'000 - alone.cycles);
  EXPECT_EQ(total_of(r), r.cycles);
}

TEST(Engine, CollectivesOverOneAxisQueueAndOverTwoAxesOverlap) {
  ChipSpec chip = round_chip();
  const auto k = compute_bound(2);
  const RunResult alone = simulate_kernel(chip, k);
  auto two_gathers = [&](const std::string& first_axis, const std::string& second_axis) {
    Program p;
    p.name = "two gathers";
    // Each 753 us as above.
    const int a = p.add_collective(
        "ag a", {CollectiveKind::all_gather, 45'000'000, {first_axis, 4, false, 1}});
    const int b = p.add_collective(
        "ag b", {CollectiveKind::all_gather, 45'000'000, {second_axis, 4, false, 1}});
    p.add_kernel(k, {a, b});
    return simulate(chip, p).cycles;
  };
  EXPECT_EQ(two_gathers("fsdp", "fsdp"), 2 * 753'000 + alone.cycles);
  EXPECT_EQ(two_gathers("fsdp", "tensor"), 753'000 + alone.cycles);
}

// Reductions over DCN issued together queue on the DCN for their bytes only; the slices' latency
// runs in flight, so the last result lands one latency after the last bytes leave.
TEST(Engine, DcnReductionsIssuedTogetherPayTheSlicesLatencyOnce) {
  ChipSpec chip = round_chip();
  chip.dcn_bytes_per_s_per_chip = 1e9;
  chip.dcn_slice_latency_s = 100e-6;
  const auto k = compute_bound(2);
  const RunResult alone = simulate_kernel(chip, k);
  Program p;
  p.name = "two reductions over 4 slices";
  // Each: 2 x 3/4 x 2 MB / 1 GB/s = 3000 us on the DCN, then 6 ring steps x 100 us in flight.
  const MeshAxis slices{"data", 4, false, 1, true};
  const int a = p.add_collective("ar a", {CollectiveKind::all_reduce, 2'000'000, slices});
  const int b = p.add_collective("ar b", {CollectiveKind::all_reduce, 2'000'000, slices});
  p.add_kernel(k, {a, b});
  const RunResult r = simulate(chip, p, kFullTimeline);
  EXPECT_EQ(r.cycles, 2 * 3'000'000 + 600'000 + alone.cycles);
  // The DCN unit is busy for the bytes alone.
  int64_t dcn_busy = 0;
  for (const TimelineEvent& e : r.events)
    if (e.unit == unit(r, "dcn") && e.cause == Cause::busy) dcn_busy += e.end - e.start;
  EXPECT_EQ(dcn_busy, 2 * 3'000'000);
}

}  // namespace
}  // namespace tpusim
