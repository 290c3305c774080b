// The TPU compiler's fit verdict as tpusim shows it: the amounts of an HBM out-of-memory message,
// and of one for the pinned host memory that remat offloads into.
#include <gtest/gtest.h>

#include "app/compiled_step.h"

namespace tpusim {
namespace {

TEST(CompiledVerdict, SaysWhatDoesNotFitAndByHowMuch) {
  CompiledStep c;
  c.fits = false;
  c.message =
      "RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required for HLO "
      "temporaries (49.70G) exceeds available HBM (31.25G).";
  EXPECT_EQ(compiled_verdict(c), "does not fit (49.70G needed, 31.25G available)");
  // libtpu's message for B5 #33's offloaded queries (2026-12-07), 187 GB over 128 GiB.
  c.message =
      "RESOURCE_EXHAUSTED: Allocation (size=186831077376) would exceed memory "
      "(size=137438953472) :: %s0 = inlined_call_operand.host [shape: bf16[58,6,128,8192,192], "
      "index: 0, kind: output, shape index: {}] /* operand 0 */ :: custom-call.246";
  EXPECT_EQ(compiled_verdict(c),
            "does not fit in host memory (174.00 GiB offloaded, 128.00 GiB available)");
  // Two offloaded stacks of 70 GiB, each under the limit, together over it
  // (tests/jax/host_memory.sh).
  c.message =
      "RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space "
      "host. Used 140.00G of 128.00G host. Exceeded host capacity by 12.00G.";
  EXPECT_EQ(compiled_verdict(c),
            "does not fit in host memory (140.00G offloaded, 128.00G available)");
  c.message = "something else";
  EXPECT_EQ(compiled_verdict(c), "does not fit (something else)");
}

}  // namespace
}  // namespace tpusim
