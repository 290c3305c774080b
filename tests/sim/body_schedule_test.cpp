// Body scheduling against hand-derived cycle counts (test chip: tests/test_chip.h).
#include "sim/timing/body_schedule.h"

#include <gtest/gtest.h>

#include "sim/timing/unit_models.h"
#include "tests/test_chip.h"

namespace tpusim {
namespace {

using testing::round_chip;

std::vector<bool> all(const Kernel& k) { return std::vector<bool>(k.body.size(), true); }

int64_t cause(const BodySchedule& s, Cause c) {
  int64_t t = 0;
  for (const BodySegment& seg : s.segments)
    if (seg.cause == c) t += seg.end - seg.start;
  return t;
}

TEST(MxuWork, SplitsRowsOfASingleTileAndSpreadsManyTiles) {
  const ChipSpec chip = round_chip();
  // One 128x128 weight tile, 256 rows: split over 2 MXUs of 128 rows (never below d rows).
  MxuWork w = mxu_work(chip, {1, 256, 128, 128}, 1);
  EXPECT_EQ(w.mxus, 2);
  EXPECT_EQ(w.cycles, 128);
  // 512x1024x1024: 8 x 8 = 64 weight tiles, 16 per MXU, 512 rows each: 8192 cycles = peak rate.
  w = mxu_work(chip, {1, 512, 1024, 1024}, 1);
  EXPECT_EQ(w.mxus, 4);
  EXPECT_EQ(w.cycles, 16 * 512);
  // Fewer rows than the array is deep: the weight load (d cycles) bounds each tile.
  w = mxu_work(chip, {8, 32, 128, 128}, 1);
  EXPECT_EQ(w.cycles, 2 * 128);
  // HIGHEST on f32 operands: 6 passes, 6x the tiles.
  EXPECT_EQ(mxu_work(chip, {1, 512, 1024, 1024}, 6).cycles, 6 * 16 * 512);
  // int8 operands stream at the chip's int8 rate (2x bf16 on the test chip).
  EXPECT_EQ(mxu_work(chip, {1, 512, 1024, 1024}, 1, true).cycles, 16 * 512 / 2);
}

TEST(BodySchedule, OneMatmulThenCopy) {
  const auto k = testing::one_matmul_kernel();
  const BodySchedule s = schedule_body(round_chip(), *k, all(*k));
  // dot on 2 MXUs [0,128), its results pop one vreg per 8 rows from 8 + 256 to 128 + 256 = 384.
  // The copy (32 vregs at 2/cycle = 16 cycles) follows them: its last share (16 / 16 pops = 1
  // cycle) ends at 385, so its busy cycles are [369, 385); its result is written 2 cycles later.
  EXPECT_EQ(s.length, 387);
  EXPECT_EQ(cause(s, Cause::busy), 128 + 16);
  EXPECT_EQ(cause(s, Cause::mxu_fill_drain), 369 - 128);
  EXPECT_EQ(cause(s, Cause::dependency), 2);
  EXPECT_EQ(s.flops, 2 * 256 * 128 * 128);
}

std::shared_ptr<const Kernel> four_dots(bool chained) {
  KernelBuilder b(chained ? "chain" : "independent");
  b.grid({1}, {DimSemantics::parallel});
  const auto whole = IndexMap({constant(0), constant(0)});
  const ValueId x = b.input({"x", {128, 128}, DType::bf16}, {128, 128}, whole);
  const ValueId w = b.input({"w", {128, 128}, DType::bf16}, {128, 128}, whole);
  ValueId v = x;
  for (int i = 0; i < 4; ++i) v = b.dot("dot", chained ? v : x, w, DType::bf16);
  return b.build();
}

TEST(BodySchedule, DependentChainPaysLatencyEveryTimeIndependentDotsOverlapIt) {
  const ChipSpec chip = round_chip();
  auto chain = four_dots(true);
  const BodySchedule c = schedule_body(chip, *chain, all(*chain));
  // Each 128^3 dot: 1 MXU, 128 cycles, result 256 cycles later; the next dot waits for it.
  EXPECT_EQ(c.length, 4 * (128 + 256));
  EXPECT_EQ(cause(c, Cause::dependency), 3 * 256);
  EXPECT_EQ(cause(c, Cause::mxu_fill_drain), 256);
  EXPECT_EQ(cause(c, Cause::busy), 4 * 128);

  auto ind = four_dots(false);
  const BodySchedule i = schedule_body(chip, *ind, all(*ind));
  // Issued one per cycle onto the four MXUs: the last starts at cycle 3 and drains at 3+128+256.
  EXPECT_EQ(i.length, 3 + 128 + 256);
  EXPECT_EQ(cause(i, Cause::dependency), 0);
  EXPECT_EQ(cause(i, Cause::busy), 131);
}

TEST(BodySchedule, AccumulatorStreamsBehindALargeDot) {
  KernelBuilder b("acc");
  b.grid({1}, {DimSemantics::arbitrary});
  const auto whole = IndexMap({constant(0), constant(0)});
  const ValueId x = b.input({"x", {512, 1024}, DType::bf16}, {512, 1024}, whole);
  const ValueId y = b.input({"y", {1024, 1024}, DType::bf16}, {1024, 1024}, whole);
  const ValueId acc = b.scratch("acc", {512, 1024}, DType::f32);
  b.elementwise("acc +=", EwFn::add, {acc, b.dot("x @ y", x, y, DType::f32)}, acc);
  const auto k = b.build();
  const BodySchedule s = schedule_body(round_chip(), *k, all(*k));
  // The dot keeps 4 MXUs busy for 8192 cycles. The add (512 vregs, 256 cycles) follows the
  // results out a vreg at a time (1024 pops per MXU): its last share (1 cycle) runs after the
  // last result leaves at 8192 + 256, and its result is written 2 cycles later.
  EXPECT_EQ(s.length, 8192 + 256 + 1 + 2);
}

TEST(BodySchedule, PredicatedOpsOnlyRunWhenActive) {
  KernelBuilder b("pred");
  b.grid({4}, {DimSemantics::arbitrary});
  const ValueId acc = b.scratch("acc", {8, 128}, DType::f32);
  b.fill("zero", acc, 0, {When::first, 0});
  const auto k = b.build();
  EXPECT_EQ(schedule_body(round_chip(), *k, {false}).length, 0);
  EXPECT_EQ(schedule_body(round_chip(), *k, {true}).length, 1 + 2);
}

TEST(VpuCycles, CastsBetweenF32AndBf16CostTheChipsPackingInstructions) {
  // A [64, 128] value is 8 vregs; 2 simple ops per cycle. Narrowing and widening take
  // vpu_cast_ops_per_vreg instructions per vreg (3: 12 cycles); a cast to s32 repacks nothing.
  ChipSpec chip = testing::round_chip();
  chip.vpu_cast_ops_per_vreg = 3;
  KernelBuilder kb("casts");
  kb.grid({1}, {DimSemantics::parallel});
  const Shape s{64, 128};
  const ValueId x = kb.input({"x", s, DType::f32}, s, IndexMap({constant(0), constant(0)}));
  const ValueId narrow = kb.cast("bf16", x, DType::bf16);
  const ValueId wide = kb.cast("f32", narrow, DType::f32);
  kb.cast("s32", wide, DType::s32);
  const auto k = kb.build();
  EXPECT_EQ(vpu_cycles(chip, *k, k->body[0]), 12);
  EXPECT_EQ(vpu_cycles(chip, *k, k->body[1]), 12);
  EXPECT_EQ(vpu_cycles(chip, *k, k->body[2]), 4);
  chip.vpu_cast_ops_per_vreg = 1;  // v6e: one instruction per vreg
  EXPECT_EQ(vpu_cycles(chip, *k, k->body[0]), 4);
}

}  // namespace
}  // namespace tpusim
