// A run as Chrome trace-event JSON (opens in Perfetto, https://ui.perfetto.dev): a process per
// TensorCore with a thread per unit (scalar unit and its stalls, MXUs, VPU, EUP, DMA queues) and
// a "chip" process for the shared units (HBM, ICI, DCN); on TensorCore 0 a program track (a slice
// per kernel call, loop or collective) and a stage track (consecutive items of one stage as one
// slice), with flow arrows along the program's dependencies; counter tracks for HBM's busy share
// and the VMEM the running kernel holds; the run's metadata (chip, clock, tool). Timestamps are
// whole nanoseconds (written in microseconds with three decimals). It is written as it goes, so
// memory does not grow with the trace; a path ending in .gz is compressed (OutputFiles).
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "sim/timing/result.h"

namespace tpusim {

// A span of a track drawn beside the simulated run, in a process of its own (a training step's
// predicted structure: app/step_structure.h). Times from the trace's start. `part` and `pass`
// (optional, written as args) say what a span stands for: a part of the step ("gdn layer") and
// the pass its stages carry ("fwd", "remat", "bwd"; sim/ir/program.h).
struct TraceSpan {
  std::string track, name;
  double start_s = 0, duration_s = 0;
  std::string part = "", pass = "";
};

// `progress(events written, events)` is called every tenth of a trace of a million events or
// more (writing one takes seconds).
using TraceProgress = std::function<void(size_t done, size_t total)>;
// `metadata` joins the trace's metadata (a scenario's name, say); `spans` go in a process named
// `spans_process`, a thread per track, above the chip's.
void write_chrome_trace(const RunResult& r, std::ostream& out, const TraceProgress& progress = {},
                        const nlohmann::json& metadata = nlohmann::json::object(),
                        const std::vector<TraceSpan>& spans = {},
                        const std::string& spans_process = "");
// Progress lines on stderr for the commands that write traces.
void print_trace_progress(size_t done, size_t total);

// Where a Chrome trace-event file opens.
inline constexpr const char* kTraceViewer = "open it in https://ui.perfetto.dev";

}  // namespace tpusim
