// The critical path through a kernel against hand-derived cycles (test chip: tests/test_chip.h):
// a chain of four dependent 128^3 dots per grid step beside one independent dot. Each chained
// dot keeps one MXU busy 128 cycles and its result arrives 256 cycles later, so within a step the
// path is the four dots (4 x 128 mxu cycles) joined by three 256-cycle dependency waits; the
// steps are joined through the last dot's 256-cycle drain and the step's overhead; the
// independent dot is never on it.
#include "app/critical_path.h"

#include <gtest/gtest.h>

#include "sim/timing/engine.h"
#include "tests/test_chip.h"

namespace tpusim {
namespace {

constexpr int kSteps = 3;

Program chain_and_side() {
  KernelBuilder b("chain");
  b.grid({kSteps}, {DimSemantics::arbitrary});
  const auto whole = IndexMap({constant(0), constant(0)});
  const ValueId x = b.input({"x", {128, 128}, DType::bf16}, {128, 128}, whole);
  const ValueId w = b.input({"w", {128, 128}, DType::bf16}, {128, 128}, whole);
  b.dot("side", x, w, DType::bf16);
  ValueId v = x;
  for (int i = 0; i < 4; ++i) v = b.dot("link", v, w, DType::bf16);
  Program p;
  p.add_kernel(b.build());
  return p;
}

TEST(CriticalPath, FollowsTheDependentDotsAcrossGridSteps) {
  const ChipSpec chip = testing::round_chip();
  const Program p = chain_and_side();
  const RunResult r = simulate(chip, p, {.record_timeline = true, .fast_forward = false});
  const CriticalPath path = critical_path(r, p, 0);
  ASSERT_EQ(path.steps, kSteps);
  ASSERT_EQ(path.events.size(), 4u * kSteps);
  EXPECT_EQ(path.edges.size(), path.events.size() - 1);
  for (size_t e : path.events) EXPECT_EQ(r.labels[r.events[e].label], "link");
  for (const PathEdge& edge : path.edges) EXPECT_TRUE(edge.data);
  EXPECT_EQ(path.cycles.at("mxu"), kSteps * 4 * 128);
  EXPECT_EQ(path.cycles.at("dependency"), kSteps * 3 * 256);
  EXPECT_EQ(path.cycles.at("mxu_fill_drain"), (kSteps - 1) * 256);
  EXPECT_EQ(path.cycles.at("step_overhead"), (kSteps - 1) * chip.grid_step_overhead_cycles);
  int64_t total = 0;
  for (const auto& [cause, cycles] : path.cycles) total += cycles;
  EXPECT_EQ(total, path.to - path.from);
  EXPECT_NE(critical_path_text(path, chip.clock_hz).find("over 3 grid steps, 12 ops: dependency"),
            std::string::npos)
      << critical_path_text(path, chip.clock_hz);
}

TEST(CriticalPath, NothingForARunWithoutItsTimeline) {
  const ChipSpec chip = testing::round_chip();
  const Program p = chain_and_side();
  EXPECT_TRUE(critical_path(simulate(chip, p), p, 0).events.empty());
  EXPECT_TRUE(critical_path(simulate(chip, p, {.record_timeline = true}), p, 7).events.empty());
}

}  // namespace
}  // namespace tpusim
