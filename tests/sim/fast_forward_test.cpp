// The fast-forward (sim/timing/steady_state.h) and the replay of repeated kernel calls against
// the engine's every-step simulation: the same results, fewer steps simulated, and a timeline
// that keeps the simulated steps and marks each span it jumped over.
#include <gtest/gtest.h>

#include "kernels/generic.h"
#include "sim/timing/engine.h"
#include "tests/sim/same_results.h"
#include "tests/test_chip.h"

namespace tpusim {
namespace {

using testing::round_chip;

const auto expect_same_results = testing::expect_same_totals;

int spans(const RunResult& r) {
  int n = 0;
  for (const TimelineEvent& e : r.events) n += e.op == kFastForwardedSpan;
  return n;
}

// A 32 x 32 x 32 grid of 128-blocks: each (i, j) row of 32 k-steps repeats one step pattern.
std::shared_ptr<const Kernel> long_matmul() {
  return kernels::pallas_matmul({4096, 4096, 4096, 128, 128, 128});
}

TEST(FastForward, LongGridJumpsOverRepeatingStepsWithTheSameResults) {
  for (int cores : {1, 2}) {
    SCOPED_TRACE(cores);
    const RunResult full =
        simulate_kernel(round_chip(cores), long_matmul(), {.fast_forward = false});
    const RunResult fast = simulate_kernel(round_chip(cores), long_matmul());
    EXPECT_EQ(full.fast_forwarded_steps, 0);
    // Per (i, j) row of 32 k-steps: its first step (new blocks), one step whose state the first
    // row has shown to repeat (the jump), and its last (the write-back). The first row needs a
    // couple more to see the repeat.
    EXPECT_LE(fast.grid_steps - fast.fast_forwarded_steps, 3 * 32 * 32 + 8);
    expect_same_results(full, fast);
  }
}

TEST(FastForward, TimelineKeepsTheSimulatedStepsAndMarksTheJumps) {
  const RunResult full = simulate_kernel(round_chip(), long_matmul(),
                                         {.record_timeline = true, .fast_forward = false});
  const RunResult fast = simulate_kernel(round_chip(), long_matmul(), {.record_timeline = true});
  expect_same_results(full, fast);
  EXPECT_EQ(spans(full), 0);
  EXPECT_GT(spans(fast), 0);
  EXPECT_LT(fast.events.size(), full.events.size() / 4);
  // Before the first jump the two timelines are the same events.
  int64_t first_jump = fast.cycles;
  for (const TimelineEvent& e : fast.events)
    if (e.op == kFastForwardedSpan) first_jump = std::min(first_jump, e.start);
  auto before = [&](const RunResult& r) {
    std::vector<std::tuple<int64_t, int64_t, int32_t, int32_t>> out;
    for (const TimelineEvent& e : r.events)
      if (e.end <= first_jump) out.emplace_back(e.start, e.end, e.unit, e.label);
    return out;
  };
  EXPECT_FALSE(before(full).empty());
  EXPECT_EQ(before(fast), before(full));
  // The jumps sit on the core's scalar lane, between the steps simulated.
  for (const TimelineEvent& e : fast.events)
    if (e.op == kFastForwardedSpan) {
      EXPECT_EQ(fast.units[e.unit].name, "tc0.scalar");
      EXPECT_NE(fast.labels[e.label].find("fast-forwarded: "), std::string::npos);
    }
}

TEST(FastForward, RepeatedKernelCallsAreReplayed) {
  // A loop of 10 iterations of one kernel: the first is simulated, the other nine replayed.
  Program p;
  p.add_loop("loop", {kernels::elementwise_scale(1024, 1024, 256)}, 10);
  const RunResult full = simulate(round_chip(), p, {.fast_forward = false});
  const RunResult fast = simulate(round_chip(), p, {.record_timeline = true});
  expect_same_results(full, fast);
  EXPECT_EQ(fast.grid_steps, 40);
  EXPECT_GE(fast.fast_forwarded_steps, 9 * 4);
  EXPECT_EQ(fast.kernels[0].calls, 10);
  EXPECT_EQ(fast.kernels[0].cycles, full.kernels[0].cycles);
  EXPECT_EQ(spans(fast), 9);
}

}  // namespace
}  // namespace tpusim
