// The functional check's tolerance follows the rounding a program involves: f32 arithmetic and
// products of bf16 inputs (exact), DEFAULT dots of f32 operands and casts of computed values
// (bf16), HIGH dots and hand-made hi/lo splits (bf16x3).
#include "app/check_tolerance.h"

#include <gtest/gtest.h>

#include <functional>

#include "sim/ir/kernel.h"

namespace tpusim {
namespace {

const IndexMap kWhole({constant(0), constant(0)});

// A one-step kernel reading x [128, 128] of `dtype` into y [128, 128] f32 by `body`.
Program program(DType dtype, const std::function<ValueId(KernelBuilder&, ValueId)>& body) {
  KernelBuilder b("k");
  b.grid({1}, {DimSemantics::arbitrary});
  const ValueId x = b.input({"x", {128, 128}, dtype}, {128, 128}, kWhole);
  const ValueId y = b.output({"y", {128, 128}, DType::f32}, {128, 128}, kWhole);
  b.copy("store", body(b, x), y);
  Program p;
  p.add_kernel(b.build());
  return p;
}

ValueId square(KernelBuilder& b, ValueId x, Precision precision) {
  return b.dot("x x", x, x, DType::f32, DotDims::matmul(), precision);
}

TEST(CheckTolerance, FollowsTheRoundingTheProgramInvolves) {
  auto exp = [](KernelBuilder& b, ValueId x) { return b.elementwise("e", EwFn::exp, {x}, -1); };
  EXPECT_EQ(rounding_of(program(DType::f32, exp), DType::f32), Rounding::f32);
  EXPECT_EQ(rounding_of(program(DType::f32, exp), DType::bf16), Rounding::bf16);  // the output

  auto dot = [](Precision p) {
    return [p](KernelBuilder& b, ValueId x) { return square(b, x, p); };
  };
  EXPECT_EQ(rounding_of(program(DType::f32, dot(Precision::default_)), DType::f32), Rounding::bf16);
  EXPECT_EQ(rounding_of(program(DType::f32, dot(Precision::high)), DType::f32), Rounding::bf16x3);
  EXPECT_EQ(rounding_of(program(DType::f32, dot(Precision::highest)), DType::f32), Rounding::f32);
  // bf16 inputs are exact in a DEFAULT dot: only f32 accumulation differs.
  EXPECT_EQ(rounding_of(program(DType::bf16, dot(Precision::default_)), DType::f32), Rounding::f32);

  // A computed value cast to bf16: a last-bit flip is possible.
  auto cast = [](KernelBuilder& b, ValueId x) {
    const ValueId e = b.elementwise("e", EwFn::exp, {x}, -1);
    return b.cast("f32", b.cast("bf16", e, DType::bf16), DType::f32);
  };
  EXPECT_EQ(rounding_of(program(DType::f32, cast), DType::f32), Rounding::bf16);

  // The same value split into hi = bf16(e) and lo = bf16(e - hi): about 16 bits survive.
  auto split = [](KernelBuilder& b, ValueId x) {
    const ValueId e = b.elementwise("e", EwFn::exp, {x}, -1);
    const ValueId hi = b.cast("hi", e, DType::bf16);
    const ValueId rest =
        b.elementwise("e - hi", EwFn::sub, {e, b.cast("hi f32", hi, DType::f32)}, -1);
    const ValueId lo = b.cast("lo", rest, DType::bf16);
    const ValueId hh = b.dot("hi hi", hi, hi, DType::f32, DotDims::matmul(), Precision::default_);
    const ValueId hl = b.dot("hi lo", hi, lo, DType::f32, DotDims::matmul(), Precision::default_);
    return b.elementwise("sum", EwFn::add, {hh, hl}, -1);
  };
  EXPECT_EQ(rounding_of(program(DType::f32, split), DType::f32), Rounding::bf16x3);

  EXPECT_GT(relative_tolerance(Rounding::bf16), relative_tolerance(Rounding::bf16x3));
  EXPECT_GT(relative_tolerance(Rounding::bf16x3), relative_tolerance(Rounding::f32));
}

}  // namespace
}  // namespace tpusim
