// The op profile of a run: one row per distinct kernel (Pallas kernel or XLA op), largest time
// first, with what it achieved (FLOP/s, HBM bandwidth, arithmetic intensity) and what bounds it,
// read from its HBM traffic and where the critical TensorCore's time went while it ran:
//   HBM        its transfers keep HBM at least 90% busy (the roofline's sloped roof), or it
//              waits most for blocks to arrive or output slots to drain (dma_wait)
//   MXU / VPU  busy on throughput work (MXU when its passes fill at least half of the busy time)
//   latency    waiting on a dependent result: an operand in flight, the MXU's fill and drain
//   overhead   scalar work between grid steps and per loop iteration
// Text, CSV (RFC 4180) and JSON; the roofline picture (app/plots.h) places the same rows.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/chip_spec.h"
#include "sim/timing/result.h"

namespace tpusim {

struct OpProfileRow {
  std::string name, origin, bound;
  int64_t calls = 0;
  double time_s = 0, share = 0;  // summed over calls; share of the run's time
  double flops = 0, hbm_bytes = 0;
  double flops_per_s() const { return time_s > 0 ? flops / time_s : 0; }
  double hbm_bytes_per_s() const { return time_s > 0 ? hbm_bytes / time_s : 0; }
  // FLOPs per HBM byte; 0 when the kernel moves no bytes.
  double intensity() const { return hbm_bytes > 0 ? flops / hbm_bytes : 0; }
};

std::vector<OpProfileRow> op_profile(const RunResult& r, const ChipSpec& chip);

std::string op_profile_text(const std::vector<OpProfileRow>& rows);
std::string op_profile_csv(const std::vector<OpProfileRow>& rows);
nlohmann::json op_profile_json(const std::vector<OpProfileRow>& rows, const ChipSpec& chip);

// The profile in the format the file name asks for: .csv, .json, else text.
std::string op_profile_file(const std::string& path, const std::vector<OpProfileRow>& rows,
                            const ChipSpec& chip);

}  // namespace tpusim
