// IR basics: tiled layout sizes, affine index maps, dot shapes and precision passes, VMEM usage.
#include <gtest/gtest.h>

#include "kernels/generic.h"
#include "sim/error.h"
#include "sim/ir/kernel.h"
#include "sim/ir/validate.h"

namespace tpusim {
namespace {

TEST(Shape, TiledBytesPadToTheVregTile) {
  EXPECT_EQ(tiled_bytes({128, 128}, DType::f32), 128 * 128 * 4);
  // A (C, 1) f32 column is lane-padded to (C, 128): 32 KiB per head at C = 64 (gdn_kernels.md).
  EXPECT_EQ(tiled_bytes({64, 1}, DType::f32), 64 * 128 * 4);
  EXPECT_EQ(tiled_bytes({8, 64, 1}, DType::f32), 8 * 64 * 128 * 4);
  // bf16 packs 16 rows per tile: 8 rows still occupy a 16 x 128 tile.
  EXPECT_EQ(tiled_bytes({8, 128}, DType::bf16), 16 * 128 * 2);
  EXPECT_EQ(vreg_count({1024, 1024}), 128 * 8);
  EXPECT_EQ(vreg_count({3, 5}), 1);
}

TEST(IndexMap, AffineMapsEvaluateAndPrint) {
  const IndexMap m({axis(0), reversed(2, 32), axis(1), constant(0)});
  std::vector<int64_t> out;
  m.eval({1, 3, 5}, out);
  EXPECT_EQ(out, (std::vector<int64_t>{1, 26, 3, 0}));
  EXPECT_EQ(m.to_string(), "(g0,31-g2,g1,0)");
}

TEST(Kernel, DotShapeAndPasses) {
  KernelBuilder b("k");
  b.grid({1}, {DimSemantics::parallel});
  const ValueId l = b.temp("l", {8, 256, 128}, DType::f32);
  const ValueId r = b.temp("r", {8, 128, 64}, DType::f32);
  b.dot("d", l, r, DType::f32, DotDims::batched(), Precision::highest);
  const Kernel& k = *b.build();
  const DotShape d = k.dot_shape(k.body[0]);
  EXPECT_EQ(d.batch, 8);
  EXPECT_EQ(d.m, 256);
  EXPECT_EQ(d.k, 128);
  EXPECT_EQ(d.n, 64);
  EXPECT_EQ(k.mxu_passes(k.body[0]), 6);
  EXPECT_EQ(k.values[k.body[0].output].shape, (Shape{8, 256, 64}));
}

// An elementwise op other than select is unary or binary: a third operand would be neither
// computed nor charged, so the builder refuses it, naming the kernel and the op.
TEST(Kernel, AnElementwiseOpTakesAtMostTwoOperands) {
  KernelBuilder kb("three");
  const ValueId x = kb.temp("x", {8, 128}, DType::f32);
  kb.elementwise("x + x", EwFn::add, {x, x}, -1);
  try {
    kb.elementwise("x + x + x", EwFn::add, {x, x, x}, -1);
    FAIL() << "expected an operand count error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "kernel 'three': 'x + x + x' takes at most 2 operands, not 3");
  }
}

TEST(Validate, VmemUsageCountsBuffersScratchAndLiveTemps) {
  const auto k = kernels::pallas_matmul({4096, 4096, 4096, 512, 1024, 1024});
  const VmemUsage u = vmem_usage(*k);
  // x 1 MiB x2, y 2 MiB x2, z 1 MiB x2, acc 2 MiB, the dot result 2 MiB.
  EXPECT_EQ(u.total_bytes, (2 + 4 + 2 + 2 + 2) << 20);
}

TEST(Validate, BlockRulesAndIndexRange) {
  EXPECT_NO_THROW(check_block_shapes(*kernels::pallas_matmul({1024, 1024, 1024, 128, 128, 128})));
  // A block equal to the full dimension is allowed even when not a multiple of (8, 128).
  EXPECT_NO_THROW(check_block_shapes(*kernels::elementwise_scale(4, 100, 4)));
  KernelBuilder b("oob");
  b.grid({4}, {DimSemantics::parallel});
  b.input({"x", {256, 128}, DType::f32}, {128, 128}, IndexMap({axis(0), constant(0)}));
  EXPECT_THROW(check_block_shapes(*b.build()), Error);
}

}  // namespace
}  // namespace tpusim
