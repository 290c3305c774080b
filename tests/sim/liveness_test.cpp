// HBM buffer liveness (sim/ir/liveness.h) on programs small enough to count by hand.
#include "sim/ir/liveness.h"

#include <gtest/gtest.h>

#include <map>

namespace tpusim {
namespace {

// A kernel that reads `ins` and writes `outs`, each an f32 array of `shape`.
std::shared_ptr<const Kernel> kernel(const std::vector<std::string>& ins,
                                     const std::vector<std::string>& outs, Shape shape) {
  KernelBuilder kb("k");
  kb.grid({1}, {DimSemantics::parallel});
  IndexMap whole(std::vector<AffineExpr>(shape.size(), constant(0)));
  std::vector<ValueId> read;
  for (const std::string& n : ins) read.push_back(kb.input({n, shape, DType::f32}, shape, whole));
  for (const std::string& n : outs)
    kb.copy("copy", read.at(0), kb.output({n, shape, DType::f32}, shape, whole));
  return kb.build();
}

const Shape kMiB{512, 512};  // f32: 1 MiB, no padding

TEST(Liveness, TilesPadTheMinorDimsAndSkipUnitDims) {
  EXPECT_EQ(hbm_tiled_bytes({512, 512}, DType::f32), 1 << 20);
  EXPECT_EQ(hbm_tiled_bytes({32, 128, 1}, DType::f32), 32 * 128 * 4);  // [.., C, 1] as [.., C]
  EXPECT_EQ(hbm_tiled_bytes({4, 128}, DType::f32), 8 * 128 * 4);
  EXPECT_EQ(hbm_tiled_bytes({3, 130}, DType::bf16), 16 * 256 * 2);  // bf16 rows pair up
  EXPECT_EQ(hbm_tiled_bytes({3, 130}, DType::f32), 8 * 256 * 4);
}

TEST(Liveness, ABufferLivesFromItsWriteToItsLastReadAndOutputsToTheEnd) {
  // x (an argument) -> y -> z: x is freed after item 0, y after item 1, z is the output.
  Program p;
  p.add_kernel(kernel({"x"}, {"y"}, kMiB));
  p.add_kernel(kernel({"y"}, {"z"}, kMiB));
  p.add_kernel(kernel({"z"}, {"w"}, kMiB));
  const Liveness l = hbm_liveness(p);
  EXPECT_EQ(l.peak_bytes, 2 << 20);
  EXPECT_EQ(l.peak_item, 0);
  std::map<std::string, LiveBuffer> by_name;
  for (const LiveBuffer& b : l.buffers) by_name[b.name] = b;
  EXPECT_EQ(by_name["x"].last, 0);
  EXPECT_EQ(by_name["y"].first, 0);
  EXPECT_EQ(by_name["y"].last, 1);
  EXPECT_EQ(by_name["w"].last, 2);  // never read: an output
}

TEST(Liveness, ARewrittenNameIsANewBuffer) {
  // a is written twice (a recompute): the first value dies at its last read, item 1.
  Program p;
  p.add_kernel(kernel({"x"}, {"a"}, kMiB));
  p.add_kernel(kernel({"a"}, {"b"}, kMiB));
  p.add_kernel(kernel({"x"}, {"a"}, kMiB));
  p.add_kernel(kernel({"a"}, {"c"}, kMiB));
  const Liveness l = hbm_liveness(p);
  int as = 0;
  for (const LiveBuffer& b : l.buffers) as += b.name == "a";
  EXPECT_EQ(as, 2);
  // x lives to item 2, the first a over items 0-1, b (an output) from 1, the second a from 2:
  // three at a time from item 1 on, never four.
  EXPECT_EQ(l.peak_bytes, 3 << 20);
  EXPECT_EQ(l.peak_item, 1);
}

TEST(Liveness, ALoopStacksWhatItWritesForLaterAndKeepsOneCarry) {
  // 4 trips: q[n] is a quarter of q; h is a carry (read, then written); res is written each
  // trip and read after the loop: 4 copies; t is an intermediate between the body's kernels.
  const Shape slice{128, 512};  // 256 KiB
  Program p;
  p.add_loop("scan", {kernel({"q[n]", "h"}, {"t"}, slice), kernel({"t", "h"}, {"h", "res"}, slice)},
             4);
  p.add_kernel(kernel({"res"}, {"out"}, slice));
  const Liveness l = hbm_liveness(p);
  std::map<std::string, int64_t> bytes;
  for (const LiveBuffer& b : l.buffers) bytes[b.name] = b.bytes;
  const int64_t s = 256 << 10;
  EXPECT_EQ(bytes["q"], 4 * s);
  EXPECT_EQ(bytes["h"], s);
  EXPECT_EQ(bytes["t"], s);
  EXPECT_EQ(bytes["res"], 4 * s);
  EXPECT_EQ(l.peak_item, 0);
  EXPECT_EQ(l.peak_bytes, 4 * s + s + s + 4 * s);  // q, h, t, res during the loop
}

TEST(Liveness, AnItemMapsItsKernelsArraysToTheProgramsBuffers) {
  // Two copies of one kernel (reads "x", writes "y") made into a chain a -> b -> c by their
  // items' maps; the second also reads "w", held elsewhere (no buffer). Then a kernel reads b
  // and c as the parts of one array "x": they live to it, sized by their writes.
  Program p;
  p.add_kernel(kernel({"x"}, {"y"}, kMiB));
  p.items.back().buffers = {{"x", {"a"}}, {"y", {"b"}}};
  p.add_kernel(kernel({"x", "w"}, {"y"}, kMiB));
  p.items.back().buffers = {{"x", {"b"}}, {"w", {}}, {"y", {"c"}}};
  p.add_kernel(kernel({"x"}, {"y"}, {8, 128}));  // 4 KiB: the concatenation's own size is unused
  p.items.back().buffers = {{"x", {"b", "c"}}, {"y", {"d"}}};
  const Liveness l = hbm_liveness(p);
  std::map<std::string, LiveBuffer> by_name;
  for (const LiveBuffer& b : l.buffers) by_name[b.name] = b;
  EXPECT_EQ(by_name.count("w"), 0u);
  EXPECT_EQ(by_name.count("x"), 0u);
  EXPECT_EQ(by_name["a"].last, 0);
  EXPECT_EQ(by_name["b"].bytes, 1 << 20);
  EXPECT_EQ(by_name["b"].last, 2);
  EXPECT_EQ(by_name["c"].bytes, 1 << 20);
  EXPECT_EQ(by_name["c"].last, 2);
  EXPECT_EQ(by_name["d"].bytes, 8 * 128 * 4);
  EXPECT_EQ(l.peak_bytes, (2 << 20) + 8 * 128 * 4);  // b, c and d at the last item
  EXPECT_EQ(l.peak_item, 2);
}

}  // namespace
}  // namespace tpusim
