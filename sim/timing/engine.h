// The timing engine: plays a Program on a SystemC model of one chip (TensorCores with MXUs, VPU and
// DMA queues; shared HBM; ICI) and returns a RunResult. Each call builds a fresh SystemC kernel, so
// runs are independent and deterministic; SystemC is not thread-safe, so parallel runs need
// separate processes.
#pragma once
#include <functional>

#include "sim/chip_spec.h"
#include "sim/error.h"
#include "sim/ir/program.h"
#include "sim/timing/result.h"

namespace tpusim {

// Bounds on one simulation's work, so that a shape too large to simulate is an error naming its
// size instead of minutes of CPU or gigabytes of timeline. `tpusim --max-grid-steps/--max-events`
// set them for the process.
struct WorkLimits {
  // A program with more grid steps (loop trips included) is refused before simulating. Measured
  // here: a matmul of 262144^3 in 8x128x128 blocks (1.4e11 steps, nearly all fast-forwarded)
  // takes 61 s; the largest program of a scenario in scenarios/ has under 1e7, B3 without
  // context parallelism 5.4e8 per attention call. A run that is long anyway reports progress.
  int64_t grid_steps = 100'000'000'000;
  // A timeline that reaches this many events stops the run: 48 bytes each in memory, ~100 in a
  // trace file (~1 GB and ~2 GB at the default).
  int64_t events = 20'000'000;
};

// A simulation that passed one of its WorkLimits.
class WorkLimitError : public Error {
 public:
  using Error::Error;
};

// Called now and then during a run (after each kernel call and every ~65,000 transfer points within
// one): grid steps done (simulated or jumped over) and the program's grid steps in all.
using SimProgress = std::function<void(int64_t done, int64_t total)>;

struct SimOptions {
  bool record_timeline = false;
  // Jump over repeating steady-state periods of a grid (steady_state.h) and replay a kernel
  // call that repeats an earlier one; a timeline marks those spans instead of their events. Off,
  // every grid step is simulated.
  bool fast_forward = default_fast_forward();
  static bool default_fast_forward();
  // `tpusim --no-fast-forward` sets the default for every simulation of the process.
  static void set_default_fast_forward(bool on);
  WorkLimits limits = default_limits();
  static WorkLimits default_limits();
  static void set_default_limits(const WorkLimits& limits);
  SimProgress progress = default_progress();
  static SimProgress default_progress();
  static void set_default_progress(SimProgress progress);
};

// What every simulation of this process has done so far (tpusim bench's figures).
struct EngineTotals {
  int64_t runs = 0, grid_steps = 0, fast_forwarded_steps = 0, events = 0;
};
EngineTotals engine_totals();

// The static checks of every kernel and collective of a program: block shapes, VMEM against the
// kernel's limit (VmemError), collective sizes. Throws Error on the first problem.
void validate(const ChipSpec& chip, const Program& program);

// Grid steps of every kernel call, loop iterations included; saturates at INT64_MAX.
int64_t program_grid_steps(const Program& program);

// Throws WorkLimitError if the program has more grid steps than `limits` allow.
void check_work(const Program& program, const WorkLimits& limits);

// Validates the program and checks its work (check_work) before simulating anything.
RunResult simulate(const ChipSpec& chip, const Program& program, const SimOptions& options = {});

// Convenience: one kernel as a one-item program.
RunResult simulate_kernel(const ChipSpec& chip, std::shared_ptr<const Kernel> kernel,
                          const SimOptions& options = {});

}  // namespace tpusim
