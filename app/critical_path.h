// The critical path through one kernel call of a recorded run: the chain of dependent body ops
// that decides when the call ends. Within a grid step it is walked back from the op that ends
// last: to the producer of one of its operands that finished last (a data dependency, e.g.
// h -> products -> new values -> h in the scan), or, when that finished earlier than the op
// started, to the op that held its unit (a resource wait). Grid steps are joined end to start,
// because a step begins after the one before it ends (the engine's barrier; in the scan the
// state h in VMEM scratch is what crosses it). The path's time is split by cause: the path's own
// work per unit kind, and the gaps between its ops by the stall the core recorded there
// (dependency, mxu_fill_drain, step_overhead, dma_wait, fast-forwarded spans) or "other work"
// when a unit was busy with ops off the path. The parts add up to the path's span.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/ir/program.h"
#include "sim/timing/result.h"

namespace tpusim {

struct PathEdge {
  size_t from = 0, to = 0;  // indices into RunResult::events
  bool data = true;         // an operand (or the step barrier); false: the unit was busy
};

struct CriticalPath {
  std::vector<size_t> events;  // the path's ops (indices into RunResult::events), in time order
  std::vector<PathEdge> edges;
  int64_t from = 0, to = 0;               // the first op's start, the last op's end
  std::map<std::string, int64_t> cycles;  // by cause (see above); they add up to to - from
  int steps = 0;                          // grid steps the path crosses (recorded ones)
};

// The path through program item `item` on TensorCore `core` (empty when the item has no
// recorded body ops: no timeline, or not a kernel call). The run must have been recorded with
// its timeline (SimOptions::record_timeline).
CriticalPath critical_path(const RunResult& r, const Program& p, int item, int core = 0);

// "critical path 1.23 ms over 64 grid steps: vpu 40%, dependency 30%, ..." (largest first).
std::string critical_path_text(const CriticalPath& path, double clock_hz);

}  // namespace tpusim
