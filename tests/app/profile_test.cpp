// A measured TPU profile (tests/data/profile, written by scripts/make_profile_test_data.py in
// jax.profiler's Perfetto form) read and matched per op to the compiled program it ran
// (tests/data/hlo/gdn_main_path); the sums are by hand from the script's durations.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "app/profile_calibration.h"
#include "app/profile_compare.h"
#include "app/profile_import.h"
#include "app/profile_structure.h"
#include "app/scenario.h"
#include "models/chip_loader.h"
#include "sim/timing/engine.h"
#include "tests/error_of.h"

namespace tpusim {
namespace {

using testing::error_of;

const std::string kData = std::string(TPUSIM_SOURCE_DIR) + "/tests/data/";
const std::string kTrace = kData + "profile/gdn_main_path_trace.json.gz";

std::string read_gzip(const std::string& path) {
  std::unique_ptr<gzFile_s, int (*)(gzFile)> f(gzopen(path.c_str(), "rb"), gzclose);
  std::string text;
  char buffer[1 << 14];
  for (int n; (n = gzread(f.get(), buffer, sizeof buffer)) > 0;) text.append(buffer, n);
  return text;
}

TEST(Profile, TheTpuDevicesLinesAreRead) {
  const Profile p = load_profile(kTrace);
  ASSERT_EQ(p.devices.size(), 1u);  // the host process is not a device
  const ProfileDevice& d = p.devices[0];
  EXPECT_EQ(d.name, "/device:TPU:0");
  EXPECT_EQ(d.steps.size(), 2u);
  EXPECT_EQ(d.modules.size(), 2u);
  EXPECT_EQ(d.ops.size(), 2u * (5 + 2 * 2 + 1));  // entry ops, the loop's twice, one stranger
  EXPECT_EQ(d.other_lines.at("Framework Ops"), 2);
  const nlohmann::json j = profile_summary_json(p);
  EXPECT_EQ(j["devices"][0]["ops"][0]["name"], "custom-call.2");  // largest first
  EXPECT_DOUBLE_EQ(j["devices"][0]["ops"][0]["total_us"].get<double>(), 200);
}

// The test profile matched to the compiled program it ran, simulated on v5e without dispatch.
struct Matched {
  Profile profile = load_profile(kTrace);
  HloProgram hlo = import_hlo(kData + "hlo/gdn_main_path");
  RunResult run = simulate(no_dispatch(load_chip("v5e")), hlo.program);
  ProfileComparison comparison = compare_profile(profile, 0, hlo, run);
  static ChipSpec no_dispatch(ChipSpec chip) {
    chip.host_dispatch_s = 0;
    return chip;
  }
};

TEST(Profile, OpsMatchTheProgramByInstructionNamePerStep) {
  const Matched m;
  const RunResult& r = m.run;
  const ProfileComparison& c = m.comparison;
  EXPECT_EQ(c.steps, 2);
  EXPECT_NEAR(c.measured_step_s, 151e-6, 1e-12);  // 10+12+100+8+2 + 2x3 + 2x4 + 5 us
  ASSERT_EQ(c.measured_only.size(), 1u);
  EXPECT_EQ(c.measured_only[0].name, "mystery.1");
  EXPECT_EQ(c.ops.size(), 7u);
  std::map<std::string, OpComparison> by;
  for (const OpComparison& o : c.ops) by[o.name] = o;
  // The solve's custom call is the program item of that name; a loop-body fusion runs twice a
  // step and is predicted over both calls.
  double invert = 0, body = 0;
  for (const ItemResult& item : r.items)
    if (item.name == "custom-call.2") invert += item.cycles / r.clock_hz;
  for (const KernelStats& k : r.kernels)
    if (k.name == "fusion.112") {
      body += k.cycles / r.clock_hz;
      EXPECT_EQ(k.calls, 2);
    }
  EXPECT_DOUBLE_EQ(by["custom-call.2"].predicted_s, invert);
  EXPECT_NEAR(by["custom-call.2"].measured_s, 100e-6, 1e-12);
  EXPECT_DOUBLE_EQ(by["fusion.112"].predicted_s, body);
  EXPECT_DOUBLE_EQ(by["fusion.112"].count_per_step, 2);
  EXPECT_EQ(by["custom-call.2"].op_class, "custom-call");
  // The scan's while loop: its body's two measured fusions, 3 + 4 us a trip, twice a step,
  // against the loop item as simulated.
  ASSERT_EQ(c.loops.size(), 1u);
  EXPECT_EQ(c.loops[0].name, "while.1");
  EXPECT_EQ(c.loops[0].trips, 2);
  EXPECT_NEAR(c.loops[0].measured_s, 14e-6, 1e-12);
  double loop = 0;
  for (const ItemResult& item : r.items)
    if (item.name == "while.1") loop += item.cycles / r.clock_hz;
  EXPECT_DOUBLE_EQ(c.loops[0].predicted_s, loop);
  // Every program item with time that the profile lacks is listed.
  EXPECT_FALSE(c.predicted_only.empty());
  const std::string csv = comparison_csv(c);
  EXPECT_NE(csv.find("mystery.1,fusion,measured_only,"), std::string::npos) << csv;
}

// The GUI's measured lane: the first step's 10 op executions, end to end from the simulated
// program's start as the script wrote them; each with one execution's prediction (the loop-body
// fusion's per-step prediction over its 2 calls), the stranger unmatched.
TEST(Profile, TheFirstStepsOpsLineUpWithTheSimulatedProgram) {
  const Matched m;
  const Profile& p = m.profile;
  const RunResult& r = m.run;
  const ProfileComparison& c = m.comparison;
  const std::vector<MeasuredSpan> spans = measured_spans(p, 0, c, r);
  ASSERT_EQ(spans.size(), 10u);
  const double start = r.items.front().start / r.clock_hz;
  double at = start, measured = 0;
  for (const MeasuredSpan& s : spans) {
    EXPECT_NEAR(s.start_s, at, 1e-12) << s.name;
    at += s.duration_s;
    measured += s.duration_s;
    EXPECT_EQ(s.matched, s.name != "mystery.1") << s.name;
  }
  EXPECT_NEAR(measured, 151e-6, 1e-12);
  for (const MeasuredSpan& s : spans) {
    if (s.name != "fusion.112") continue;
    const auto m = std::find_if(c.ops.begin(), c.ops.end(),
                                [](const OpComparison& o) { return o.name == "fusion.112"; });
    EXPECT_DOUBLE_EQ(s.predicted_s, m->predicted_s / 2);
  }
}

// Which constants the test profile would move: the solve's custom call alone depends on the row
// step's latency, and the value found predicts its measured 100 us; a constant no matched op
// depends on stays as recorded; the moved values go to the chip files only when asked.
TEST(Profile, CalibrateOnAProfileMovesTheConstantsItsOpsDependOn) {
  const Matched m;
  const ChipSpec chip = Matched::no_dispatch(load_chip("v5e"));
  const std::vector<ProfileConstantMove> moves = profile_constant_moves(m.profile, 0, m.hlo, chip);
  std::map<std::string, ProfileConstantMove> by;
  for (const ProfileConstantMove& x : moves) by[x.key] = x;
  const ProfileConstantMove& row = by.at("xla_row_solve_step_cycles");
  ASSERT_EQ(row.ops, std::vector<std::string>{"custom-call.2"});
  EXPECT_NEAR(row.measured_s, 100e-6, 1e-12);
  EXPECT_GT(row.moved, row.recorded);  // predicted 67 us: each row step takes longer
  EXPECT_NEAR(row.predicted_moved_s, 100e-6, 0.005 * 100e-6);
  EXPECT_TRUE(by.at("ici_efficiency").ops.empty());  // no collective in the program
  EXPECT_EQ(by.at("ici_efficiency").moved, by.at("ici_efficiency").recorded);
  const std::vector<CalibratedValue> values = moved_values(moves, "trace.json.gz");
  EXPECT_TRUE(std::any_of(values.begin(), values.end(), [](const CalibratedValue& v) {
    return v.key == "xla_row_solve_step_cycles" && v.integer;
  }));
}

TEST(Profile, WhatIsNotATpuTraceIsOneErrorNamingTheFile) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string host_only = (dir / "tpusim_profile_host_only.json").string();
  std::ofstream(host_only)
      << R"({"traceEvents": [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}}]})";
  EXPECT_NE(error_of([&] { load_profile(host_only); }).find("no device in the trace"),
            std::string::npos);
  const std::string broken = (dir / "tpusim_profile_broken.json").string();
  std::ofstream(broken) << "{\"traceEvents\": [";
  EXPECT_NE(error_of([&] {
              load_profile(broken);
            }).find("tpusim_profile_broken.json: not a Chrome trace JSON"),
            std::string::npos);
  EXPECT_NE(error_of([&] { load_profile(kData + "hlo"); }).find("no profile in it"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              load_profile(kData + "profile/run.xplane.pb");
            }).find("python -m tpusim_jax xplane-to-trace"),
            std::string::npos);
  const Matched m;
  EXPECT_NE(error_of([&] { compare_profile(m.profile, 3, m.hlo, m.run); }).find("no device 3"),
            std::string::npos);
}

// A real profile (scripts/make_cpu_profile.sh): jax.profiler on this machine's CPU over MaxText's
// GDN main path at 2 chunks, three steps. XLA's CPU runtime names each executed thunk after its
// HLO op on the host's threads, runs independent ones on other threads at the same time, and
// spans the scan's while loop over its iterations' ops.
TEST(Profile, ACpuProfileIsReadAsADevice) {
  const std::string path = kData + "profile/cpu_gdn_main_path.json.gz";
  const Profile p = load_profile(path);
  ASSERT_EQ(p.devices.size(), 1u);
  const ProfileDevice& d = p.devices[0];
  EXPECT_EQ(d.name, "/device:CPU:0");
  EXPECT_EQ(d.steps.size(), 3u);    // the StepTraceAnnotation spans
  ASSERT_EQ(d.modules.size(), 3u);  // one per run_id
  for (const ProfileEvent& m : d.modules) EXPECT_EQ(m.name, "jit_main_path");
  // Independently of the nesting: the raw file's thunks named by HLO op, the while loops set
  // apart (their spans are their iterations' ops and the gaps between them).
  double leaf_us = 0;
  size_t thunks = 0, loops = 0;
  const nlohmann::json raw = nlohmann::json::parse(read_gzip(path));
  for (const auto& e : raw["traceEvents"]) {
    if (!e.contains("args") || !e["args"].contains("hlo_op")) continue;
    ++thunks;
    if (e["name"].get<std::string>().rfind("while.", 0) == 0)
      ++loops;
    else
      leaf_us += e["dur"].get<double>();
  }
  EXPECT_EQ(d.ops.size(), thunks);
  EXPECT_EQ(loops, 3u);
  double table_us = 0;
  const nlohmann::json summary = profile_summary_json(p);
  for (const auto& op : summary["devices"][0]["ops"]) table_us += op["total_us"].get<double>();
  EXPECT_NEAR(table_us, leaf_us, 1e-6 * leaf_us);  // the op table's total is the ops' time
  for (const ProfileEvent& e : d.ops)
    if (e.parent >= 0) EXPECT_EQ(d.ops[e.parent].name, "while.1") << e.name;
  // Each module runs inside its step.
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_GE(d.modules[i].start_us, d.steps[i].start_us);
    EXPECT_LE(d.modules[i].end_us(), d.steps[i].end_us());
  }
}

// A profile directory as jax.profiler writes it: its one trace is read; two runs are one error.
TEST(Profile, AProfileDirectoryHoldsOneTrace) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "tpusim_profile_dir_test";
  fs::remove_all(dir);
  fs::create_directories(dir / "plugins/profile/run1");
  fs::copy_file(kData + "profile/cpu_gdn_main_path.json.gz",
                dir / "plugins/profile/run1/perfetto_trace.json.gz");
  std::ofstream(dir / "plugins/profile/run1/host.xplane.pb") << "not read";
  EXPECT_EQ(load_profile(dir.string()).devices.at(0).name, "/device:CPU:0");
  fs::create_directories(dir / "plugins/profile/run2");
  fs::copy_file(kTrace, dir / "plugins/profile/run2/perfetto_trace.json.gz");
  EXPECT_NE(error_of([&] { load_profile(dir.string()); }).find("holds 2 traces"),
            std::string::npos);
  fs::remove_all(dir);
}

// A training step of the 4-layer test model (tests/data/profile/small_step_trace.json.gz): per step
// the embedding 50 us and an all-gather 5 us, a forward loop of 4 trips (30 + 40 + 25 us of
// compute and a 2 us all-gather each), a backward loop of 4 (60 + 80 us and a 3 us
// reduce-scatter), the loss 30 us, a 2-trip loop of 5 us, the optimizer 20 us, 1 us idle after
// each of the 7 top-level ops: 1082 us.
const std::string kStepTrace = kData + "profile/small_step_trace.json.gz";

TEST(ProfileStructure, LoopsHoldTheirIterationsOps) {
  const Profile p = load_profile(kStepTrace);
  const std::vector<ProfileEvent>& ops = p.devices.at(0).ops;
  int loops = 0;
  for (const ProfileEvent& e : ops) {
    if (e.has_children) {
      ++loops;
      EXPECT_EQ(e.name.rfind("while.", 0), 0u) << e.name;
      EXPECT_EQ(e.parent, -1);
    }
    if (e.name == "fusion.30") EXPECT_EQ(ops.at(e.parent).name, "while.11");
    if (e.name == "fusion.60") EXPECT_EQ(e.parent, -1);
  }
  EXPECT_EQ(loops, 2 * 3);
  // A loop's time is its ops': the summary's totals add up to the ops' time once.
  const nlohmann::json j = profile_summary_json(p);
  double total = 0;
  for (const auto& op : j["devices"][0]["ops"]) total += op["total_us"].get<double>();
  EXPECT_DOUBLE_EQ(total, 2 * (1082.0 - 7));
  // The FLOP and byte annotations present, summed over the executions (2 steps x 4 trips).
  for (const auto& op : j["devices"][0]["ops"])
    if (op["name"] == "fusion.20") {
      EXPECT_DOUBLE_EQ(op["model_flops"].get<double>(), 8e6);
      EXPECT_DOUBLE_EQ(op["bytes_accessed"].get<double>(), 8 * 4096.0);
    } else {
      EXPECT_FALSE(op.contains("model_flops")) << op;
    }
}

TEST(ProfileStructure, AScenarioStepMatchesTheProfileByLoopsAndTheRest) {
  const Scenario sc = load_scenario(kData + "profile/small_step.yaml");
  const StepPrediction p = predict_step(sc.step);
  const StructureComparison c = compare_structure(load_profile(kStepTrace), 0, sc.step, p);
  EXPECT_EQ(c.steps, 2);
  EXPECT_EQ(c.layer_trips, 4);
  EXPECT_NEAR(c.measured_step_s, 1082e-6, 1e-12);
  std::map<std::string, StructureRow> by;
  double rows = 0;
  for (const StructureRow& r : c.rows) by[r.name] = r, rows += r.measured_s;
  ASSERT_EQ(c.measured_only.size(), 1u);
  EXPECT_EQ(c.measured_only[0].name, "loop while.50");
  EXPECT_EQ(c.measured_only[0].trips, 2);                                       // from its HLO text
  EXPECT_NEAR(rows + c.measured_only[0].measured_s, c.measured_step_s, 1e-12);  // nothing dropped
  EXPECT_NEAR(by.at("layer loop, forward").measured_s, 4 * 95e-6, 1e-12);
  EXPECT_NEAR(by.at("layer loop, backward (recompute included)").measured_s, 4 * 140e-6, 1e-12);
  EXPECT_NEAR(by.at("collectives in the layer loops (exposed)").measured_s, 4 * 5e-6, 1e-12);
  EXPECT_NEAR(by.at("outside the layer loops (embedding, loss, optimizer)").measured_s, 100e-6,
              1e-12);
  EXPECT_NEAR(by.at("collectives outside the layer loops").measured_s, 5e-6, 1e-12);
  EXPECT_NEAR(by.at("device idle between ops (host dispatch)").measured_s, 7e-6, 1e-12);
  // The predicted side is the step's parts: every part lands in one row.
  double fwd = 0, predicted = 0;
  for (const StepPart& part : p.parts) {
    if (part.name == "attention layer") fwd += part.count * part.forward_s;
    predicted += part.count * (part.compute_s + part.exposed_s);
  }
  EXPECT_DOUBLE_EQ(by.at("layer loop, forward").predicted_s, fwd);
  double rows_predicted = 0;
  for (const StructureRow& r : c.rows) rows_predicted += r.predicted_s;
  EXPECT_NEAR(rows_predicted, predicted, 1e-12 * predicted);
  EXPECT_NEAR(predicted, p.step_time_s, 1e-9 * predicted);
  for (size_t i = 1; i < c.rows.size(); ++i)  // largest absolute difference first
    EXPECT_GE(std::abs(c.rows[i - 1].predicted_s - c.rows[i - 1].measured_s),
              std::abs(c.rows[i].predicted_s - c.rows[i].measured_s));
}

// The first step as the GUI draws it under the predicted one: the two loops where they ran (after
// the embedding 50 us, the all-gather 5 us and 1 us gaps), the other top-level ops in their lanes.
TEST(ProfileStructure, TheFirstStepsSpansStartAtTheStep) {
  const Scenario sc = load_scenario(kData + "profile/small_step.yaml");
  const Profile profile = load_profile(kStepTrace);
  const StructureComparison c = compare_structure(profile, 0, sc.step, predict_step(sc.step));
  const std::vector<TraceSpan> spans = measured_step_spans(profile, 0, c);
  ASSERT_EQ(spans.size(), 7u);
  EXPECT_EQ(spans[0].part, "measured: outside loops");
  EXPECT_DOUBLE_EQ(spans[0].start_s, 0);
  EXPECT_EQ(spans[1].part, "measured: collectives");
  EXPECT_EQ(spans[2].part, "measured loop");
  EXPECT_EQ(spans[2].pass, "fwd");
  EXPECT_NEAR(spans[2].start_s, 57e-6, 1e-12);
  EXPECT_NEAR(spans[2].duration_s, 4 * 97e-6, 1e-12);
  EXPECT_EQ(spans[2].name.rfind("layer loop, forward: measured 95.00 us per trip, predicted", 0),
            0u)
      << spans[2].name;
  EXPECT_EQ(spans[3].pass, "bwd");
  EXPECT_EQ(spans[5].part, "measured: other loops");
  EXPECT_EQ(spans[5].name, "while.50 (10.00 us)");
}

// A profile without loop spans (the per-op test trace) cannot be split into layer loops: its ops
// count as outside them, and the report says why.
TEST(ProfileStructure, WithoutLoopSpansTheStepIsOneBlockAndSaysSo) {
  const Scenario sc = load_scenario(kData + "profile/small_step.yaml");
  const StepPrediction p = predict_step(sc.step);
  const StructureComparison c = compare_structure(load_profile(kTrace), 0, sc.step, p);
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_NE(c.notes[0].find("2 of 2 steps have no forward and backward loop of 4 trips"),
            std::string::npos);
  for (const StructureRow& r : c.rows)
    if (r.name.rfind("layer loop", 0) == 0) EXPECT_EQ(r.measured_s, 0);
  EXPECT_NE(
      error_of([&] { compare_structure(load_profile(kTrace), 1, sc.step, p); }).find("no device 1"),
      std::string::npos);
}

}  // namespace
}  // namespace tpusim
