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
};

// The static checks of every kernel and collective of a program: block shapes, VMEM against the
// kernel's limit (VmemError), collective sizes. Throws Error on the first problem.
void validate(const ChipSpec& chip, const Program& program);

// Validates the program before simulating anything.
RunResult simulate(const ChipSpec& chip, const Program& program, const SimOptions& options = {});

// Convenience: one kernel as a one-item program.
RunResult simulate_kernel(const ChipSpec& chip, std::shared_ptr<const Kernel> kernel,
                          const SimOptions& options = {});

}  // namespace tpusim
