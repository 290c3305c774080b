#include "app/validate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "app/gdn_inverse_fit.h"
#include "app/report.h"
#include "app/version.h"
#include "app/worker_pool.h"
#include "models/chip_loader.h"
#include "models/yaml_errors.h"

namespace tpusim {

std::string Validation::markdown() const { return validation_markdown(rows, blind, compiled); }

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

std::string Validation::summary() const {
  std::string out;
  if (const ErrorStats e = error_stats(rows); e.rows > 0) {
    out += fmt::format(
        "predicted against measured: {} rows, median |error| {:.1f}%, maximum {:.1f}%\n", e.rows,
        e.median_pct, e.max_pct);
    std::vector<const ValidationRow*> worst;
    for (const ValidationRow& r : rows) worst.push_back(&r);
    std::sort(worst.begin(), worst.end(),
              [](auto* a, auto* b) { return std::abs(a->error_pct()) > std::abs(b->error_pct()); });
    worst.resize(std::min<size_t>(worst.size(), 5));
    out += "largest errors:\n";
    for (const ValidationRow* r : worst)
      out += fmt::format("  {:<32} {:<22} predicted {:<10.4g} measured {:<10.4g} {:+.1f}%\n",
                         r->scenario, r->metric, r->predicted, r->measured, r->error_pct());
  }
  if (!blind.empty()) {
    out += fmt::format("blind predictions ({}; measured results withheld):\n", blind.size());
    for (const auto& [sc, p] : blind)
      out += fmt::format(
          "  {:<32} step {:.4g} s  {:.1f} tokens/s/chip  MFU {:.1f}%  HBM {}{}{}\n", sc.name,
          p.step_time_s, p.tokens_per_s_per_chip, 100 * p.mfu, format_bytes(p.peak_hbm_bytes),
          p.fits_hbm ? p.fits_host ? "" : " (host memory does not fit)" : " (does not fit)",
          p.compiled_verdict.empty() ? "" : "  compiler: " + p.compiled_verdict);
  }
  return out;
}

std::vector<std::string> default_validation_paths() {
  std::vector<std::string> paths;
  for (const char* dir : {"scenarios/calibration", "scenarios/blind"})
    paths.push_back(std::filesystem::is_directory(dir) ? dir : repo_path(dir));
  return paths;
}

namespace {

std::vector<std::string> inverse_ratio_tables(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& p : paths)
    if (std::filesystem::is_directory(p))
      for (const auto& e : std::filesystem::recursive_directory_iterator(p))
        if (e.is_regular_file() && e.path().extension() == ".yaml" &&
            is_inverse_ratio_table(e.path().string()))
          files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

// A prediction crosses from a worker process as JSON (doubles round-trip exactly).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(MemoryItem, what, bytes, on_device)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StepPart, name, count, compute_s, collective_s, exposed_s,
                                   forward_s, backward_s, recompute_s, time_s, unit_busy_s, flops)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StepPrediction, step_time_s, tokens_per_s_per_chip,
                                   model_flops_per_chip, tflops_per_s_per_chip, mfu, parts, memory,
                                   peak_hbm_bytes, hbm_capacity_bytes, fits_hbm, host_offload_bytes,
                                   host_capacity_bytes, fits_host, compiled_peak_hbm_bytes,
                                   compiled_fits, compiled_verdict, memory_source,
                                   model_peak_hbm_bytes, compiled_program_s,
                                   compiled_peak_live_bytes)

Validation validate(const std::vector<std::string>& paths, int jobs,
                    const ValidationProgress& progress) {
  std::vector<Scenario> scenarios;
  // Every file is read before anything runs, so a mistake in any of them stops the run at once;
  // the workers check the kernels as they build them.
  for (const std::string& f : scenario_files(paths))
    scenarios.push_back(load_scenario(f, LoadChecks::file));
  std::vector<StepPrediction> predictions(scenarios.size());
  size_t finished = 0;
  run_in_workers(
      static_cast<int>(scenarios.size()), jobs,
      [&](int i) {
        const auto start = std::chrono::steady_clock::now();
        const std::string& file = scenarios[i].file;
        const nlohmann::json j = {
            {"prediction", predict_scenario(yaml_load_file(file), file)},
            {"seconds",
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()}};
        return j.dump();
      },
      [&](int i, const std::string& line) {
        const nlohmann::json j = nlohmann::json::parse(line);
        predictions[i] = j.at("prediction").get<StepPrediction>();
        if (progress) progress(finished++, scenarios.size(), scenarios[i], j.at("seconds"));
      });
  Validation v;
  for (size_t i = 0; i < scenarios.size(); ++i) {
    const Scenario& sc = scenarios[i];
    if (sc.measured.empty()) v.blind.emplace_back(sc, predictions[i]);
    if (sc.compiled) v.compiled.emplace_back(sc, predictions[i]);
    for (const ValidationRow& r : validation_rows(sc, predictions[i])) v.rows.push_back(r);
  }
  // Kernel-level ratios measured without a whole step (C4).
  for (const std::string& f : inverse_ratio_tables(paths)) {
    InverseRatioTable t = load_inverse_ratio_table(f);
    predict(load_chip(t.chip), t);
    for (const InverseRatioRow& r : t.rows)
      v.rows.push_back({std::filesystem::path(f).stem().string(), r.pass + "_time_ratio", t.source,
                        r.predicted, r.measured(), t.chip});
  }
  return v;
}

}  // namespace tpusim
