// Two runs with the same totals: cycles, time by cause, busy time per unit, HBM bytes, FLOPs and
// grid steps (the shortcuts of the engine, fast-forward and replay, must not change them).
#pragma once
#include <gtest/gtest.h>

#include "sim/timing/result.h"

namespace tpusim::testing {

inline void expect_same_totals(const RunResult& expected, const RunResult& actual) {
  EXPECT_EQ(actual.cycles, expected.cycles);
  EXPECT_EQ(actual.time, expected.time);
  EXPECT_EQ(actual.unit_busy, expected.unit_busy);
  EXPECT_EQ(actual.hbm_read_bytes, expected.hbm_read_bytes);
  EXPECT_EQ(actual.hbm_write_bytes, expected.hbm_write_bytes);
  EXPECT_EQ(actual.flops, expected.flops);
  EXPECT_EQ(actual.mxu_pass_flops, expected.mxu_pass_flops);
  EXPECT_EQ(actual.grid_steps, expected.grid_steps);
}

}  // namespace tpusim::testing
