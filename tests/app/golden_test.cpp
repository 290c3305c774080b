// The engine's results pinned: every catalog kernel at its defaults on every chip, every GDN build,
// and every scenario's step prediction, as the JSON the CLI writes (without the tool's version),
// compared byte for byte with tests/data/golden/. A speed-up of the engine must not move any of
// them. A model change that is meant to move them regenerates the files:
//   TPUSIM_UPDATE_GOLDEN=1 build/tests/app_tests --gtest_filter='Golden.*'
// and the diff of tests/data/golden/ shows what moved.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "app/report.h"
#include "app/scenario.h"
#include "app/step_report.h"
#include "kernels/catalog.h"
#include "models/chip_loader.h"
#include "sim/error.h"
#include "sim/timing/engine.h"

namespace tpusim {
namespace {

const std::string kGoldenDir = std::string(TPUSIM_SOURCE_DIR) + "/tests/data/golden/";

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Compares `j` with the golden file (or rewrites it when asked), line by line so a failure shows
// the first line that moved.
void expect_golden(const std::string& file, const nlohmann::json& j) {
  const std::string text = json_text(j, 1) + "\n", path = kGoldenDir + file;
  if (std::getenv("TPUSIM_UPDATE_GOLDEN")) {
    std::ofstream(path) << text;
    return;
  }
  const std::string golden = read_file(path);
  ASSERT_FALSE(golden.empty()) << "missing " << path << " (TPUSIM_UPDATE_GOLDEN=1 writes it)";
  if (golden == text) return;
  std::istringstream a(golden), b(text);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool ga = static_cast<bool>(std::getline(a, la)),
               gb = static_cast<bool>(std::getline(b, lb));
    if (!ga && !gb) break;
    if (la != lb || ga != gb) {
      ADD_FAILURE() << path << ":" << line << " golden: " << la << "\n now: " << lb;
      return;
    }
  }
}

// The timeline's events (every field, in order) folded into one number (FNV-1a), with their count.
nlohmann::json timeline_digest(const RunResult& r) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](int64_t v) {
    for (int b = 0; b < 8; ++b)
      h = (h ^ (static_cast<uint64_t>(v) >> (8 * b) & 0xff)) * 1099511628211ull;
  };
  for (const TimelineEvent& e : r.events) {
    for (int64_t v :
         {e.start, e.end, e.step, int64_t{e.unit}, int64_t{e.label}, int64_t{e.item}, int64_t{e.op},
          int64_t{e.body}, int64_t{e.operand}, static_cast<int64_t>(e.cause)})
      mix(v);
  }
  return {{"events", r.events.size()}, {"fnv1a", fmt::format("{:016x}", h)}};
}

// Every number of `now` within `rel` of its value in `golden` (relative to the larger of the two);
// reports the worst one over `floor` (an absolute slack for values that are noise-sized).
struct Deviation {
  double rel = 0;
  std::string path;
};

void expect_close(const nlohmann::json& golden, const nlohmann::json& now, double rel,
                  Deviation& worst, const std::string& path = "") {
  if (golden.is_object()) {
    for (const auto& [k, v] : golden.items()) {
      ASSERT_TRUE(now.contains(k)) << path << "/" << k;
      expect_close(v, now.at(k), rel, worst, path + "/" + k);
    }
  } else if (golden.is_array()) {
    ASSERT_EQ(golden.size(), now.size()) << path;
    for (size_t i = 0; i < golden.size(); ++i)
      expect_close(golden[i], now[i], rel, worst, path + "[" + std::to_string(i) + "]");
  } else if (golden.is_number()) {
    const double a = golden.get<double>(), b = now.get<double>();
    const double d = std::abs(a - b), scale = std::max(std::abs(a), std::abs(b));
    EXPECT_LE(d, rel * scale) << path;
    if (d > worst.rel * scale) worst = {d / scale, path};
  } else {
    EXPECT_EQ(golden, now) << path;
  }
}

nlohmann::json kernel_results() {
  nlohmann::json out = nlohmann::json::object();
  for (const std::string& chip_name : known_chips()) {
    const ChipSpec chip = load_chip(chip_name);
    for (const kernels::CatalogEntry& e : kernels::catalog()) {
      std::vector<kernels::KnobValues> settings{e.defaults()};
      for (const kernels::Knob& k : e.knobs)  // every GDN build, not only the default one
        if (k.name == "build")
          for (const std::string& b : k.choices)
            if (b != k.default_choice) {
              settings.push_back(e.defaults());
              settings.back().set("build", b);
            }
      for (const kernels::KnobValues& v : settings) {
        std::string key = chip_name + " " + e.name;
        if (v.has("build")) key += " " + v.choice("build");
        try {
          const Program p = e.program(chip, v);
          nlohmann::json j = result_json(simulate(chip, p), chip, {});
          j.erase("tool");
          j["timeline"] =
              timeline_digest(simulate(chip, p, {.record_timeline = true, .fast_forward = false}));
          out[key] = j;
        } catch (const Error& err) {
          out[key] = std::string("error: ") + err.what();
        }
      }
    }
  }
  return out;
}

// The golden files hold the full simulation: every grid step simulated.
class Golden : public ::testing::Test {
 protected:
  void SetUp() override { SimOptions::set_default_fast_forward(false); }
  void TearDown() override { SimOptions::set_default_fast_forward(true); }
};

TEST_F(Golden, EveryCatalogKernelOnEveryChip) { expect_golden("kernels.json", kernel_results()); }

nlohmann::json scenario_results() {
  nlohmann::json out = nlohmann::json::object();
  const std::string root = std::string(TPUSIM_SOURCE_DIR) + "/";
  for (const std::string& file :
       scenario_files({root + "scenarios/calibration", root + "scenarios/blind",
                       root + "scenarios/examples"})) {
    const Scenario s = load_scenario(file);
    StepPrediction p = predict_step(s.step);
    add_compiled(s, p);
    nlohmann::json j = step_json(s, p);
    j["batch_split"] = batch_split_json(s.step, batch_split(s.step, p));
    j.erase("tool");
    j.erase("file");
    out[file.substr(root.size())] = j;
  }
  return out;
}

TEST_F(Golden, EveryScenarioStep) { expect_golden("scenarios.json", scenario_results()); }

// The fast-forward (sim/timing/steady_state.h) against the full simulation the golden files hold:
// every number of every kernel and scenario within 0.1%.
TEST(FastForward, MatchesTheFullSimulationWithinATenthOfAPercent) {
  ASSERT_TRUE(SimOptions::default_fast_forward());
  Deviation kernels, scenarios;
  expect_close(nlohmann::json::parse(read_file(kGoldenDir + "kernels.json")), kernel_results(),
               1e-3, kernels);
  expect_close(nlohmann::json::parse(read_file(kGoldenDir + "scenarios.json")), scenario_results(),
               1e-3, scenarios);
  std::cout << "largest deviation from the full simulation: kernels " << kernels.rel << " at "
            << kernels.path << "; scenarios " << scenarios.rel << " at " << scenarios.path << "\n";
}

}  // namespace
}  // namespace tpusim
