// Re-derives the calibrated constants recorded in models/chips/shared.yaml from the data they were
// fitted on, and holds every calibration row to the 15% goal.
#include <gtest/gtest.h>

#include <filesystem>

#include "app/matmul_table.h"
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

}  // namespace
}  // namespace tpusim
