// The whole-step model's calibrated constants (issue 4 allows at most three), each fitted on one
// measured row of measured_runs.md and written into the chip file it belongs to:
//  - v6e's vector_rate_scale, on C3 #1's step time (v6e's VPU and EUP rates are unpublished and
//    its attention is vector-bound); C3 #7 on the same chip checks it.
#pragma once
#include <string>

#include "app/collective_fit.h"
#include "app/matmul_table.h"

namespace tpusim {

// The engine constants a step fit runs with (the ones just fitted, or those recorded).
struct EngineConstants {
  CalibratedConstants matmul;
  CollectiveConstants collectives;
};
EngineConstants recorded_engine_constants(const ChipSpec& chip);

struct StepConstantFit {
  std::string key, chip, scenario_file, metric;
  double value = 0;
  double measured = 0, predicted = 0;  // of the metric, at the fitted value
  int evaluations = 0;
};

// Bisection on the scale (the step time falls as it grows) until the prediction meets the
// measurement; the value is rounded to four significant digits so the chip file is stable.
StepConstantFit fit_vector_rate_scale(const std::string& scenario_file, const EngineConstants& e);

std::string step_calibration_markdown(const StepConstantFit& fit, const EngineConstants& e,
                                      const std::string& check_file);

// The chip file's text with the constant's value and provenance replaced (comments kept).
std::string chip_yaml_with(const std::string& chip_yaml_path, const StepConstantFit& fit);

}  // namespace tpusim
