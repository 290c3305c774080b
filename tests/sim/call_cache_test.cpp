// Reuse of kernel calls across runs (sim/timing/call_cache.h): content hashes that tell kernels
// and chips apart by every field the engine reads, and later runs that replay the calls an earlier
// run simulated with the same results and the same timeline as a run with nothing cached.
#include "sim/timing/call_cache.h"

#include <gtest/gtest.h>

#include "kernels/gdn/layer.h"
#include "kernels/generic.h"
#include "sim/timing/content_hash.h"
#include "sim/timing/engine.h"
#include "tests/sim/same_results.h"
#include "tests/test_chip.h"

namespace tpusim {
namespace {

using testing::round_chip;

TEST(ContentHash, EqualForKernelsBuiltTwiceAndDifferentForAnyChange) {
  const kernels::MatmulShape shape{512, 512, 512, 128, 128, 128};
  const Kernel base = *kernels::pallas_matmul(shape);
  EXPECT_EQ(content_hash(base), content_hash(*kernels::pallas_matmul(shape)));

  std::vector<Kernel> changed(9, base);
  changed[0].name += "x";
  changed[1].grid[2] = 3;
  changed[2].semantics[0] = DimSemantics::arbitrary;
  changed[3].inputs[0].buffer_count = 3;
  changed[4].inputs[1].array.dtype = DType::f32;
  changed[5].body.back().when.kind = When::not_last;
  changed[6].body[0].scalar = 1;
  changed[7].vmem_limit_bytes = 1 << 20;
  changed[8].outputs[0].index = IndexMap({axis(1), axis(0)});  // transposed
  for (size_t i = 0; i < changed.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_NE(content_hash(changed[i]), content_hash(base));
  }
}

TEST(ContentHash, ChipValuesCountAndTheirDocumentationDoesNot) {
  const ChipSpec chip = round_chip();
  ChipSpec documented = chip, slower = chip, two_cores = chip;
  documented.provenance["clock_hz"] = "source: a test";
  slower.hbm_efficiency = 0.8;
  two_cores.tensorcores = 2;
  EXPECT_EQ(content_hash(documented), content_hash(chip));
  EXPECT_NE(content_hash(slower), content_hash(chip));
  EXPECT_NE(content_hash(two_cores), content_hash(chip));
}

// Every field of two results, with the timeline's labels as text (label ids follow the order in
// which a run meets them, which replaying from the cache changes).
void expect_same(const RunResult& a, const RunResult& b) {
  testing::expect_same_totals(a, b);
  ASSERT_EQ(a.kernels.size(), b.kernels.size());
  for (size_t i = 0; i < a.kernels.size(); ++i) {
    EXPECT_EQ(a.kernels[i].cycles, b.kernels[i].cycles) << a.kernels[i].name;
    EXPECT_EQ(a.kernels[i].time, b.kernels[i].time) << a.kernels[i].name;
    EXPECT_EQ(a.kernels[i].flops, b.kernels[i].flops) << a.kernels[i].name;
  }
  ASSERT_EQ(a.items.size(), b.items.size());
  for (size_t i = 0; i < a.items.size(); ++i) EXPECT_EQ(a.items[i].cycles, b.items[i].cycles);
  auto events = [](const RunResult& r) {
    std::vector<std::tuple<int64_t, int64_t, int64_t, int32_t, std::string, int32_t, int32_t,
                           int16_t, int16_t, Cause>>
        out;
    for (const TimelineEvent& e : r.events)
      out.emplace_back(e.start, e.end, e.step, e.unit, r.labels[e.label], e.item, e.op, e.body,
                       e.operand, e.cause);
    return out;
  };
  EXPECT_EQ(events(a), events(b));
}

Program gdn_layer(int64_t head_tile) {
  return kernels::gdn::layer_core(
      {.seq = 2048, .heads = 8}, {.build = kernels::gdn::Build::heads, .head_tile_fwd = head_tile});
}

TEST(CallCache, ALaterRunReplaysEveryCallWithTheSameResultsAndTimeline) {
  for (int cores : {1, 2}) {
    for (bool timeline : {false, true}) {
      SCOPED_TRACE(::testing::Message() << cores << " cores, timeline " << timeline);
      const ChipSpec chip = round_chip(cores);
      clear_call_cache();
      const RunResult cold = simulate(chip, gdn_layer(8), {.record_timeline = timeline});
      const RunResult warm = simulate(chip, gdn_layer(8), {.record_timeline = timeline});
      expect_same(cold, warm);
      EXPECT_LT(cold.fast_forwarded_steps, cold.grid_steps);
      EXPECT_EQ(warm.fast_forwarded_steps, warm.grid_steps);  // nothing simulated again
      if (timeline) {
        EXPECT_GT(warm.events.size(), 0u);
      }
    }
  }
}

TEST(CallCache, AKnobChangeSimulatesOnlyTheKernelsItChanges) {
  const ChipSpec chip = round_chip();
  clear_call_cache();
  const RunResult alone = simulate(chip, gdn_layer(8), {.record_timeline = true});
  clear_call_cache();
  simulate(chip, gdn_layer(1), {.record_timeline = true});
  const RunResult after_change = simulate(chip, gdn_layer(8), {.record_timeline = true});
  expect_same(alone, after_change);
  // Only the scan forward changed (its two calls: the forward and its recompute, one replaying
  // the other): its steps are the only ones simulated.
  int64_t scan_fwd_steps = 0;
  for (const KernelStats& k : alone.kernels)
    if (k.name.find("scan fwd") != std::string::npos) {
      int64_t steps = 1;
      for (int64_t g : k.grid) steps *= g;
      scan_fwd_steps += steps;
    }
  ASSERT_GT(scan_fwd_steps, 0);
  EXPECT_LE(after_change.grid_steps - after_change.fast_forwarded_steps, scan_fwd_steps);
  EXPECT_GT(after_change.grid_steps - after_change.fast_forwarded_steps, 0);
}

TEST(CallCache, ADifferentChipDoesNotReuseAnotherChipsCalls) {
  clear_call_cache();
  ChipSpec chip = round_chip();
  const RunResult first = simulate(chip, gdn_layer(8));
  chip.hbm_bytes_per_s /= 2;
  const RunResult slower = simulate(chip, gdn_layer(8));
  EXPECT_LT(slower.fast_forwarded_steps, slower.grid_steps);
  EXPECT_GT(slower.cycles, first.cycles);
  clear_call_cache();
  expect_same(slower, simulate(chip, gdn_layer(8)));
}

TEST(CallCache, TheFullPathNeitherReadsNorFillsIt) {
  clear_call_cache();
  const RunResult full = simulate(round_chip(), gdn_layer(8), {.fast_forward = false});
  const RunResult again = simulate(round_chip(), gdn_layer(8), {.fast_forward = false});
  EXPECT_EQ(again.fast_forwarded_steps, 0);
  expect_same(full, again);
}

}  // namespace
}  // namespace tpusim
