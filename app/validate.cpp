#include "app/validate.h"

#include "app/version.h"
#include "models/chip_loader.h"

namespace tpusim {

std::string Validation::markdown() const { return validation_markdown(rows, blind); }

nlohmann::json Validation::json() const {
  nlohmann::json j = {
      {"tool", tool_json()}, {"rows", nlohmann::json::array()}, {"blind", nlohmann::json::array()}};
  for (const auto& [sc, p] : blind) j["blind"].push_back(step_json(sc, p));
  for (const ValidationRow& r : rows)
    j["rows"].push_back({{"scenario", r.scenario},
                         {"metric", r.metric},
                         {"predicted", r.predicted},
                         {"measured", r.measured},
                         {"error_pct", r.error_pct()}});
  return j;
}

std::vector<std::string> default_validation_paths() {
  return {repo_path("scenarios/calibration"), repo_path("scenarios/blind")};
}

Validation validate(const std::vector<std::string>& paths) {
  std::vector<Scenario> scenarios;
  for (const std::string& f : scenario_files(paths)) scenarios.push_back(load_scenario(f));
  Validation v;
  for (const Scenario& sc : scenarios) {
    const StepPrediction p = predict_step(sc.step);
    if (sc.measured.empty()) v.blind.emplace_back(sc, p);
    for (const ValidationRow& r : validation_rows(sc, p)) v.rows.push_back(r);
  }
  return v;
}

}  // namespace tpusim
