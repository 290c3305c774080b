// `tpusim import maxtext-log`: a MaxText training log (tests/data/maxtext/train.log, MaxText
// 0.2.5's line format, made-up numbers) becomes a scenario's measured block: the median of the
// steps after the warm-up, which it names; bad logs are one error line and write nothing.
#include <gtest/gtest.h>

#include "tests/cli/cli_fixture.h"

namespace tpusim::testing {
namespace {

const std::string kLog = std::string(TPUSIM_SOURCE_DIR) + "/tests/data/maxtext/train.log";

TEST_F(Cli, AMaxTextLogBecomesTheMeasuredBlock) {
  // Steps 2, 3 and 5 (0 and 1 are warm-up, 4 a profiler step without rates): medians by hand.
  const CmdResult r = run("import maxtext-log " + kLog);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("median of MaxText steps 2-5 (3 steps; the first 2 skipped as warm-up "
                       "(steps 0-1); 1 rampup or profiler step without rates left out)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  step_time_s: 2.571\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  tokens_per_s_per_chip: 1593\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  tflops_per_chip: 76.2\n"), std::string::npos) << r.out;

  // Nothing skipped: the compile step's 38 s is one of five, and the median moves to 2.575.
  const CmdResult all = run("import maxtext-log " + kLog + " --skip 0 -o " + path("m.yaml"));
  ASSERT_EQ(all.status, 0) << all.err;
  EXPECT_NE(slurp(path("m.yaml")).find("  step_time_s: 2.575\n"), std::string::npos)
      << slurp(path("m.yaml"));
}

TEST_F(Cli, WhatIsNotAMaxTextLogIsOneErrorLine) {
  std::ofstream(path("notes.txt")) << "nothing here\n";
  expect_clean_failure(run("import maxtext-log " + path("notes.txt") + " -o " + path("m.yaml")),
                       "no 'completed step: N, seconds: S");
  expect_clean_failure(run("import maxtext-log " + kLog + " --skip 5"),
                       "5 steps with rates, so skipping 5 leaves none");
  std::ofstream(path("cut.log")) << "completed step: 3, secs: 2.5\n";
  expect_clean_failure(run("import maxtext-log " + path("cut.log")),
                       "cut.log:1: a 'completed step' line without 'seconds: S'");
  EXPECT_FALSE(fs::exists(path("m.yaml")));
}

}  // namespace
}  // namespace tpusim::testing
