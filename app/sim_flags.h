// The engine flags tpusim and tpusim-gui share: fast-forward and the work limits (engine.h's
// WorkLimits). They set the process's defaults for every simulation that follows.
#pragma once
#include <CLI/CLI.hpp>

#include "sim/timing/engine.h"

namespace tpusim {

struct SimFlags {
  bool no_fast_forward = false;
  WorkLimits limits;
};

// `what_fast_forward_does` finishes --no-fast-forward's help in the program's words.
void add_sim_flags(CLI::App& app, SimFlags& flags, const char* what_fast_forward_does);
void apply_sim_flags(const SimFlags& flags);

// A progress reporter for stderr: quiet for the first 2 s of a run, then a line every 5 s with
// the share of grid steps done.
SimProgress stderr_sim_progress();

}  // namespace tpusim
