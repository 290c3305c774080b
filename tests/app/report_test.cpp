// Results JSON and Chrome trace: required keys, named tracks, and byte-identical output across
// runs.
#include "app/report.h"

#include <gtest/gtest.h>

#include <sstream>

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

std::string trace_text(const RunResult& r) {
  std::ostringstream out;
  write_chrome_trace(r, out);
  return out.str();
}

// A small matmul on v5e with its timeline (a 2 x 2 x 2 grid).
RunResult small_matmul_run() {
  return simulate_kernel(load_chip("v5e"), kernels::pallas_matmul({512, 512, 512, 256, 256, 256}),
                         {.record_timeline = true});
}

// A trace of a million events or more reports its progress ten times; a short one does not.
TEST(Report, LongTracesReportProgress) {
  RunResult r = small_matmul_run();
  const TimelineEvent e = r.events.front();
  std::vector<size_t> calls;
  auto progress = [&](size_t done, size_t total) {
    EXPECT_EQ(total, r.events.size());
    calls.push_back(done);
  };
  std::ostringstream short_trace;
  write_chrome_trace(r, short_trace, progress);
  EXPECT_TRUE(calls.empty());
  r.events.resize(1'000'000, e);
  struct Discard : std::streambuf {
    int overflow(int c) override { return c; }
    std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
  } discard;
  std::ostream out(&discard);
  write_chrome_trace(r, out, progress);
  ASSERT_EQ(calls.size(), 10u);
  EXPECT_EQ(calls.front(), 100'000u);
  EXPECT_EQ(calls.back(), 1'000'000u);
}

TEST(Report, TraceHasNamedTracksAndMicrosecondTimes) {
  const RunResult r = small_matmul_run();
  const nlohmann::json t = nlohmann::json::parse(trace_text(r));
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

// Every timeline event becomes one trace event with its unit, times, label and what it belongs to.
TEST(Report, TraceEventsCarryEachTimelineEvent) {
  const RunResult r = small_matmul_run();
  const nlohmann::json t = nlohmann::json::parse(trace_text(r));
  std::vector<nlohmann::json> spans;
  for (const auto& e : t["traceEvents"])
    if (e["ph"] == "X") spans.push_back(e);
  ASSERT_EQ(spans.size(), r.events.size());
  const double us = 1e6 / r.clock_hz;
  for (size_t i = 0; i < spans.size(); i += 7) {
    const TimelineEvent& e = r.events[i];
    const nlohmann::json& s = spans[i];
    EXPECT_EQ(s["tid"], e.unit);
    EXPECT_DOUBLE_EQ(s["ts"].get<double>(), e.start * us);
    EXPECT_DOUBLE_EQ(s["dur"].get<double>(), (e.end - e.start) * us);
    EXPECT_EQ(s["name"], r.labels[e.label]);
    EXPECT_EQ(s["cat"], e.cause == Cause::busy ? "op" : "stall");
    if (e.cause != Cause::busy) {
      EXPECT_EQ(s["args"]["cause"], std::string(name(e.cause)));
    }
    if (e.item >= 0) {
      EXPECT_EQ(s["args"]["item"], r.items[e.item].name);
    }
    if (e.step >= 0) {  // the 2 x 2 x 2 grid: (i, j, k) of the step
      const auto g = s["args"]["grid"].get<std::vector<int64_t>>();
      ASSERT_EQ(g.size(), 3u);
      EXPECT_EQ(g[0] * 4 + g[1] * 2 + g[2], e.step);
    }
  }
}

TEST(Report, OutputsAreByteIdenticalAcrossRuns) {
  const ChipSpec chip = load_chip("v5p");
  auto once = [&] {
    const RunResult r = simulate_kernel(
        chip, kernels::pallas_matmul({2048, 2048, 2048, 256, 512, 256}), {.record_timeline = true});
    return result_json(r, chip, {}).dump(2) + trace_text(r);
  };
  EXPECT_EQ(once(), once());
}

}  // namespace
}  // namespace tpusim
