// `tpusim bench`: the simulation-speed figures of docs/performance.md, each timed on this machine
// with the grid steps it simulated (and jumped over) and the timeline events it recorded per wall
// second. The figures are the paths users take: a kernel with and without its timeline, its trace
// written, the GUI's re-simulation of a GDN layer, whole training steps (the 1M-token B3 with and
// without context parallelism), validate, a 1,080-point sweep in worker processes and the
// expansion of a 10,000-point sweep.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tpusim {

struct BenchFigure {
  std::string what;
  double target_s = 0;  // the figure issue 19 asks for (0: none)
  double wall_s = 0;
  int64_t grid_steps = 0, fast_forwarded_steps = 0, events = 0;  // in this process
  std::string note;  // what else was measured (peak memory, points, workers)
};

// Runs every figure; `started(what)` is called before each.
std::vector<BenchFigure> run_bench(const std::function<void(const std::string&)>& started);

// Resident memory of this process in bytes (Linux /proc/self/statm).
int64_t resident_bytes();

// The table, as text (`markdown` false) or a Markdown table.
std::string bench_table(const std::vector<BenchFigure>& figures, bool markdown);

}  // namespace tpusim
