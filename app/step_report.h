// Text and JSON for a predicted training step (tpusim run), and the predicted-against-measured
// rows of a scenario (tpusim validate).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/scenario.h"

namespace tpusim {

std::string step_summary_text(const Scenario& s, const StepPrediction& p);
nlohmann::json step_json(const Scenario& s, const StepPrediction& p);

struct ValidationRow {
  std::string scenario, metric, source;
  double predicted = 0, measured = 0;
  double error_pct() const { return 100.0 * (predicted - measured) / measured; }
};
std::vector<ValidationRow> validation_rows(const Scenario& s, const StepPrediction& p);

// The validation report: every row, then the median and maximum absolute error, and the
// predictions of the scenarios without measurements (the blind set).
std::string validation_markdown(const std::vector<ValidationRow>& rows,
                                const std::vector<std::pair<Scenario, StepPrediction>>& blind);

}  // namespace tpusim
