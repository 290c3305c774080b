#include "app/calibrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "models/chip_loader.h"

namespace tpusim {
namespace {

constexpr int kMaxRounds = 8;  // the fixed point is reached in two or three
const std::string kC1 = "scenarios/calibration/c1/", kC3 = "scenarios/calibration/c3/";

}  // namespace

Calibration calibrate(const CalibrationProgress& progress) {
  auto start = std::chrono::steady_clock::now();
  auto done = [&](const std::string& what) {
    const auto now = std::chrono::steady_clock::now();
    if (progress) progress(what, std::chrono::duration<double>(now - start).count());
    start = now;
  };
  const ChipSpec v5e = load_chip("v5e");
  Calibration c;
  c.matmul = load_matmul_table(repo_path("scenarios/calibration/v5e_pallas_matmul.yaml"));
  c.blind_matmul = load_matmul_table(repo_path("scenarios/blind/b4_pallas_matmul_128.yaml"));
  c.gather = load_collective_table(repo_path("scenarios/calibration/v5e_allgather.yaml"));
  c.inverse = load_inverse_ratio_table(repo_path("scenarios/calibration/c4_gdn_inverse.yaml"));
  EngineConstants& engine = c.engine;
  engine = recorded_engine_constants(v5e);
  for (int round = 0; round < kMaxRounds; ++round) {
    const EngineConstants before = engine;
    // The matmul fit searches its own constants from a fixed start; it sees this round's rest.
    const ChipSpec chip = with_constants(v5e, engine);
    engine.matmul = fit_constants(chip, c.matmul);
    done(fmt::format("round {}: engine constants on the v5e matmul table", round + 1));
    engine.collectives = fit_collective_constants(with_constants(chip, engine.matmul), c.gather);
    done(fmt::format("round {}: collective constants on the v5e AllGather", round + 1));
    c.fill_drain = fit_mxu_fill_drain(repo_path(kC1 + "c1_scan.yaml"),
                                      repo_path(kC1 + "c1_heads.yaml"), engine);
    engine.mxu_fill_drain_per_dim = c.fill_drain.value;
    done(fmt::format("round {}: MXU fill/drain on C1's head batching: {:.4g} x the array",
                     round + 1, engine.mxu_fill_drain_per_dim));
    c.row_solve_step = fit_row_solve_step(c.inverse, engine);
    engine.xla_row_solve_step_cycles = static_cast<int64_t>(c.row_solve_step.value);
    done(fmt::format("round {}: row-solve step on C4's forward ratio: {} cycles", round + 1,
                     engine.xla_row_solve_step_cycles));
    if (engine.matmul.grid_step_overhead_cycles == before.matmul.grid_step_overhead_cycles &&
        engine.matmul.dma_latency_cycles == before.matmul.dma_latency_cycles &&
        engine.mxu_fill_drain_per_dim == before.mxu_fill_drain_per_dim &&
        engine.xla_row_solve_step_cycles == before.xla_row_solve_step_cycles)
      break;
  }
  c.vector_scale = fit_vector_rate_scale(repo_path(kC3 + "c3_01_v6e_llama3.1-8b.yaml"), engine);
  done("v6e vector rate on C3 #1");
  c.slices = load_slice_table();
  c.dcn_slice_latency = fit_dcn_slice_latency(c.slices, engine);
  predict(c.slices, c.dcn_slice_latency.value, engine);
  done(fmt::format("DCN slice latency on C5 #41's drop over 32 slices: {:.4g} ms",
                   c.dcn_slice_latency.value * 1e3));
  const ChipSpec fitted = with_constants(v5e, engine);
  predict(fitted, c.matmul);
  predict(fitted, c.blind_matmul);
  predict(fitted, c.gather);
  predict(with_constants(load_chip(c.inverse.chip), engine), c.inverse);
  c.markdown = calibration_markdown(fitted, engine.matmul, c.matmul, c.blind_matmul) +
               collective_calibration_markdown(engine.collectives, c.gather) +
               inverse_calibration_markdown(c.row_solve_step, c.inverse) +
               step_calibration_markdown(c.fill_drain, c.vector_scale, engine,
                                         repo_path(kC3 + "c3_07_v6e_llama3.1-70b.yaml")) +
               dcn_calibration_markdown(c.dcn_slice_latency, c.slices);
  return c;
}

std::vector<std::string> stage_calibration(const Calibration& c, OutputFiles& files) {
  namespace fs = std::filesystem;
  const fs::path chips = fs::path(models_dir()) / "chips";
  std::vector<CalibratedValue> values = calibrated_values(c.engine.matmul, c.matmul);
  for (const CalibratedValue& v : calibrated_values(c.engine.collectives, c.gather))
    values.push_back(v);
  values.push_back(calibrated_value(
      c.fill_drain, "C1's head-batching saving: c1_scan.yaml minus c1_heads.yaml step time in s"));
  values.push_back(calibrated_value(
      c.row_solve_step,
      "C4's forward time ratio, doubling inverse over solve_triangular "
      "(c4_gdn_inverse.yaml, v6e at B1's layer shape; its backward ratio checks it)"));
  values.push_back(calibrated_value(
      c.dcn_slice_latency,
      "C5 #41's drop from 1 to 32 v5e-256 slices: c5_41_v5e-256x32_maxtext-16b.yaml over "
      "c3_41_v5e_maxtext-16b.yaml tflops_per_chip (2, 4, 8 and 16 slices check it)"));
  const std::string shared = (chips / "shared.yaml").string();
  const std::string chip_file = (chips / (c.vector_scale.chip + ".yaml")).string();
  const std::string docs = repo_path("docs/calibration.md");
  files.stage(shared, chip_file_with(shared, values));
  const std::string scale_on =
      fmt::format("{} {}", std::filesystem::path(c.vector_scale.scenario_file).filename().string(),
                  c.vector_scale.metric);
  files.stage(chip_file, chip_file_with(chip_file, {calibrated_value(c.vector_scale, scale_on)}));
  files.stage(docs, c.markdown);
  return {shared, chip_file, docs};
}

std::string Calibration::summary() const {
  auto worst = [](const auto& rows) {
    double w = 0;
    for (const auto& r : rows)
      if constexpr (requires { r.measured_s.has_value(); }) {
        if (r.measured_s) w = std::max(w, std::abs(r.error_pct()));
      } else {
        w = std::max(w, std::abs(r.error_pct()));
      }
    return w;
  };
  const CalibratedConstants& m = engine.matmul;
  std::string out = "calibrated constants (docs/calibration.md has the tables):\n";
  out += fmt::format(
      "  grid_step_overhead_cycles {}, dma_latency_cycles {}, host_dispatch_s {:.4g}: v5e matmul "
      "table, {} rows, RMS log error {:.4f}, largest error {:.1f}%\n",
      m.grid_step_overhead_cycles, m.dma_latency_cycles, m.host_dispatch_s, matmul.rows.size(),
      m.rms_log_error, worst(matmul.rows));
  out += fmt::format(
      "  ici_efficiency {:.4f}, ici_hop_latency_s {:.4g}: v5e AllGather, {} rows, largest error "
      "{:.1f}%\n",
      engine.collectives.ici_efficiency, engine.collectives.ici_hop_latency_s, gather.rows.size(),
      worst(gather.rows));
  auto step = [](const StepConstantFit& f) {
    return fmt::format("  {} {:.4g} ({}): {} {} measured {:.4g}, predicted {:.4g}\n", f.key,
                       f.value, f.chip, std::filesystem::path(f.scenario_file).filename().string(),
                       f.metric, f.measured, f.predicted);
  };
  out += step(fill_drain) + step(row_solve_step) + step(vector_scale) + step(dcn_slice_latency);
  for (const SliceRow& r : slices.rows)
    if (r.file != dcn_slice_latency.scenario_file && r.slices > 1)
      out += fmt::format(
          "  check, not fitted: C5 #41 over {} slices measured {:.4g} TFLOP/s, "
          "predicted {:.4g} ({:+.1f}%)\n",
          r.slices, r.measured_tflops, r.predicted_tflops, r.error_pct());
  for (const InverseRatioRow& r : inverse.rows)
    if (r.pass != "forward")
      out += fmt::format(
          "  check, not fitted: C4 {} ratio measured {:.3f}, predicted {:.3f} ({:+.1f}%)\n", r.pass,
          r.measured(), r.predicted, r.error_pct());
  return out;
}

}  // namespace tpusim
