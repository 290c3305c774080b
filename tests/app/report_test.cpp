// Results JSON and Chrome trace: required keys, named tracks, and byte-identical output across
// runs.
#include "app/report.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "app/chrome_trace.h"
#include "app/step_report.h"
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
    if (e["ph"] == "X" && e["cat"] != "item" && e["cat"] != "stage") spans.push_back(e);
  ASSERT_EQ(spans.size(), r.events.size());
  // Whole nanoseconds, in microseconds.
  auto us = [&](int64_t cycles) { return std::llround(cycles * 1e9 / r.clock_hz) / 1e3; };
  for (size_t i = 0; i < spans.size(); i += 7) {
    const TimelineEvent& e = r.events[i];
    const nlohmann::json& s = spans[i];
    EXPECT_EQ(s["tid"], e.unit);
    EXPECT_EQ(s["pid"], r.units[e.unit].core + 1);  // its TensorCore's process, or the chip's (0)
    EXPECT_NEAR(s["ts"].get<double>(), us(e.start), 1e-9);
    EXPECT_NEAR(s["dur"].get<double>(), us(e.end) - us(e.start), 1e-9);
    EXPECT_EQ(s["name"], r.labels[e.label]);
    EXPECT_EQ(s["cat"], e.op == kFastForwardedSpan ? "fast-forward"
                        : e.cause == Cause::busy   ? "op"
                                                   : "stall");
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

// The trace's structure as a Perfetto user expects it: a process per TensorCore and one for the
// chip's shared units, program, stage and collective tracks, a flow per dependency, counters, and
// the run's metadata.
TEST(Report, TraceHasProcessesTracksFlowsAndCounters) {
  Program p;
  const int a =
      p.add_kernel(kernels::pallas_matmul({1024, 1024, 1024, 256, 256, 256}), {}, "fwd: a");
  const int c = p.add_collective("gather", {CollectiveKind::all_gather, 1 << 24, {"fsdp", 4}}, {a});
  p.add_kernel(kernels::elementwise_scale(1024, 1024, 256), {c}, "fwd: b");
  const RunResult r = simulate(load_chip("v5p"), p, {.record_timeline = true});
  std::ostringstream text;
  write_chrome_trace(r, text, {}, {{"scenario", "test"}});
  const nlohmann::json t = nlohmann::json::parse(text.str());
  EXPECT_EQ(t["metadata"]["chip"], "v5p");
  EXPECT_EQ(t["metadata"]["scenario"], "test");
  EXPECT_TRUE(t["metadata"]["tool"].contains("version"));
  std::map<int, std::string> processes;
  std::set<std::string> threads;
  std::map<int64_t, int> flow_ends;  // id -> s (+1) and f (+2)
  int items = 0, stages = 0, hbm_samples = 0, vmem_samples = 0;
  for (const auto& e : t["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") processes[e["pid"]] = e["args"]["name"];
    if (e["ph"] == "M" && e["name"] == "thread_name") threads.insert(e["args"]["name"]);
    if (e["ph"] == "X" && e["cat"] == "item") ++items;
    if (e["ph"] == "X" && e["cat"] == "stage") ++stages;
    if (e["ph"] == "s") flow_ends[e["id"]] += 1;
    if (e["ph"] == "f") flow_ends[e["id"]] += 2;
    if (e["ph"] == "C" && e["name"] == "HBM busy") {
      ++hbm_samples;
      EXPECT_GE(e["args"]["%"].get<double>(), 0);
      EXPECT_LE(e["args"]["%"].get<double>(), 100);
    }
    if (e["ph"] == "C" && e["name"] == "VMEM of the running kernel") ++vmem_samples;
  }
  EXPECT_EQ(processes, (std::map<int, std::string>{
                           {0, "chip v5p"}, {1, "TensorCore 0"}, {2, "TensorCore 1"}}));
  for (const char* track : {"program", "stages", "collectives", "tc1.mxu0", "hbm", "ici"})
    EXPECT_TRUE(threads.count(track)) << track;
  EXPECT_EQ(items, 3);
  EXPECT_EQ(stages, 2);             // fwd: a, fwd: b
  ASSERT_EQ(flow_ends.size(), 2u);  // gather waits for a, b for gather
  for (const auto& [id, ends] : flow_ends) EXPECT_EQ(ends, 3) << id;  // a start and an end
  EXPECT_GT(hbm_samples, 100);
  EXPECT_EQ(vmem_samples, 4);  // each kernel call's start and end
}

// Any output whose path ends in .gz is written gzip-compressed.
TEST(Report, GzOutputsAreCompressed) {
  const std::string dir = testing::TempDir();
  const std::string plain = dir + "/tpusim_trace.json", gz = dir + "/tpusim_trace.json.gz";
  const RunResult r = small_matmul_run();
  OutputFiles files;
  files.stage(plain, [&](std::ostream& o) { write_chrome_trace(r, o); });
  files.stage(gz, [&](std::ostream& o) { write_chrome_trace(r, o); });
  files.commit();
  std::ifstream in(plain);
  const std::string expected(std::istreambuf_iterator<char>(in), {});
  gzFile f = gzopen(gz.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  std::string unpacked;
  char chunk[1 << 16];
  for (int n; (n = gzread(f, chunk, sizeof chunk)) > 0;) unpacked.append(chunk, n);
  gzclose(f);
  EXPECT_EQ(unpacked, expected);
  EXPECT_LT(std::filesystem::file_size(gz), expected.size() / 4);
  std::filesystem::remove(plain);
  std::filesystem::remove(gz);
}

// Names from input files cannot break the validation table: every row keeps its seven bars.
TEST(Report, ValidationTableCellsEscapeBars) {
  const std::string md =
      validation_markdown({{"a|b", "mfu", "log | one\ntwo", 0.5, 0.4, "v5e"}}, {});
  const size_t row = md.find("| a\\|b |");
  ASSERT_NE(row, std::string::npos) << md;
  const std::string line = md.substr(row, md.find('\n', row) - row);
  size_t bars = 0;
  for (size_t i = 0; i < line.size(); ++i)
    bars += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
  EXPECT_EQ(bars, 7u) << line;
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

// Two runs stage by stage, by hand: at 1 GHz, the first spends 3 us in "a" and 1 us in "b"
// (4 us, plus 1 us of dispatch); the second 1 us in "a" and 2 us in "c".
TEST(Report, StageDifferenceListsEveryStageOfEitherRun) {
  RunResult first, second;
  first.clock_hz = second.clock_hz = 1e9;
  first.items = {{.name = "k1", .stage = "a", .cycles = 2000},
                 {.name = "k2", .stage = "b", .cycles = 1000},
                 {.name = "k3", .stage = "a", .cycles = 1000}};
  first.cycles = 5000;
  first.time_s = 5e-6;
  second.items = {{.name = "k1", .stage = "a", .cycles = 1000},
                  {.name = "k4", .stage = "c", .cycles = 2000}};
  second.cycles = 4000;
  second.time_s = 4e-6;
  const std::vector<StageDifference> d = stage_difference(first, second);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0].stage, "a");
  EXPECT_DOUBLE_EQ(d[0].first_s, 3e-6);
  EXPECT_DOUBLE_EQ(d[0].second_s, 1e-6);
  EXPECT_DOUBLE_EQ(d[0].first_share, 0.6);
  EXPECT_DOUBLE_EQ(d[0].second_share, 0.25);
  EXPECT_DOUBLE_EQ(d[0].delta_s, -2e-6);
  EXPECT_EQ(d[1].stage, "b");
  EXPECT_DOUBLE_EQ(d[1].second_s, 0);
  EXPECT_DOUBLE_EQ(d[1].delta_s, -1e-6);
  EXPECT_EQ(d[2].stage, "c");
  EXPECT_DOUBLE_EQ(d[2].first_s, 0);
  EXPECT_DOUBLE_EQ(d[2].second_share, 0.5);
  EXPECT_EQ(d[3].stage, "total");
  EXPECT_DOUBLE_EQ(d[3].delta_s, -1e-6);
}

}  // namespace
}  // namespace tpusim
