// Sweeps: a base scenario expanded over axes (the cartesian product, in file order), run in
// parallel worker processes (SystemC is one simulation per process), optionally one shard of the
// points, with a progress bar; results as CSV and JSON. A point that cannot run (a kernel over
// VMEM, an impossible mesh) is recorded with its error and the sweep goes on.
//
//   base: ../examples/gdn_heads_vs_ladder_v6e-8.yaml   # relative to the sweep file
//   axes:
//     chip: [v5e, v6e, v5p]
//     gdn.chunk: [64, 128, 256]
//     gdn.head_tile_fwd: [1, 2, 4, 8]
#pragma once
#include <yaml-cpp/yaml.h>

#include <functional>
#include <string>
#include <vector>

namespace tpusim {

struct SweepPoint {
  int index = 0;
  std::vector<std::string> values;  // one per axis
  YAML::Node scenario;
};

struct Sweep {
  std::string file, name, base_file;
  std::vector<std::string> axes;
  std::vector<SweepPoint> points;
};

Sweep load_sweep(const std::string& file);

struct PointResult {
  int index = 0;
  bool ok = false;
  std::string error;
  double step_time_s = 0, tokens_per_s_per_chip = 0, tflops_per_chip = 0, mfu = 0;
  long long peak_hbm_bytes = 0;
  bool fits_hbm = false;
};

// Runs the points whose index i has i % shard_count == shard_index, in `jobs` worker processes;
// `progress(done, total)` is called in the parent as results arrive. Results are in point order.
std::vector<PointResult> run_sweep(const Sweep& s, int jobs, int shard_index, int shard_count,
                                   const std::function<void(int, int)>& progress);

std::string sweep_csv(const Sweep& s, const std::vector<PointResult>& results);
std::string sweep_json(const Sweep& s, const std::vector<PointResult>& results);

}  // namespace tpusim
