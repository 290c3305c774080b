// The TPU compiler's own program as a tpusim Program: the optimized HLO of
// `python -m tpusim_jax compile` (or any HLO text), one item per instruction that does work.
//  - A fusion (or a lone op) becomes an XLA-origin kernel sized from what the compiler chose:
//    the bytes each operand is read (a slice's, not the whole array's; nothing for an operand the
//    compiler placed in VMEM, S(1)), the bytes written (a dynamic-update-slice's update), the
//    elementwise and transcendental work per element, and its dots and convolutions with their
//    operand precision. The kernel streams those bytes in a 1-D grid of steps that fit the
//    scoped VMEM, doing each step's share of the work (kernels/tiling.h).
//  - A while loop becomes a program loop of its body's items with the trip count from the
//    compiler's known_trip_count or from the loop condition (i < N from a constant start).
//  - A Pallas custom call becomes the kernel of that name exported by the bridge (kernels.json).
//  - Collectives become collectives over the replica group's size.
// What has no model is an error naming the instruction, never a silent zero.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/hlo_text.h"
#include "sim/ir/program.h"
#include "sim/timing/result.h"

namespace tpusim {

struct HloLoopSummary {
  std::string name, op_name;
  int64_t trips = 0;
  std::vector<std::string> body_ops;  // the body's instructions that do work, by name
  // The body's own collectives per trip (not those of loops nested in it): synchronous ones hold
  // the cores, asynchronous ones (-start, async collective fusions) overlap work.
  int sync_collectives = 0, async_collectives = 0;
  int64_t sync_collective_bytes = 0, async_collective_bytes = 0;
};

struct HloProgram {
  std::string path;        // the compile directory, the compile-step record or the .hlo file
  std::string chip;        // from the compile's device kind ("" for a bare .hlo file)
  nlohmann::json compile;  // compile.json (memory and cost analyses, versions); null if absent
  Program program;
  std::vector<HloLoopSummary> loops;
  // The TPU compiler's own cost model: estimated_cycles (at the compiled chip's clock) of each
  // fusion or op it estimated, by the kernel's name; custom calls and Pallas kernels have none.
  std::map<std::string, int64_t> estimated_cycles;
  // Kernels given the compiled VLIW schedule's length as a floor (app/vliw_floors.h).
  int vliw_floored_kernels = 0;
};

// Seconds of a run the compiler's cost model estimates, beside tpusim's for the same kernels.
struct CompilerEstimate {
  int kernels = 0;             // distinct kernels with an estimate
  double compiler_s = 0;       // estimated cycles x calls / clock
  double tpusim_s = 0;         // the same kernels as simulated
  double not_estimated_s = 0;  // simulated time of the kernels without an estimate
};

// `path`: a directory written by `python -m tpusim_jax compile`, a step record of `compile-step`
// (its JSON, naming its .hlo.gz), or a file of HLO text.
// `vliw_floors`: give each XLA op its recorded VLIW schedule length as a floor (app/vliw_floors.h).
HloProgram import_hlo(const std::string& path, bool vliw_floors = false);
// `kernel_of_call`: a Pallas custom call's instruction name -> its kernel's name (compile.json);
// without an entry the name is read from the op_name (".../NAME/pallas_call").
HloProgram import_hlo_module(const HloModule& module, const Program& pallas_kernels,
                             const std::map<std::string, std::string>& kernel_of_call = {});

// The compiler's estimate against the simulation `r` of h.program; `compiled_clock_hz`: the clock
// of the chip the program was compiled for (the estimate's cycles).
CompilerEstimate compiler_estimate(const HloProgram& h, const RunResult& r,
                                   double compiled_clock_hz);

// tpusim's chip name for a JAX device kind ("TPU v5 lite" -> v5e), "" if unknown.
std::string chip_of_device_kind(const std::string& kind);

}  // namespace tpusim
