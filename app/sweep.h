// Sweeps: a base expanded over axes (the cartesian product, in file order), run in parallel
// worker processes (SystemC is one simulation per process), optionally one shard of the points,
// with a progress bar; results as CSV and JSON. A point that cannot run (a kernel over VMEM, an
// impossible mesh) is recorded with its error and the sweep goes on. The base is a training-step
// scenario (axes: its keys) or a kernel of the catalog (axes: its knobs and `chip`):
//
//   base: ../examples/gdn_heads_vs_ladder_v6e-8.yaml   # relative to the sweep file
//   axes:
//     chip: [v5e, v6e, v5p]
//     gdn.chunk: [64, 128, 256]
//     gdn.head_tile_fwd: [1, 2, 4, 8]
//
//   kernel: gdn-invert            # any `tpusim kernel` name
//   chip: v5e                     # optional (default v5e)
//   knobs: {seq: 8192}            # optional: the base's knob values (default: the catalog's)
//   axes:
//     tile-n: [1, 2, 4, 8]
//     chip: [v5e, v6e]
#pragma once
#include <yaml-cpp/yaml.h>

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "kernels/catalog.h"

namespace tpusim {

struct SweepPoint {
  int index = 0;
  std::vector<std::string> values;  // one per axis
  std::vector<size_t> at;           // a scenario sweep's point: each axis's value, by position
  kernels::KnobValues knobs;        // a kernel sweep's point
  std::string chip;
};

// What a point reports: a name and how it is written (CSV text, JSON type).
struct SweepMetric {
  enum class Kind { number, integer, boolean };
  std::string name;
  Kind kind = Kind::number;
  bool lower_is_better = false;  // times and bytes (else rates and shares)
};

struct Sweep {
  std::string file, name, base_file;
  const kernels::CatalogEntry* kernel = nullptr;  // a kernel sweep (else a scenario sweep)
  std::vector<std::string> axes;
  std::vector<SweepPoint> points;
  const std::vector<SweepMetric>& metrics() const;
  // A scenario sweep's point as a scenario, built when asked: points keep only their axis
  // positions, so a 10,000-point sweep expands in a few megabytes.
  YAML::Node scenario(const SweepPoint& p) const;

  YAML::Node base;                                  // a scenario sweep's base
  std::vector<std::vector<YAML::Node>> axis_nodes;  // each axis's values, as the file has them
};

Sweep load_sweep(const std::string& file);

struct PointResult {
  int index = 0;
  bool ok = false;
  std::string error;
  std::vector<double> metrics;  // one per Sweep::metrics()
  // The value of a metric by name (throws Error for an unknown one).
  double metric(const Sweep& s, const std::string& name) const;
};

// Where a sweep keeps each point as it finishes (one JSON line per point, appended and flushed),
// so a killed or interrupted sweep can continue: with `resume`, the points the journal holds
// are taken from it and only the others run. A journal written for other points (the sweep file
// changed) is an error naming its line.
struct SweepJournal {
  std::string path;  // empty: none
  bool resume = false;
};

// Runs the points whose index i has i % shard_count == shard_index, in `jobs` worker processes;
// `progress(done, total)` is called in the parent as results arrive. Results are in point order.
// Once `*stop` turns true no point starts; the result then holds the points done so far.
std::vector<PointResult> run_sweep(const Sweep& s, int jobs, int shard_index, int shard_count,
                                   const std::function<void(int, int)>& progress,
                                   const SweepJournal& journal = {},
                                   const std::atomic<bool>* stop = nullptr);

std::string sweep_csv(const Sweep& s, const std::vector<PointResult>& results);
std::string sweep_json(const Sweep& s, const std::vector<PointResult>& results);

}  // namespace tpusim
