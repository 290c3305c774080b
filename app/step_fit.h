// The whole-step model's calibrated constants (issue 4 allows at most three), each fitted on
// measured rows of measured_runs.md:
//  - mxu_fill_drain_per_dim (shared.yaml), the MXU result latency, on C1's head-batching saving
//    (the scan build against the heads build: batching heads hides exactly this latency);
//  - v6e's vector_rate_scale (v6e.yaml), on C3 #1's step time (v6e's VPU and EUP rates are
//    unpublished and its attention is vector-bound); C3 #7 on the same chip checks it.
#pragma once
#include <functional>
#include <string>

#include "app/collective_fit.h"
#include "app/matmul_table.h"

namespace tpusim {

// The engine constants a step fit runs with (the ones just fitted, or those recorded).
struct EngineConstants {
  CalibratedConstants matmul;
  CollectiveConstants collectives;
  double mxu_fill_drain_per_dim = 2;
  int64_t xla_row_solve_step_cycles = 0;
};
ChipSpec with_constants(ChipSpec chip, const EngineConstants& e);
EngineConstants recorded_engine_constants(const ChipSpec& chip);

struct StepConstantFit {
  std::string key, chip, scenario_file, metric;
  double value = 0;
  double measured = 0, predicted = 0;  // of the metric, at the fitted value
  int evaluations = 0;
};

// Sets fit.value to the x in [lo, hi] where predicted(x) meets fit.measured (predicted monotone
// either way; geometric bisection), rounded to four significant digits so the recorded value is
// stable, and fit.predicted to the prediction there.
void solve_constant(StepConstantFit& fit, double lo, double hi,
                    const std::function<double(double)>& predicted, const std::string& none);

// Bisection on the scale (the step time falls as it grows) until the prediction meets the
// measurement; the value is rounded to four significant digits so the chip file is stable.
StepConstantFit fit_vector_rate_scale(const std::string& scenario_file, const EngineConstants& e);

// Bisection on the latency until the predicted step-time difference of the two builds meets the
// measured one (it grows with the latency the unbatched scan kernels expose).
StepConstantFit fit_mxu_fill_drain(const std::string& scan_file, const std::string& heads_file,
                                   const EngineConstants& e);

std::string step_calibration_markdown(const StepConstantFit& fill_drain,
                                      const StepConstantFit& vector_scale, const EngineConstants& e,
                                      const std::string& check_file);

// The fitted value and how it was fitted, for its chip file.
CalibratedValue calibrated_value(const StepConstantFit& fit, const std::string& how);

}  // namespace tpusim
