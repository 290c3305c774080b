// Results JSON and Chrome trace: required keys, named tracks, and byte-identical output across
// runs.
#include "app/report.h"

#include <gtest/gtest.h>

#include "kernels/generic.h"
#include "models/chip_loader.h"
#include "sim/timing/engine.h"

namespace tpusim {
namespace {

TEST(Report, JsonHasTheDocumentedKeys) {
  const ChipSpec chip = load_chip("v5e");
  const RunResult r =
      simulate_kernel(chip, kernels::pallas_matmul({1024, 1024, 1024, 256, 512, 512}));
  const nlohmann::json j = result_json(r, chip, {{"command", "test"}});
  for (const char* key :
       {"time_s", "cycles", "flops", "hbm_bytes", "vmem_peak_bytes", "busy_s", "stall_s"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_TRUE(j["busy_s"].contains("tc0.mxu0"));
  for (const char* cause :
       {"dma_wait", "dependency", "mxu_fill_drain", "step_overhead", "collective"})
    EXPECT_TRUE(j["stall_s"].contains(cause)) << cause;
  double sum = j["core_busy_s"];
  for (const auto& [k, v] : j["stall_s"].items()) sum += v.get<double>();
  EXPECT_NEAR(sum, j["time_s"].get<double>(), 1e-12);
  EXPECT_EQ(j["config"]["command"], "test");
}

TEST(Report, TraceHasNamedTracksAndMicrosecondTimes) {
  const ChipSpec chip = load_chip("v5e");
  const RunResult r = simulate_kernel(chip, kernels::pallas_matmul({512, 512, 512, 256, 256, 256}),
                                      {.record_timeline = true});
  const nlohmann::json t = chrome_trace(r);
  std::set<std::string> tracks;
  double last_end = 0;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks.insert(e["args"]["name"]);
    if (e["ph"] == "X")
      last_end = std::max(last_end, e["ts"].get<double>() + e["dur"].get<double>());
  }
  for (const char* u : {"tc0.scalar", "tc0.mxu0", "tc0.mxu3", "tc0.vpu", "tc0.dma0", "hbm", "ici"})
    EXPECT_TRUE(tracks.count(u)) << u;
  EXPECT_NEAR(last_end, r.time_s * 1e6, 1e-6);
}

TEST(Report, OutputsAreByteIdenticalAcrossRuns) {
  const ChipSpec chip = load_chip("v5p");
  auto once = [&] {
    const RunResult r = simulate_kernel(
        chip, kernels::pallas_matmul({2048, 2048, 2048, 256, 512, 256}), {.record_timeline = true});
    return result_json(r, chip, {}).dump(2) + chrome_trace(r).dump();
  };
  EXPECT_EQ(once(), once());
}

}  // namespace
}  // namespace tpusim
