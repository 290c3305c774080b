// The TPU compiler's verdict on a scenario's step (`python -m tpusim_jax compile-step`, via
// scripts/compile_scenarios.sh): its per-chip peak HBM from XLA's memory analysis, or its
// out-of-memory message. A scenario names the file with `compiled: FILE`; `memory: compiler`
// makes the report's peak and fit verdict the compiler's instead of tpusim's memory model.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/workload/step.h"

namespace tpusim {

struct CompiledStep {
  std::string file, topology, device_kind;
  std::vector<std::string> maxtext_args;  // the command line it was compiled from
  bool fits = true;
  int64_t peak_hbm_bytes = -1;   // arguments + unaliased outputs + temporaries + code; -1: no fit
  int64_t host_bytes = 0;        // offloaded to pinned host memory by the remat policy
  std::string message;           // the compiler's out-of-memory message when it does not fit
  std::string libtpu_init_args;  // the compiler's flags, when the compile set any
  std::string hlo;               // the optimized HLO (a path beside the file), when written
  // XLA's largest HBM buffer slots, when the compile recorded its buffer assignment (`buffers`),
  // each with the values that take it in turn (XLA's shapes).
  struct Buffer {
    int64_t bytes = 0;
    std::string values;
  };
  std::vector<Buffer> largest_buffers;
  // What is live in HBM at the step's peak (XLA's buffers over their live ranges), when recorded:
  // all of it and the step's parameters (weights, optimizer state) among it, bytes, the
  // instruction the peak is at, and the largest of the other values, each with its shape, and the
  // opcode and op_name of the instruction that defines it.
  struct LiveValue {
    int64_t bytes = 0;
    std::string shape, opcode, op;
  };
  std::vector<LiveValue> peak_live;
  int64_t peak_live_bytes = -1, peak_live_parameter_bytes = 0;
  std::string peak_live_at;
};

// Reads a compile-step result; a missing file, malformed JSON or another format is an Error
// naming the file.
CompiledStep load_compiled_step(const std::string& file);

// "25.01 GiB" or "does not fit (<the compiler's reason>)".
std::string compiled_verdict(const CompiledStep& c);

// The compiled step's optimized HLO (`hlo` in its file) imported and simulated on `chip`: the
// step's time as the compiler scheduled it, s. An Error if it has no HLO.
double simulate_compiled_program(const CompiledStep& c, const ChipSpec& chip);

// Puts the compiler's figures beside the model's in `p`; with `use_for_memory` they replace the
// model's peak and fit verdict (the model's peak stays in p.memory's items).
void apply_compiled(const CompiledStep& c, bool use_for_memory, StepPrediction& p);

}  // namespace tpusim
