// Text and JSON for a predicted training step (tpusim run), and the predicted-against-measured
// rows of a scenario (tpusim validate).
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "app/report.h"
#include "app/scenario.h"

namespace tpusim {

std::string step_summary_text(const Scenario& s, const StepPrediction& p);

// The share of the step each kind of unit is busy, mean over its units ("mxu", "vpu", "eup",
// "hbm", "dma", ...), and "collective links": the collectives' share on the ICI and DCN links.
std::map<std::string, double> unit_utilisation(const StepPrediction& p);

// The same as one line: "mxu 73.7%  vpu 12.8%  ...", zero shares left out.
std::string unit_utilisation_text(const StepPrediction& p);
// Two steps part by part: each part's share of its step (count x (compute + exposed
// collectives)), the first's parts in order then the second's others, and a last row "step".
std::vector<StageDifference> step_part_difference(const StepPrediction& first,
                                                  const StepPrediction& second);
nlohmann::json step_json(const Scenario& s, const StepPrediction& p);

// "what batching buys" per part: the batch-independent and per-sample times (batch_split), and
// the share of the part that is batch-independent at the scenario's batch.
std::string batch_split_text(const StepConfig& c, const std::vector<BatchSplit>& split);
nlohmann::json batch_split_json(const StepConfig& c, const std::vector<BatchSplit>& split);

struct ValidationRow {
  std::string scenario, metric, source;
  double predicted = 0, measured = 0;
  std::string chip;
  double error_pct() const { return 100.0 * (predicted - measured) / measured; }
};
std::vector<ValidationRow> validation_rows(const Scenario& s, const StepPrediction& p);
// The measured step time: as measured, or MaxText's FLOP count over the measured TFLOP/s;
// nullopt when neither was measured.
std::optional<double> measured_step_time_s(const Scenario& s, const StepPrediction& p);

// The validation report: every row, then the median and maximum absolute error, and the
// predictions of the scenarios without measurements (the blind set).
struct ErrorStats {
  double median_pct = 0, max_pct = 0;  // of the absolute errors
  size_t rows = 0;
};
ErrorStats error_stats(const std::vector<ValidationRow>& rows);

// `compiled`: the scenarios with a compiled step, for the table of tpusim's peak HBM against
// the TPU compiler's.
std::string validation_markdown(
    const std::vector<ValidationRow>& rows,
    const std::vector<std::pair<Scenario, StepPrediction>>& blind,
    const std::vector<std::pair<Scenario, StepPrediction>>& compiled = {});

}  // namespace tpusim
