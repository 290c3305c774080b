// `tpusim validate`: every scenario under the given paths loaded (all checked before any runs),
// predicted, and compared with its measured values; the scenarios without measurements are the
// blind predictions at the report's end.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "app/scenario.h"
#include "app/step_report.h"

namespace tpusim {

struct Validation {
  std::vector<ValidationRow> rows;
  std::vector<std::pair<Scenario, StepPrediction>> blind;
  // Every scenario with a compiled step (`compiled:`), calibration and blind.
  std::vector<std::pair<Scenario, StepPrediction>> compiled;

  std::string markdown() const;  // docs/validation.md
  // A few lines: the error statistics, the largest errors, the blind predictions.
  std::string summary() const;
  // {"tool", "rows": [{scenario, metric, predicted, measured, error_pct}], "blind": [step_json]}
  nlohmann::json json() const;
};

// The default paths: scenarios/calibration and scenarios/blind under the working directory when
// it has them, else the repository's.
std::vector<std::string> default_validation_paths();

// Called after each scenario is predicted: how many were before it, the count, and the seconds
// it took.
using ValidationProgress =
    std::function<void(size_t done, size_t count, const Scenario& s, double seconds)>;

// The scenarios are predicted in `jobs` worker processes (app/worker_pool.h); the result does
// not depend on how many.
Validation validate(const std::vector<std::string>& paths, int jobs,
                    const ValidationProgress& progress = {});

}  // namespace tpusim
