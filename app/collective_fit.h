// The v5e AllGather micro-benchmark (calibration C2, tpu_hardware.md section 3) and the fit of the
// engine's two collective constants to it: the achieved fraction of the ICI links' bandwidth and
// the latency per hop.
#pragma once
#include <string>
#include <vector>

#include "app/matmul_table.h"
#include "sim/chip_spec.h"
#include "sim/ir/program.h"

namespace tpusim {

struct CollectiveRow {
  std::string what;
  int64_t bytes = 0;  // of the gathered result
  double measured_s = 0;
  double predicted_s = 0;
  double error_pct() const { return 100.0 * (predicted_s - measured_s) / measured_s; }
};

struct CollectiveTable {
  std::string file, source, chip;
  MeshAxis axis;
  std::vector<CollectiveRow> rows;
};

CollectiveTable load_collective_table(const std::string& file);
void predict(const ChipSpec& chip, CollectiveTable& table);

struct CollectiveConstants {
  double ici_efficiency = 1;
  double ici_hop_latency_s = 0;
};

// A collective's time is linear in 1 / efficiency and in the hop latency, so the fit is a
// least-squares solve weighted by 1 / measured (relative errors); two rows determine it exactly.
CollectiveConstants fit_collective_constants(const ChipSpec& chip, const CollectiveTable& table);
ChipSpec with_constants(ChipSpec chip, const CollectiveConstants& c);

std::string collective_calibration_markdown(const CollectiveConstants& c,
                                            const CollectiveTable& table);
std::vector<CalibratedValue> calibrated_values(const CollectiveConstants& c,
                                               const CollectiveTable& table);

}  // namespace tpusim
