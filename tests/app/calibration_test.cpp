// Re-derives the calibrated constants recorded in models/chips/shared.yaml and v6e.yaml from the
// data they were fitted on, holds every micro-benchmark row to the 15% goal, and checks the
// whole-step constant on a row it was not fitted on.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "app/collective_fit.h"
#include "app/dcn_fit.h"
#include "app/gdn_inverse_fit.h"
#include "app/matmul_table.h"
#include "app/scenario.h"
#include "app/step_fit.h"
#include "models/chip_loader.h"

namespace tpusim {
namespace {

std::string repo(const std::string& rel) {
  return (std::filesystem::path(models_dir()).parent_path() / rel).string();
}

TEST(Calibration, FitReproducesTheRecordedConstants) {
  const ChipSpec recorded = load_chip("v5e");
  const MatmulTable table = load_matmul_table(repo("scenarios/calibration/v5e_pallas_matmul.yaml"));
  const CalibratedConstants fit = fit_constants(recorded, table);
  EXPECT_EQ(fit.grid_step_overhead_cycles, recorded.grid_step_overhead_cycles);
  EXPECT_EQ(fit.dma_latency_cycles, recorded.dma_latency_cycles);
  EXPECT_NEAR(fit.host_dispatch_s, recorded.host_dispatch_s, 1e-12);
  for (const char* key : {"grid_step_overhead_cycles", "dma_latency_cycles", "host_dispatch_s"})
    EXPECT_EQ(recorded.provenance.at(key).rfind("calibrated: ", 0), 0u) << key;
}

TEST(Calibration, EveryRowWithinFifteenPercent) {
  MatmulTable table = load_matmul_table(repo("scenarios/calibration/v5e_pallas_matmul.yaml"));
  ASSERT_EQ(table.rows.size(), 7u);
  predict(load_chip("v5e"), table);
  for (const MatmulRow& r : table.rows)
    EXPECT_LT(std::abs(r.error_pct()), 15.0) << r.kernel << " " << r.size << " " << r.bm;
}

TEST(Calibration, BlindRowsHaveNoMeasurementsAndGetPredictions) {
  MatmulTable blind = load_matmul_table(repo("scenarios/blind/b4_pallas_matmul_128.yaml"));
  predict(load_chip("v5e"), blind);
  ASSERT_EQ(blind.rows.size(), 2u);
  for (const MatmulRow& r : blind.rows) {
    EXPECT_FALSE(r.measured_s.has_value());
    EXPECT_GT(r.predicted_s, 0);
  }
  // 8x the grid steps of the 4096 case at the same per-step cost.
  EXPECT_NEAR(blind.rows[1].predicted_s / blind.rows[0].predicted_s, 8.0, 0.1);
}

TEST(Calibration, CollectiveFitReproducesTheRecordedConstants) {
  const ChipSpec recorded = load_chip("v5e");
  CollectiveTable table = load_collective_table(repo("scenarios/calibration/v5e_allgather.yaml"));
  const CollectiveConstants fit = fit_collective_constants(recorded, table);
  EXPECT_NEAR(fit.ici_efficiency, recorded.ici_efficiency, 1e-9);
  EXPECT_NEAR(fit.ici_hop_latency_s, recorded.ici_hop_latency_s, 1e-15);
  // By hand: the bandwidth terms are 3/4 x bytes / 45 GB/s (559.2 and 2.18 us) over 3 hops, so
  // two equations give efficiency 557.0 / 672 and latency (8 - 2.18 / e) / 3 us.
  const double a1 = 0.75 * 33554432 / 45e9, a2 = 0.75 * 131072 / 45e9;
  const double e = (a1 - a2) / (680e-6 - 8e-6);
  EXPECT_NEAR(fit.ici_efficiency, e, 1e-9);
  EXPECT_NEAR(fit.ici_hop_latency_s, (8e-6 - a2 / e) / 3, 1e-12);
  predict(recorded, table);
  for (const CollectiveRow& r : table.rows) EXPECT_LT(std::abs(r.error_pct()), 1.0) << r.what;
  for (const char* key : {"ici_efficiency", "ici_hop_latency_s"})
    EXPECT_EQ(recorded.provenance.at(key).rfind("calibrated: ", 0), 0u) << key;
}

TEST(Calibration, V6eVectorRateScaleIsReDerivedFromC3Row1) {
  const ChipSpec v6e = load_chip("v6e");
  const StepConstantFit fit = fit_vector_rate_scale(
      repo("scenarios/calibration/c3/c3_01_v6e_llama3.1-8b.yaml"), recorded_engine_constants(v6e));
  EXPECT_EQ(fit.chip, "v6e");
  EXPECT_NEAR(fit.value, v6e.vector_rate_scale, 1e-9) << "run `build/tpusim calibrate --write`";
  EXPECT_EQ(v6e.provenance.at("vector_rate_scale").rfind("calibrated: ", 0), 0u);
  EXPECT_NEAR(fit.predicted, fit.measured, 1e-3 * fit.measured);
  // The other chips keep their own rates.
  EXPECT_EQ(load_chip("v5e").vector_rate_scale, 1);
  EXPECT_EQ(load_chip("v5p").vector_rate_scale, 1);
}

TEST(Calibration, FillDrainLatencyIsReDerivedFromC1HeadBatching) {
  const ChipSpec v5e = load_chip("v5e");
  const StepConstantFit fit = fit_mxu_fill_drain(repo("scenarios/calibration/c1/c1_scan.yaml"),
                                                 repo("scenarios/calibration/c1/c1_heads.yaml"),
                                                 recorded_engine_constants(v5e));
  EXPECT_NEAR(fit.value, v5e.mxu_fill_drain_per_dim, 1e-9)
      << "run `build/tpusim calibrate --write`";
  EXPECT_EQ(v5e.provenance.at("mxu_fill_drain_per_dim").rfind("calibrated: ", 0), 0u);
  EXPECT_NEAR(fit.predicted, fit.measured, 0.01 * fit.measured);
  // Derived per chip from the array width.
  EXPECT_EQ(v5e.mxu_fill_drain_cycles, std::llround(v5e.mxu_fill_drain_per_dim * 128));
  EXPECT_EQ(load_chip("v6e").mxu_fill_drain_cycles, std::llround(v5e.mxu_fill_drain_per_dim * 256));
}

TEST(Calibration, RowSolveStepIsReDerivedFromC4ForwardRatio) {
  const ChipSpec v6e = load_chip("v6e");
  const InverseRatioTable c4 =
      load_inverse_ratio_table(repo("scenarios/calibration/c4_gdn_inverse.yaml"));
  const StepConstantFit fit = fit_row_solve_step(c4, recorded_engine_constants(v6e));
  EXPECT_EQ(fit.value, v6e.xla_row_solve_step_cycles) << "run `build/tpusim calibrate --write`";
  EXPECT_EQ(v6e.provenance.at("xla_row_solve_step_cycles").rfind("calibrated: ", 0), 0u);
  EXPECT_NEAR(fit.predicted, fit.measured, 0.01 * fit.measured);
}

TEST(Calibration, C4BackwardRatioHoldsWithinFifteenPercentItWasNotFittedOn) {
  // issue 14: the doubling build against the solve build reproduces both measured ratios
  // within 15% at B1's layer shape on v6e; the forward one is fitted, the backward one is not.
  InverseRatioTable c4 =
      load_inverse_ratio_table(repo("scenarios/calibration/c4_gdn_inverse.yaml"));
  predict(load_chip(c4.chip), c4);
  ASSERT_EQ(c4.rows.size(), 2u);
  for (const InverseRatioRow& r : c4.rows) EXPECT_LT(std::abs(r.error_pct()), 15) << r.pass;
}

TEST(Calibration, C1SavingsComeInTheMeasuredOrder) {
  // Not fitted on: only the scan-heads difference is. The kernel change's three steps must save
  // in the measured order of size: ladder > scan kernel > head batching.
  double step[4];
  const char* builds[] = {"main", "scan", "heads", "ladder"};
  for (int b = 0; b < 4; ++b)
    step[b] = predict_step(load_scenario(repo(std::string("scenarios/calibration/c1/c1_") +
                                              builds[b] + ".yaml"))
                               .step)
                  .step_time_s;
  const double scan = step[0] - step[1], heads = step[1] - step[2], ladder = step[2] - step[3];
  EXPECT_GT(ladder, scan);
  EXPECT_GT(scan, heads);
  EXPECT_GT(heads, 0);
}

TEST(Calibration, V6eScaleHoldsOnC3Row7ItWasNotFittedOn) {
  const Scenario row7 = load_scenario(repo("scenarios/calibration/c3/c3_07_v6e_llama3.1-70b.yaml"));
  const double predicted = predict_step(row7.step).step_time_s;
  const double measured = row7.measured.at("step_time_s");
  EXPECT_LT(std::abs(predicted - measured) / measured, 0.10);
}

TEST(Calibration, DcnSliceLatencyIsReDerivedFromC5Row41sDropOver32Slices) {
  const ChipSpec v5e = load_chip("v5e");
  SliceTable slices = load_slice_table();
  ASSERT_EQ(slices.rows.size(), 6u);
  const StepConstantFit fit = fit_dcn_slice_latency(slices, recorded_engine_constants(v5e));
  EXPECT_NEAR(fit.value, v5e.dcn_slice_latency_s, 1e-12) << "run `build/tpusim calibrate --write`";
  EXPECT_EQ(v5e.provenance.at("dcn_slice_latency_s").rfind("calibrated: ", 0), 0u);
  EXPECT_NEAR(fit.predicted, fit.measured, 1e-3 * fit.measured);
  // Shared by every chip (no other chip has multi-slice rows to fit it on).
  EXPECT_EQ(load_chip("v5p").dcn_slice_latency_s, v5e.dcn_slice_latency_s);
}

TEST(Calibration, MultiSliceRowsFallInTheMeasuredOrderAndWithinFivePercentOfTheDrop) {
  // issue 15: the multi-slice rows in the measured order (2 and 4 slices measured alike) and the
  // drop from 1 to 32 slices within 5% of the measured one; every row within 10%.
  SliceTable t = load_slice_table();
  predict(t, load_chip("v5e").dcn_slice_latency_s, recorded_engine_constants(load_chip("v5e")));
  for (size_t i = 1; i < t.rows.size(); ++i) {
    EXPECT_LE(t.rows[i].predicted_tflops, t.rows[i - 1].predicted_tflops) << t.rows[i].slices;
    EXPECT_LT(std::abs(t.rows[i].error_pct()), 10) << t.rows[i].slices;
  }
  auto drop = [&](auto tflops) { return tflops(t.rows.front()) - tflops(t.rows.back()); };
  const double measured = drop([](const SliceRow& r) { return r.measured_tflops; });
  // The predicted drop, as a fraction of the single slice, applied to the measured single slice.
  const double predicted = t.rows.front().measured_tflops *
                           (1 - t.rows.back().predicted_tflops / t.rows.front().predicted_tflops);
  EXPECT_NEAR(predicted, measured, 0.05 * measured);
}

}  // namespace
}  // namespace tpusim
