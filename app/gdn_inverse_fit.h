// measured_runs.md C4 (scenarios/calibration/c4_gdn_inverse.yaml): the GDN operation's forward
// and backward time with MaxText PR #4577's doubling inverse over its time with solve_triangular,
// on v6e. tpusim predicts both ratios from the doubling and main layer cores (forward: the fwd
// stages; backward: the remat recompute and the bwd stages, as xprof's backward holds them) at the
// table's shape. `calibrate` fits xla_row_solve_step_cycles, the latency of each row step of XLA's
// row-sequential inversion, on the forward ratio; the backward ratio checks it.
#pragma once
#include <string>
#include <vector>

#include "app/step_fit.h"
#include "kernels/gdn/shape.h"
#include "sim/chip_spec.h"

namespace tpusim {

struct InverseRatioRow {
  std::string pass;  // forward, backward
  double solve_s = 0, doubling_s = 0;
  double predicted = 0;  // doubling / solve
  double measured() const { return doubling_s / solve_s; }
  double error_pct() const { return 100.0 * (predicted - measured()) / measured(); }
};

struct InverseRatioTable {
  std::string file, source, chip;
  kernels::gdn::GdnShape shape;
  std::vector<InverseRatioRow> rows;
};

bool is_inverse_ratio_table(const std::string& file);
InverseRatioTable load_inverse_ratio_table(const std::string& file);
void predict(const ChipSpec& chip, InverseRatioTable& t);

StepConstantFit fit_row_solve_step(const InverseRatioTable& t, const EngineConstants& e);

// The fit and both rows (docs/calibration.md).
std::string inverse_calibration_markdown(const StepConstantFit& fit, const InverseRatioTable& t);

}  // namespace tpusim
