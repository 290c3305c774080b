// Masks built as JAX writes them (iotas, integer division, comparisons, a select) compute what the
// IR's own mask op computes, in the functional engine; and they cost VPU time in the timing engine.
#include <gtest/gtest.h>

#include "sim/functional/interpreter.h"
#include "sim/ir/kernel.h"
#include "sim/timing/engine.h"
#include "tests/test_chip.h"

namespace tpusim {
namespace {

// One [16, 16] block: the sibling-block mask of b = 2 applied to x by the IR's mask op, and (when
// `jax_way`) the same as JAX writes it.
std::shared_ptr<const Kernel> both_masks(bool jax_way = true) {
  KernelBuilder kb("masks");
  kb.grid({1}, {DimSemantics::parallel});
  const Shape s{16, 16};
  const ValueId x = kb.input({"x", s, DType::f32}, s, IndexMap({constant(0), constant(0)}));
  const ValueId by_op =
      kb.output({"by_op", s, DType::f32}, s, IndexMap({constant(0), constant(0)}));
  const ValueId by_jax =
      kb.output({"by_jax", s, DType::f32}, s, IndexMap({constant(0), constant(0)}));
  kb.mask("sibling", x, MaskKind::sibling_block, 0, 2, {}, {}, by_op);
  if (!jax_way) return kb.build();
  // (i // 2b == j // 2b) & (i // b != j // b), then where(mask, x, 0).
  const ValueId i = kb.iota("i", s, DType::s32, 0), j = kb.iota("j", s, DType::s32, 1);
  auto over = [&](ValueId v, double d) { return kb.with_scalar("//", EwFn::idiv, v, d); };
  const ValueId same_pair = kb.elementwise("==", EwFn::eq, {over(i, 4), over(j, 4)}, -1);
  const ValueId other_half = kb.elementwise("!=", EwFn::ne, {over(i, 2), over(j, 2)}, -1);
  const ValueId mask = kb.elementwise("&", EwFn::logical_and, {same_pair, other_half}, -1);
  const ValueId zero = kb.fill("0", kb.temp("zero", {1, 1}, DType::f32), 0.0);
  kb.copy("store", kb.elementwise("where", EwFn::select, {mask, x, zero}, -1), by_jax);
  return kb.build();
}

TEST(MaskOps, IotaCompareSelectEqualTheMaskOp) {
  const auto k = both_masks();
  ArrayMap arrays;
  arrays["x"] = HostArray::zeros({16, 16}, DType::f32);
  for (size_t n = 0; n < arrays["x"].data.size(); ++n) arrays["x"].data[n] = float(n + 1);
  execute(*k, arrays);
  EXPECT_EQ(arrays.at("by_jax").data, arrays.at("by_op").data);
  // Row 0 keeps columns 2 and 3 only (its pair's other half).
  const std::vector<float>& r = arrays.at("by_jax").data;
  EXPECT_EQ(r[0], 0);
  EXPECT_EQ(r[2], 3);
  EXPECT_EQ(r[3], 4);
  EXPECT_EQ(r[4], 0);
}

TEST(MaskOps, PredicatesAreS32AndSelectTakesItsOperandsType) {
  const auto k = both_masks();
  int selects = 0;
  for (const Op& op : k->body) {
    if (op.kind == OpKind::elementwise && op.fn == EwFn::eq) {
      EXPECT_EQ(k->values[op.output].dtype, DType::s32);
    }
    if (op.kind == OpKind::elementwise && op.fn == EwFn::select) {
      EXPECT_EQ(k->values[op.output].dtype, DType::f32);
      ++selects;
    }
  }
  EXPECT_EQ(selects, 1);
}

int64_t vpu_busy(const RunResult& r) {
  int64_t vpu = 0;
  for (size_t u = 0; u < r.units.size(); ++u)
    if (r.units[u].kind == UnitKind::vpu) vpu += r.unit_busy[u];
  return vpu;
}

TEST(MaskOps, IotaAndComparisonsTakeVpuTime) {
  // Round chip: 2 simple vreg ops per cycle, 0.5 divides. A [16, 16] value is 2 vregs: each iota,
  // comparison, and, fill-free select and store 1 cycle, each integer division 4 (2 vregs at 0.5).
  const int64_t mask_op = vpu_busy(simulate_kernel(testing::round_chip(), both_masks(false)));
  const int64_t both = vpu_busy(simulate_kernel(testing::round_chip(), both_masks(true)));
  // 2 iotas + 4 divisions + eq + ne + and + fill (one vreg of [1, 1]) + select + store.
  EXPECT_EQ(both - mask_op, 2 * 1 + 4 * 4 + 3 * 1 + 1 + 1 + 1);
}

// A broadcast (an iota's row, a scalar) materialized at a larger shape: the value repeated, and one
// VPU store pass over the result (the exporter emits it where a dot or a store needs the whole).
TEST(MaskOps, ABroadcastRepeatsTheValueAtOneStorePerVreg) {
  enum class Way { broadcast, iota, mask };
  auto kernel = [](Way way) {
    KernelBuilder kb("broadcast");
    kb.grid({1}, {DimSemantics::parallel});
    const Shape s{64, 16};
    const ValueId y = kb.output({"y", s, DType::f32}, s, IndexMap({constant(0), constant(0)}));
    const ValueId row = kb.iota("j", {1, 16}, DType::f32, 1);
    const ValueId v = way == Way::broadcast ? kb.broadcast("b", row, s)
                      : way == Way::iota    ? kb.iota("i", s, DType::f32, 1)
                                            : kb.mask("m", row, MaskKind::lower, 0, -16, s);
    kb.copy("store", v, y);
    return kb.build();
  };
  ArrayMap arrays;
  execute(*kernel(Way::broadcast), arrays);
  for (int64_t i = 0; i < 64 * 16; ++i) EXPECT_EQ(arrays.at("y").data[i], float(i % 16));
  // Round chip, 2 vreg ops per cycle: [64, 16] is 8 vregs. The broadcast is one pass (4 cycles)
  // like an iota of that shape; a mask is three (iota, compare, select: 12 cycles).
  auto busy = [&](Way w) { return vpu_busy(simulate_kernel(testing::round_chip(), kernel(w))); };
  EXPECT_EQ(busy(Way::broadcast), busy(Way::iota));
  EXPECT_EQ(busy(Way::mask) - busy(Way::broadcast), 8);
}

}  // namespace
}  // namespace tpusim
