// `tpusim validate`: every scenario under the given paths loaded (all checked before any runs),
// predicted, and compared with its measured values; the scenarios without measurements are the
// blind predictions at the report's end.
#pragma once
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

  std::string markdown() const;  // docs/validation.md
  // {"tool", "rows": [{scenario, metric, predicted, measured, error_pct}], "blind": [step_json]}
  nlohmann::json json() const;
};

// The default paths: the repository's calibration and blind scenarios.
std::vector<std::string> default_validation_paths();

Validation validate(const std::vector<std::string>& paths);

}  // namespace tpusim
