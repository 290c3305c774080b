// The timing engine: plays a Program on a SystemC model of one chip (TensorCores with MXUs, VPU and
// DMA queues; shared HBM; ICI) and returns a RunResult. Each call builds a fresh SystemC kernel, so
// runs are independent and deterministic; SystemC is not thread-safe, so parallel runs need
// separate processes.
#pragma once
#include "sim/chip_spec.h"
#include "sim/ir/program.h"
#include "sim/timing/result.h"

namespace tpusim {

struct SimOptions {
  bool record_timeline = false;
  // Jump over repeating steady-state periods of a grid (steady_state.h) and replay a kernel
  // call that repeats an earlier one; a timeline marks those spans instead of their events. Off,
  // every grid step is simulated.
  bool fast_forward = default_fast_forward();
  static bool default_fast_forward();
  // `tpusim --no-fast-forward` sets the default for every simulation of the process.
  static void set_default_fast_forward(bool on);
};

// What every simulation of this process has done so far (tpusim bench's figures).
struct EngineTotals {
  int64_t runs = 0, grid_steps = 0, fast_forwarded_steps = 0, events = 0;
};
EngineTotals engine_totals();

// The static checks of every kernel and collective of a program: block shapes, VMEM against the
// kernel's limit (VmemError), collective sizes. Throws Error on the first problem.
void validate(const ChipSpec& chip, const Program& program);

// Validates the program before simulating anything.
RunResult simulate(const ChipSpec& chip, const Program& program, const SimOptions& options = {});

// Convenience: one kernel as a one-item program.
RunResult simulate_kernel(const ChipSpec& chip, std::shared_ptr<const Kernel> kernel,
                          const SimOptions& options = {});

}  // namespace tpusim
