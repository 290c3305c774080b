// The v5e matmul micro-benchmark tables (calibration C2 and blind B4) and the fit of the engine's
// calibrated constants to them: grid-step overhead, DMA latency and host dispatch.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "app/calibrated_value.h"
#include "sim/chip_spec.h"

namespace tpusim {

struct MatmulRow {
  std::string kernel;  // "pallas" or "xla"
  int64_t size = 0;    // m = k = n
  int64_t bm = 0, bk = 0, bn = 0;
  std::optional<double> measured_s;
  double predicted_s = 0;
  double error_pct() const { return 100.0 * (predicted_s - *measured_s) / *measured_s; }
};

struct MatmulTable {
  std::string file, source, chip;
  std::vector<MatmulRow> rows;
};

MatmulTable load_matmul_table(const std::string& file);

// Fills predicted_s for every row (the engine's prediction, host dispatch included).
void predict(const ChipSpec& chip, MatmulTable& table);

struct CalibratedConstants {
  int64_t grid_step_overhead_cycles = 0;
  int64_t dma_latency_cycles = 0;
  double host_dispatch_s = 0;
  double rms_log_error = 0;
  int evaluations = 0;
};

// Minimises the mean squared log error of predicted against measured over the table's rows
// (Nelder-Mead from a fixed start; deterministic).
CalibratedConstants fit_constants(const ChipSpec& chip, const MatmulTable& table);

ChipSpec with_constants(ChipSpec chip, const CalibratedConstants& c);

// The calibration report (markdown) for these constants.
std::string calibration_markdown(const ChipSpec& chip, const CalibratedConstants& c,
                                 const MatmulTable& calibration, const MatmulTable& blind);

// The fitted values for models/chips/shared.yaml, with how they were fitted.
std::vector<CalibratedValue> calibrated_values(const CalibratedConstants& c,
                                               const MatmulTable& calibration);

}  // namespace tpusim
