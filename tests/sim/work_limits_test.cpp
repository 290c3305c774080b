// The engine's work limits (WorkLimits): a program is refused before simulating when its grid
// steps, counted by hand here, pass the limit; a timeline that grows past its event limit stops
// the run with an error and leaves the engine usable; progress reports count up to the total.
#include <gtest/gtest.h>

#include <limits>

#include "kernels/generic.h"
#include "sim/timing/engine.h"
#include "tests/test_chip.h"

namespace tpusim {
namespace {

using testing::round_chip;

// One kernel of grid [5], then a loop of 3 trips over kernels of grid [4] and [8]:
// 5 + 3 x (4 + 8) = 41 grid steps.
Program forty_one_steps() {
  Program p;
  p.name = "forty-one";
  const int first = p.add_kernel(kernels::elementwise_scale(640, 128, 128));
  p.add_loop(
      "loop",
      {kernels::elementwise_scale(1024, 128, 256), kernels::elementwise_scale(1024, 128, 128)}, 3,
      {first});
  return p;
}

TEST(WorkLimits, GridStepsAreCountedOverKernelsAndLoopTrips) {
  EXPECT_EQ(program_grid_steps(forty_one_steps()), 41);
  EXPECT_NO_THROW(check_work(forty_one_steps(), {.grid_steps = 41}));
  EXPECT_THROW(check_work(forty_one_steps(), {.grid_steps = 40}), WorkLimitError);
}

TEST(WorkLimits, AProgramOverTheLimitIsRefusedWithItsSizeBeforeSimulating) {
  const int64_t runs_before = engine_totals().runs;
  try {
    simulate(round_chip(), forty_one_steps(), {.limits = {.grid_steps = 40}});
    FAIL() << "simulated a program over the limit";
  } catch (const WorkLimitError& e) {
    EXPECT_NE(std::string(e.what()).find("41 grid steps"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("limit of 40"), std::string::npos) << e.what();
  }
  EXPECT_EQ(engine_totals().runs, runs_before);
}

TEST(WorkLimits, CountsSaturateInsteadOfOverflowing) {
  Program p;
  p.add_loop("huge", {kernels::elementwise_scale(1024, 128, 128)},
             std::numeric_limits<int64_t>::max() / 2);
  EXPECT_EQ(program_grid_steps(p), std::numeric_limits<int64_t>::max());
  EXPECT_THROW(check_work(p, {}), WorkLimitError);
}

TEST(WorkLimits, ATimelineOverItsEventLimitStopsTheRunAndTheEngineRunsOnAfterwards) {
  const SimOptions timeline{.record_timeline = true, .fast_forward = false};
  const RunResult full = simulate(round_chip(), forty_one_steps(), timeline);
  ASSERT_GT(full.events.size(), 10u);
  SimOptions limited = timeline;
  limited.limits.events = 10;
  EXPECT_THROW(simulate(round_chip(), forty_one_steps(), limited), WorkLimitError);
  // A run without a timeline records no events, so the event limit does not apply to it.
  SimOptions untimed = limited;
  untimed.record_timeline = false;
  EXPECT_NO_THROW(simulate(round_chip(), forty_one_steps(), untimed));
  // The error did not leave the simulation context in a broken state.
  const RunResult again = simulate(round_chip(), forty_one_steps(), timeline);
  EXPECT_EQ(again.cycles, full.cycles);
  EXPECT_EQ(again.events.size(), full.events.size());
}

TEST(WorkLimits, ProgressCountsUpToTheProgramsGridSteps) {
  std::vector<std::pair<int64_t, int64_t>> reports;
  SimOptions options{.fast_forward = false};
  options.progress = [&](int64_t done, int64_t total) { reports.emplace_back(done, total); };
  simulate(round_chip(), forty_one_steps(), options);
  ASSERT_FALSE(reports.empty());
  for (size_t i = 0; i < reports.size(); ++i) {
    EXPECT_EQ(reports[i].second, 41);
    EXPECT_LE(reports[i].first, 41);
    if (i > 0) {
      EXPECT_GE(reports[i].first, reports[i - 1].first);
    }
  }
  EXPECT_EQ(reports.back().first, 41);
}

}  // namespace
}  // namespace tpusim
