// The GDN schedules on the timing engine: what the kernel change claims, as the model sees it.
#include <gtest/gtest.h>

#include "kernels/gdn/invert.h"
#include "kernels/gdn/layer.h"
#include "kernels/gdn/scan.h"
#include "kernels/gdn/xla.h"
#include "models/chip_loader.h"
#include "sim/error.h"
#include "sim/ir/liveness.h"
#include "sim/timing/engine.h"

namespace tpusim {
namespace {

namespace g = kernels::gdn;

const g::GdnShape kC1{.batch = 1, .seq = 4096, .heads = 32, .dk = 128, .dv = 128, .chunk = 128};

double layer_time(const ChipSpec& chip, g::Build b) {
  return simulate(chip, g::layer_core(kC1, {b})).time_s;
}

TEST(GdnTiming, C1BuildsAreOrderedMainScanHeadsLadder) {
  const ChipSpec chip = load_chip("v5e");
  const double main = layer_time(chip, g::Build::main), scan = layer_time(chip, g::Build::scan);
  const double heads = layer_time(chip, g::Build::heads),
               ladder = layer_time(chip, g::Build::ladder);
  EXPECT_GT(main, scan);
  EXPECT_GT(scan, heads);
  EXPECT_GT(heads, ladder);
}

TEST(GdnTiming, VmemBudgetsOfTheChange) {
  // C = 128, Dk = Dv = 128 in the 16 MiB scoped VMEM of v5e.
  const ChipSpec chip = load_chip("v5e");
  EXPECT_NO_THROW(simulate_kernel(chip, g::scan_forward(kC1, {8})));
  EXPECT_NO_THROW(simulate_kernel(chip, g::scan_backward(kC1, {4})));
  EXPECT_NO_THROW(simulate_kernel(chip, g::invert_ladder(kC1, 8)));
  try {
    simulate_kernel(chip, g::scan_backward(kC1, {8}));
    FAIL() << "the backward kernel with 8 heads must not fit";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("kernel 'gdn scan bwd (th=8)' needs"), std::string::npos) << m;
    EXPECT_NE(m.find("over the scoped VMEM limit on v5e of 16.00 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("peak live body temporaries"), std::string::npos) << m;
    EXPECT_NE(m.find("input h_saved block [1,1,8,128,128] f32 x2 buffers = 1.00 MiB"),
              std::string::npos)
        << m;
  }
}

int64_t cause(const RunResult& r, Cause c) { return r.time[static_cast<int>(c)]; }

TEST(GdnTiming, HeadBatchingFillsTheMxuPipelineOfTheDependentChain) {
  ChipSpec chip = load_chip("v5e");
  const RunResult one = simulate_kernel(chip, g::scan_forward(kC1, {1}));
  const RunResult eight = simulate_kernel(chip, g::scan_forward(kC1, {8}));
  const double exposed1 =
      double(cause(one, Cause::mxu_fill_drain) + cause(one, Cause::dependency)) / one.cycles;
  const double exposed8 =
      double(cause(eight, Cause::mxu_fill_drain) + cause(eight, Cause::dependency)) / eight.cycles;
  // One head exposes the chain's MXU latency every chunk; eight independent heads hide nearly
  // all of it, and walk 8x fewer grid steps (the calibrated latency is short, so the grid steps
  // are the larger part of the saving at C1's shape).
  EXPECT_GT(exposed1, 0.05);
  EXPECT_LT(exposed8, exposed1 / 5);
  EXPECT_EQ(cause(one, Cause::step_overhead), 8 * cause(eight, Cause::step_overhead));
  EXPECT_LT(eight.time_s, 0.6 * one.time_s);
  EXPECT_EQ(one.flops, eight.flops);
}

TEST(GdnTiming, ChainPerChunkRunsInOrderOnTheTimeline) {
  // One head: h -> [q_g; w] h -> v_new -> kd^T v_new -> h. Each link starts after the previous
  // link's result has left the MXUs.
  const ChipSpec chip = load_chip("v5e");
  const g::GdnShape s{.batch = 1, .seq = 3 * 128, .heads = 1, .dk = 128, .dv = 128, .chunk = 128};
  const RunResult r = simulate_kernel(chip, g::scan_forward(s, {1}),
                                      {.record_timeline = true, .fast_forward = false});
  auto first_start = [&](const std::string& label, int64_t step) {
    int64_t t = -1;
    for (const TimelineEvent& e : r.events)
      if (r.labels[e.label] == label && e.step == step && r.units[e.unit].kind == UnitKind::mxu &&
          (t < 0 || e.start < t))
        t = e.start;
    return t;
  };
  auto last_end = [&](const std::string& label, int64_t step) {
    int64_t t = -1;
    for (const TimelineEvent& e : r.events)
      if (r.labels[e.label] == label && e.step == step && r.units[e.unit].kind == UnitKind::mxu)
        t = std::max(t, e.end);
    return t;
  };
  for (int64_t n = 0; n < 2; ++n) {
    const int64_t merged = first_start("[q_g; w] @ h", n), update = first_start("kd^T v_new", n);
    ASSERT_GE(merged, 0);
    EXPECT_GE(update, last_end("[q_g; w] @ h", n) + chip.mxu_fill_drain_cycles);
    EXPECT_GE(first_start("[q_g; w] @ h", n + 1),
              last_end("kd^T v_new", n) + chip.mxu_fill_drain_cycles);
  }
}

TEST(GdnTiming, LadderHasLogDepthWhereTheSolveHasARowLoop) {
  const ChipSpec chip = load_chip("v5e");
  const auto ladder = g::invert_ladder(kC1, 8);
  int dots = 0;
  for (const Op& op : ladder->body) dots += op.kind == OpKind::dot;
  EXPECT_EQ(dots, 2 * 7 * 3);  // 2 log2(128) dependent products, three bf16 dots each
  const Program solve = g::xla_solve_triangular(kC1);
  int row_steps = 0;
  for (const ProgramItem& item : solve.items)
    if (const auto* call = std::get_if<KernelCall>(&item.what))
      for (const Op& op : call->kernel->body)
        row_steps += op.latency == Latency::xla_row_solve_step;
  EXPECT_EQ(row_steps, 127);  // C - 1 dependent row steps per block
  EXPECT_LT(simulate_kernel(chip, ladder).time_s, 0.25 * simulate(chip, solve).time_s);
}

TEST(GdnTiming, TheInversionReadsEachBlockOnceAndWaitsOnEveryRowStep) {
  // XLA's InvertDiagBlocksLowerTriangular holds one [C, C] block at a time (docs/kernels/gdn.md):
  // S is read and the inverse written once, 2 x 64 MiB at C1's shape; and every one of the
  // C - 1 row steps of each of the 1024 blocks sits on the dependent chain, so each added cycle
  // of row-step latency adds exactly 1024 x 127 cycles.
  ChipSpec chip = load_chip("v5e");
  chip.xla_row_solve_step_scale = 1;
  const Program inversion = g::xla_invert_diagonal_blocks(kC1);
  chip.xla_row_solve_step_cycles = 0;
  const RunResult base = simulate(chip, inversion);
  chip.xla_row_solve_step_cycles = 100;
  const RunResult slower = simulate(chip, inversion);
  EXPECT_EQ(base.hbm_read_bytes, 32LL * 32 * 128 * 128 * 4);
  EXPECT_EQ(base.hbm_write_bytes, 32LL * 32 * 128 * 128 * 4);
  EXPECT_EQ(slower.cycles - base.cycles, 1024LL * 127 * 100);
}

TEST(GdnTiming, KnobSweepRunsOrReportsVmemOnEveryChip) {
  for (const char* name : {"v5e", "v6e", "v5p"}) {
    const ChipSpec chip = load_chip(name);
    for (int64_t chunk : {64, 128, 256}) {
      g::GdnShape s = kC1;
      s.chunk = chunk;
      s.seq = 8 * chunk;  // a short sequence keeps the sweep fast; the knobs are what is swept
      int ran = 0;
      for (int64_t th : {1, 2, 4, 8, 16})
        for (int64_t tile : {1, 2, 4, 8}) {
          try {
            const RunResult r = simulate(chip, g::layer_core(s, {g::Build::ladder, th, th, tile}));
            EXPECT_GT(r.time_s, 0);
            ++ran;
          } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("VMEM"), std::string::npos) << e.what();
          }
        }
      EXPECT_GT(ran, 0) << name << " C=" << chunk;
    }
  }
}

TEST(GdnMemory, TheMainCoresLiveBuffersMatchTheCompilersHeap) {
  // MaxText's main path with remat at C1's shape compiled for v5e (docs/kernels/gdn.md; python -m
  // tpusim_jax compile python/examples/maxtext_gdn.py:main_path_train_remat, its buffer
  // assignment swept over its live ranges, tpusim_jax.compile.hbm_buffers): 1250.0 MiB live at
  // the heap's peak, in the backward loop, of which 96.8 MiB are the function's arguments, which
  // XLA holds for the whole program where the generator frees an input after its last read. The
  // memory analysis says 1329.1 MiB, with temporaries the heap does not hold (docs/compiler_
  // import.md, "What is live at the peak"). The generator's layer core (which also holds the q/k
  // l2norm) over its whole program against the heap less the arguments.
  const double compiler_mib = 1250.0 - 96.8;
  const Liveness l = hbm_liveness(g::layer_core(kC1, {g::Build::main}));
  const double mib = l.peak_bytes / double(1 << 20);
  EXPECT_NEAR(mib, compiler_mib, 0.10 * compiler_mib);
}

// libtpu's static cost model estimates XLA's InvertDiagBlocksLowerTriangular per [128, 128] block
// at 15,371 cycles on v5e, 18,155 on v6e and 15,387 on v5p (tests/jax/solve_estimate.sh). The chip
// files' xla_row_solve_step_scale make tpusim's cost per block stand to v6e's, where the row step
// is calibrated, in those ratios, to within one row step's rounding (127 cycles a block). The call
// runs on one TensorCore of v5p's two (its compiled form has no megacore_config).
TEST(GdnTiming, TheRowStepScalesFollowTheCompilersEstimatePerBlock) {
  auto per_block = [](const ChipSpec& chip) {
    auto cycles = [&](int64_t heads) {  // 8 chunks x heads blocks
      const g::GdnShape s{.batch = 1, .seq = 8 * 128, .heads = heads, .chunk = 128};
      return static_cast<double>(simulate(chip, g::xla_invert_diagonal_blocks(s)).cycles);
    };
    return (cycles(16) - cycles(8)) / 64;
  };
  const double v6e = per_block(load_chip("v6e"));
  for (const auto& [name, estimate] : {std::pair{"v5e", 15371.0}, std::pair{"v5p", 15387.0}}) {
    SCOPED_TRACE(name);
    EXPECT_NEAR(per_block(load_chip(name)), v6e * estimate / 18155.0, 127);
  }
}

}  // namespace
}  // namespace tpusim
