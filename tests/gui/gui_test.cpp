// The GUI under Xvfb in headless mode: the screenshot has the window's size and the timeline area
// is drawn (pixels that are not background); a bad scenario file is shown as an error, no crash;
// scripted input (--script) zooms, pans, resets and hovers.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#define STB_IMAGE_IMPLEMENTATION
#include <stb/stb_image.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "app/scenario.h"
#include "app/step_structure.h"
#include "gui/step_timeline.h"
#include "gui/timeline_view.h"
#include "kernels/gdn/scan.h"
#include "models/chip_loader.h"
#include "sim/timing/engine.h"

namespace {

namespace fs = std::filesystem;

struct Png {
  int w = 0, h = 0;
  std::vector<unsigned char> px;
  std::string log;  // what the GUI printed
};

Png load_png(const fs::path& file) {
  Png p;
  int n = 0;
  unsigned char* data = stbi_load(file.string().c_str(), &p.w, &p.h, &n, 3);
  if (data) {
    p.px.assign(data, data + static_cast<size_t>(p.w) * p.h * 3);
    stbi_image_free(data);
  }
  return p;
}

Png screenshot(const std::string& args, int* status) {
  const fs::path dir =
      fs::temp_directory_path() /
      ("tpusim_gui_" +
       std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  fs::create_directories(dir);
  // A fresh log and picture per call: xvfb-run's X server may still hold the previous call's log
  // open and write into it at its old offset while it shuts down.
  static int call = 0;
  ++call;
  const fs::path out = dir / fmt::format("shot{}.png", call);
  const fs::path log_file = dir / fmt::format("log{}", call);
  fs::remove(out);
  // The X authority file in the test's folder: without one xvfb-run makes a temporary folder of
  // its own, sometimes cannot remove it at exit and then exits 5 whatever the GUI returned (a
  // sanitizer CI run failed on it).
  const std::string cmd =
      fmt::format("xvfb-run -a -f {} -s '-screen 0 1600x1000x24' {} {} --screenshot {} >{} 2>&1",
                  (dir / "xauthority").string(), TPUSIM_GUI, args, out.string(), log_file.string());
  const int raw = std::system(cmd.c_str());
  *status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  Png p = load_png(out);
  std::ifstream log(log_file);
  p.log.assign(std::istreambuf_iterator<char>(log), {});
  return p;
}

// Coloured (non-grey) pixels in a region: the timeline's lanes are coloured, the background and
// text are grey. 10,000 is about one lane drawn across the plot (1,460 x 7 px); an empty timeline
// stays below 1,000 (ImpossibleKnobIsAnErrorInTheWindow).
constexpr int kDrawn = 10000;

// Pixels of [x0, x1) x [y0, y1) whose colour passes `test(r, g, b)`.
template <typename Test>
int count_pixels(const Png& p, int x0, int y0, int x1, int y1, Test test) {
  int n = 0;
  for (int y = y0; y < std::min(y1, p.h); ++y)
    for (int x = x0; x < std::min(x1, p.w); ++x) {
      const unsigned char* c = &p.px[(static_cast<size_t>(y) * p.w + x) * 3];
      n += test(c[0], c[1], c[2]);
    }
  return n;
}

int coloured_pixels(const Png& p, int x0, int y0, int x1, int y1) {
  return count_pixels(p, x0, y0, x1, y1, [](int r, int g, int b) {
    return std::max({r, g, b}) - std::min({r, g, b}) > 40;
  });
}

// Pixels of the error text's red.
int red_pixels(const Png& p, int x0, int y0, int x1, int y1) {
  return count_pixels(p, x0, y0, x1, y1,
                      [](int r, int g, int b) { return r > 200 && g < 140 && b < 140; });
}

// Light text pixels (a tooltip's, a table's).
int light_pixels(const Png& p, int x0, int y0, int x1, int y1) {
  return count_pixels(p, x0, y0, x1, y1,
                      [](int r, int g, int b) { return r > 180 && g > 180 && b > 180; });
}

// Pixels of the program lane's first item colour.
int item_pixels(const Png& p, int x0, int y0, int x1, int y1) {
  return count_pixels(p, x0, y0, x1, y1,
                      [](int r, int g, int b) { return r == 90 && g == 115 && b == 160; });
}

TEST(Gui, HeadlessScreenshotDrawsTheTimeline) {
  int status = -1;
  const Png p = screenshot("--kernel gdn-scan-fwd --head-tile-fwd 8 --seq 1024", &status);
  ASSERT_EQ(status, 0);
  ASSERT_EQ(p.w, 1600);
  ASSERT_EQ(p.h, 1000);
  // The timeline occupies the lower part of the window, right of the lane labels.
  EXPECT_GT(coloured_pixels(p, 120, 380, 1580, 640), kDrawn);
}

TEST(Gui, CompareDrawsBothSchedulesOnOneAxis) {
  // The ladder alone fills the upper timeline; compared with the solve, a second timeline of the
  // same lanes appears below it, on the same cycle axis.
  int status = -1;
  const Png alone = screenshot("--kernel gdn-invert --seq 1024", &status);
  ASSERT_EQ(status, 0);
  const Png both =
      screenshot("--kernel gdn-invert --compare gdn-solve-triangular --seq 1024", &status);
  ASSERT_EQ(status, 0);
  ASSERT_EQ(both.w, 1600);
  ASSERT_EQ(both.h, 1000);
  EXPECT_LT(coloured_pixels(alone, 120, 660, 1580, 840), 1000);
  EXPECT_GT(coloured_pixels(both, 120, 660, 1580, 840), kDrawn);
  // One axis: the solve runs ~6.6x longer, so the ladder's lanes end in the left fifth.
  EXPECT_LT(coloured_pixels(both, 420, 440, 1580, 580), 1000);
  EXPECT_GT(coloured_pixels(alone, 420, 440, 1580, 580), kDrawn);
}

TEST(Gui, StepPanelShowsPredictedAgainstMeasured) {
  int status = -1;
  const Png p = screenshot(std::string(TPUSIM_SOURCE_DIR) +
                               "/scenarios/calibration/c1/c1_ladder.yaml --kernel gdn-invert "
                               "--seq 1024",
                           &status);
  ASSERT_EQ(status, 0);
  EXPECT_NE(p.log.find("step panel: 2 predicted-against-measured rows, 5 parts split by batch"),
            std::string::npos)
      << p.log;
  // The same file run in another build: a slower step, and no comparison with measurements that
  // belong to the file's build.
  const Png main = screenshot(std::string(TPUSIM_SOURCE_DIR) +
                                  "/scenarios/calibration/c1/c1_ladder.yaml --step-build main "
                                  "--kernel gdn-invert --seq 1024",
                              &status);
  ASSERT_EQ(status, 0);
  EXPECT_NE(main.log.find("step panel: 0 predicted-against-measured rows"), std::string::npos)
      << main.log;
  // A scenario with a compiled step shows the TPU compiler's peak beside tpusim's.
  const Png compiled = screenshot(std::string(TPUSIM_SOURCE_DIR) +
                                      "/tests/data/compiled/small.yaml --kernel gdn-invert "
                                      "--seq 1024",
                                  &status);
  ASSERT_EQ(status, 0);
  EXPECT_NE(compiled.log.find("compiler's peak: 944.90 MiB"), std::string::npos) << compiled.log;
  auto step_s = [](const std::string& log) {
    return std::stod(log.substr(log.find(", step ") + 7));
  };
  EXPECT_GT(step_s(main.log), 1.2 * step_s(p.log));
}

TEST(Gui, TooltipsNameTheShapesOfOpsAndBlocks) {
  namespace g = tpusim::kernels::gdn;
  const g::GdnShape s{.batch = 1, .seq = 1024, .heads = 32, .dk = 128, .dv = 128, .chunk = 128};
  tpusim::Program p;
  p.add_kernel(g::scan_forward(s, {8}));
  // The shapes of the recorded events with these labels (every such event names the same).
  const tpusim::RunResult r =
      tpusim::simulate(tpusim::load_chip("v5e"), p, {.record_timeline = true});
  auto shapes = [&](const std::string& label) {
    std::set<std::string> found;
    for (const tpusim::TimelineEvent& e : r.events)
      if (r.labels[e.label] == label) found.insert(tpusim::gui::event_shapes(p, e));
    return found.size() == 1 ? *found.begin() : fmt::format("{} kinds", found.size());
  };
  EXPECT_EQ(shapes("[q_g; w] @ h"), "[8,256,128] bf16, [8,128,128] bf16 -> [8,256,128] f32");
  EXPECT_EQ(shapes("fetch h_saved"), "0 kinds");  // an output is written, never fetched
  EXPECT_EQ(shapes("write h_saved"), "block [1,1,8,128,128] of [1,8,32,128,128] f32");
  tpusim::TimelineEvent other = r.events.front();
  other.item = 1;
  EXPECT_EQ(tpusim::gui::event_shapes(p, other), "");  // no such item
}

// A bad flag stops the GUI before it opens a window, with one line naming the flag and what it
// takes (no display needed).
TEST(Gui, BadFlagsNameTheFlagAndItsValues) {
  const std::pair<const char*, const char*> cases[] = {
      {"--build nope", "--build: nope not in {main,scan,heads,ladder,doubling}"},
      {"--seq 0", "--seq: 0 is outside 1..16777216"},
      {"--chip v9",
       "--chip: unknown chip 'v9' (known chips: v5e, v5p, v6e; or a path to a .yaml file)"},
      {"--compare nope", "--compare: unknown kernel 'nope' (known: "},
      {"--step-build x", "--step-build: x not in {main,scan,heads,ladder,doubling}"},
      {"--head-tile-fwd -1", "--head-tile-fwd: -1 is outside 0..1024"},
  };
  const fs::path log = fs::temp_directory_path() / "tpusim_gui_bad_flag.log";
  for (const auto& [flags, message] : cases) {
    const int raw = std::system(
        fmt::format("{} --kernel gdn-layer {} >{} 2>&1", TPUSIM_GUI, flags, log.string()).c_str());
    EXPECT_EQ(WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, 2) << flags;
    std::ifstream in(log);
    const std::string text(std::istreambuf_iterator<char>(in), {});
    EXPECT_EQ(text.rfind(std::string("tpusim-gui: error: ") + message, 0), 0u) << text;
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  }
}

// Plays `steps` (gui/script.h) with `args`; the screenshot steps name shotN.png in `dir`.
int play(const fs::path& dir, const std::string& steps, const std::string& args, std::string* log) {
  fs::create_directories(dir);
  std::ofstream(dir / "script.txt") << steps;
  const std::string cmd = fmt::format(
      "cd {} && xvfb-run -a -f xauthority -s '-screen 0 1600x1000x24' {} {} --script script.txt "
      ">log 2>&1",
      dir.string(), TPUSIM_GUI, args);
  const int raw = std::system(cmd.c_str());
  std::ifstream in(dir / "log");
  log->assign(std::istreambuf_iterator<char>(in), {});
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
}

TEST(Gui, BadScenarioShowsAnErrorAndDoesNotCrash) {
  const fs::path bad = fs::temp_directory_path() / "tpusim_gui_bad_scenario.yaml";
  std::ofstream(bad)
      << "chip: v5e\nchips: 256\nmodel: maxtext-16b\nseq: 2048\nbatch_per_chip: 6\nwat: 1\n";
  int status = -1;
  const Png p = screenshot(bad.string() + " --kernel gdn-invert --seq 1024", &status);
  EXPECT_EQ(status, 2);  // the screenshot is written, and the exit status reports the failure
  EXPECT_NE(p.log.find("tpusim-gui: error: "), std::string::npos) << p.log;
  ASSERT_EQ(p.w, 1600);
  EXPECT_GT(red_pixels(p, 340, 0, 1590, 330), 100);   // the file's error is in the window
  EXPECT_GT(red_pixels(p, 10, 370, 1590, 420), 100);  // and in its training step's tab
  // The kernel of the knobs still ran and draws in its own tab.
  std::string log;
  const fs::path dir = fs::temp_directory_path() / "tpusim_gui_bad_scenario_kernel";
  EXPECT_EQ(play(dir, "click 175 359\nwait 3\nscreenshot kernel.png\n",
                 bad.string() + " --kernel gdn-invert --seq 1024", &log),
            0)
      << log;
  EXPECT_GT(coloured_pixels(load_png(dir / "kernel.png"), 120, 420, 1580, 640), kDrawn);
}

TEST(Gui, ImpossibleKnobIsAnErrorInTheWindow) {
  int status = -1;
  const Png p =
      screenshot("--kernel gdn-scan-bwd --head-tile-bwd 8", &status);  // over v5e's 16 MiB VMEM
  EXPECT_EQ(status, 2);
  ASSERT_EQ(p.w, 1600);
  // No timeline (under the find field and the critical-path box), but the red error text in the
  // totals panel.
  EXPECT_LT(coloured_pixels(p, 120, 395, 1580, 640), 1000);
  EXPECT_GT(red_pixels(p, 340, 0, 1590, 330), 100);
}

// A program exported from JAX opens as the shown kernel (docs/jax_bridge.md): y = 2x + 1 over
// [4096, 512] f32 in row blocks, then a row sum, written as the bridge writes it.
TEST(Gui, ImportedProgramIsShownAsTheKernel) {
  const fs::path file = fs::temp_directory_path() / "tpusim_gui_program.json";
  std::ofstream(file) << R"({"format": "tpusim-program", "version": 1, "name": "affine",
 "items": [{"kernel": {"name": "two_x_plus_one", "origin": "pallas", "grid": [8],
  "semantics": ["parallel"],
  "inputs": [{"name": "x", "shape": [4096, 512], "dtype": "f32", "block": [512, 512],
              "index_map": [{"offset": 0, "coeff": [1]}, {"offset": 0, "coeff": [0]}]}],
  "outputs": [{"name": "y", "shape": [4096, 512], "dtype": "f32", "block": [512, 512],
               "index_map": [{"offset": 0, "coeff": [1]}, {"offset": 0, "coeff": [0]}]}],
  "scratch": [],
  "ops": [{"op": "elementwise", "fn": "mul", "in": [0], "scalar": 2.0, "out": 2},
          {"op": "elementwise", "fn": "add", "in": [2], "scalar": 1.0, "out": 3},
          {"op": "copy", "in": [3], "into": 1}]}}],
 "outputs": ["y"]})";
  int status = -1;
  // The kernel starts after v5e's host dispatch (about 106 us).
  const Png p = screenshot(file.string() + " --window-us 100 140", &status);
  EXPECT_EQ(status, 0) << p.log;
  ASSERT_EQ(p.w, 1600);
  EXPECT_GT(coloured_pixels(p, 120, 380, 1580, 640), kDrawn);
  // No error line where the totals start (the stall bar under it is red with DMA waits).
  EXPECT_LT(red_pixels(p, 340, 10, 1590, 28), 100);
}

// The window before and after `steps` (gui/script.h) played with `args`, in a fresh folder.
std::pair<Png, Png> before_and_after(const std::string& name, const std::string& steps,
                                     const std::string& args) {
  const fs::path dir = fs::temp_directory_path() / name;
  fs::remove_all(dir);
  std::string log;
  EXPECT_EQ(
      play(dir, "screenshot before.png\n" + steps + "\nwait 3\nscreenshot after.png\n", args, &log),
      0)
      << log;
  return {load_png(dir / "before.png"), load_png(dir / "after.png")};
}

// The timeline's lanes and ruler (not the header line, whose drawing time varies).
bool same_timeline(const Png& a, const Png& b) {
  if (a.w != b.w || a.h != b.h || a.px.empty()) return false;
  const size_t row = static_cast<size_t>(a.w) * 3;
  for (int y = 365; y < 640; ++y)
    if (!std::equal(a.px.begin() + y * row, a.px.begin() + (y + 1) * row, b.px.begin() + y * row))
      return false;
  return true;
}

// Perfetto's keys over the timeline: W zooms in at the cursor, A and D pan by a fifth and undo
// each other, R shows the whole run again; hovering shows the event's tooltip.
TEST(Gui, ScriptedKeysZoomPanAndResetTheTimeline) {
  const fs::path dir = fs::temp_directory_path() / "tpusim_gui_script";
  fs::remove_all(dir);
  std::string log;
  const int status =
      play(dir, R"(# the timeline at its start, zoomed in, panned there and back, reset
screenshot shot0.png
move 800 600
key W
key W
key W
screenshot shot1.png
key A
key D
screenshot shot2.png
key R
move 5 995
screenshot shot3.png
move 800 421
wait 2
screenshot shot4.png
)",
           "--kernel gdn-scan-fwd", &log);
  ASSERT_EQ(status, 0) << log;
  std::vector<Png> shots;
  for (int i = 0; i < 5; ++i) shots.push_back(load_png(dir / fmt::format("shot{}.png", i)));
  ASSERT_EQ(shots[0].w, 1600);
  EXPECT_FALSE(same_timeline(shots[0], shots[1]));  // zoomed
  EXPECT_TRUE(same_timeline(shots[1], shots[2]));   // A then D: where it was
  EXPECT_TRUE(same_timeline(shots[0], shots[3]));   // R: the whole run, as at the start
  // The mouse over the program lane shows the kernel call's tooltip below-right of it: light
  // text pixels there that the same frame without the mouse does not have.
  EXPECT_GT(
      light_pixels(shots[4], 820, 430, 1300, 520) - light_pixels(shots[3], 820, 430, 1300, 520),
      300);
}

// The program's items get a lane of their own above the units: the kernel call is one box, in
// the first item's colour, from the end of the host dispatch to the end of the run.
TEST(Gui, TheProgramLaneDrawsEachItemAsABox) {
  int status = -1;
  const Png p = screenshot("--kernel gdn-scan-fwd", &status);
  ASSERT_EQ(status, 0) << p.log;
  EXPECT_GT(item_pixels(p, 100, 360, 1590, 430),
            15000);  // about 1,200 px of the plot's width x 16 px
}

// Comparing the scan build with the heads build, each with its own tiles: clicking "per stage"
// opens the table of both runs' stages and their difference under the totals.
TEST(Gui, ClickingPerStageOpensTheDifferenceTable) {
  const auto [closed, open] =
      before_and_after("tpusim_gui_compare_table", "click 380 56",
                       "--kernel gdn-layer --build scan --compare gdn-layer --compare-build heads");
  ASSERT_EQ(open.w, 1600);
  // About 16 rows of six numbers where the stall bar and utilisation lines were.
  EXPECT_GT(light_pixels(open, 360, 70, 1000, 330),
            light_pixels(closed, 360, 70, 1000, 330) + 3000);
}

// --font-scale grows the text and the lanes with it: the program lane's box is half as tall again.
TEST(Gui, FontScaleGrowsTheLanes) {
  int status = -1;
  const Png normal = screenshot("--kernel gdn-scan-fwd", &status);
  ASSERT_EQ(status, 0) << normal.log;
  const Png large = screenshot("--kernel gdn-scan-fwd --font-scale 1.5", &status);
  ASSERT_EQ(status, 0) << large.log;
  const double ratio = static_cast<double>(item_pixels(large, 100, 300, 1590, 1000)) /
                       item_pixels(normal, 100, 300, 1590, 1000);
  EXPECT_GT(ratio, 1.3);  // 24 px of box height against 16, over a plot a little narrower
  EXPECT_LT(ratio, 1.6);
}

// Finding ops by name: typing "fetch" in the find field leaves the DMA fetches coloured and dims
// the MXU's products; Enter centres the view on the next fetch.
TEST(Gui, FindDimsWhatDoesNotMatch) {
  const fs::path dir = fs::temp_directory_path() / "tpusim_gui_find";
  fs::remove_all(dir);
  std::string log;
  ASSERT_EQ(
      play(dir, "screenshot all.png\nclick 120 377\ntype fetch\nwait 3\nscreenshot found.png\n",
           "--kernel gdn-scan-fwd --window-us 300 306", &log),
      0)
      << log;
  const Png all = load_png(dir / "all.png"), found = load_png(dir / "found.png");
  ASSERT_EQ(found.w, 1600);
  const int mxu_lanes[] = {110, 480, 1590, 545}, dma_lanes[] = {110, 600, 1590, 665};
  auto coloured = [](const Png& p, const int(&r)[4]) {
    return coloured_pixels(p, r[0], r[1], r[2], r[3]);
  };
  EXPECT_GT(coloured(all, mxu_lanes), 2000);
  EXPECT_LT(coloured(found, mxu_lanes), 100);
  EXPECT_GT(coloured(found, dma_lanes), 2000);
}

TEST(Gui, AMalformedScriptIsOneLineNamingItsLine) {
  const fs::path dir = fs::temp_directory_path() / "tpusim_gui_bad_script";
  fs::remove_all(dir);
  std::string log;
  EXPECT_EQ(play(dir, "move 1 2\nkey WW\n", "", &log), 2);
  EXPECT_EQ(log, "tpusim-gui: error: script.txt:2: key 'WW': expected a letter or digit\n");
  EXPECT_EQ(play(dir, "jump 1 2\n", "", &log), 2);
  EXPECT_NE(log.find("script.txt:1: unknown step 'jump'"), std::string::npos) << log;
}

}  // namespace

// Pixels that differ between two pictures in a region.
int differing_pixels(const Png& a, const Png& b, int x0, int y0, int x1, int y1) {
  int n = 0;
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x) {
      const size_t i = (static_cast<size_t>(y) * a.w + x) * 3;
      n += !std::equal(a.px.begin() + i, a.px.begin() + i + 3, b.px.begin() + i);
    }
  return n;
}

// Opening C1's ladder scenario shows its training step: a lane per layer kind and pass. A click
// on a span (layers 0-2's GDN forward) shows that pass's kernels on the timeline under it, a
// click on a kernel's box its grid steps.
TEST(Gui, AScenarioOpensOnItsStepTimelineAndDrillsDown) {
  const fs::path dir = fs::temp_directory_path() / "tpusim_gui_step_timeline";
  std::string log;
  ASSERT_EQ(play(dir,
                 "screenshot step.png\nclick 200 439\nwait 3\nscreenshot layer.png\n"
                 "click 800 662\nwait 3\nscreenshot kernel.png\n",
                 std::string(TPUSIM_SOURCE_DIR) + "/scenarios/calibration/c1/c1_ladder.yaml", &log),
            0)
      << log;
  const Png step = load_png(dir / "step.png"), layer = load_png(dir / "layer.png"),
            kernel = load_png(dir / "kernel.png");
  ASSERT_EQ(step.w, 1600);
  EXPECT_GT(coloured_pixels(step, 200, 410, 1590, 600), kDrawn);  // the step's lanes
  const size_t opened = log.find("step timeline: opened 'layer ");
  ASSERT_NE(opened, std::string::npos) << log;
  EXPECT_NE(log.find(" gdn fwd': ", opened), std::string::npos) << log;
  EXPECT_NE(log.find(" kernels of gdn layer / fwd\n", opened), std::string::npos) << log;
  EXPECT_NE(log.find("kernel timeline: opened '"), std::string::npos) << log;
  // Each click changes the drill-down timeline under the step's lanes.
  EXPECT_GT(differing_pixels(step, layer, 100, 650, 1590, 900), 20000);
  EXPECT_GT(differing_pixels(layer, kernel, 100, 650, 1590, 900), 20000);
}

// The step timeline's lanes: a lane per layer kind and pass, forward before recompute before
// backward, collectives and the optimizer last; a span's drill-down window holds exactly the
// simulated items of its part and pass.
TEST(Gui, StepLanesGroupByKindAndPassAndOpenTheirKernels) {
  const tpusim::Scenario s = tpusim::load_scenario(std::string(TPUSIM_SOURCE_DIR) +
                                                   "/scenarios/calibration/c1/c1_ladder.yaml");
  const tpusim::StepPrediction p = tpusim::predict_step(s.step);
  const std::vector<tpusim::TraceSpan> spans = tpusim::step_structure(s.step, p);
  const std::vector<std::string> lanes = tpusim::gui::step_lanes(spans);
  auto at = [&](const std::string& lane) {
    return std::find(lanes.begin(), lanes.end(), lane) - lanes.begin();
  };
  ASSERT_EQ(lanes.front(), "host dispatch");
  EXPECT_EQ(lanes.back(), "optimizer");
  EXPECT_LT(at("gdn layer forward"), at("attention layer recompute"));
  EXPECT_LT(at("gdn layer recompute"), at("gdn layer backward"));
  EXPECT_LT(at("attention layer backward"), at("ICI collectives (exposed)"));
  EXPECT_LT(at("ICI collectives (exposed)"), static_cast<long>(lanes.size()));
  const tpusim::RunResult r = tpusim::simulate(s.step.chip, tpusim::one_of_each_part(s.step));
  for (const tpusim::TraceSpan& span : spans) {
    const tpusim::gui::StageWindow w = tpusim::gui::stage_window(r, span);
    if (span.part.empty() || span.pass.empty()) {  // not simulated kernel by kernel
      EXPECT_EQ(w.items, 0) << span.name;
      continue;
    }
    int items = 0;
    for (const tpusim::ItemResult& item : r.items)
      if (item.stage.starts_with(span.part + " / " + span.pass + ":")) {
        ++items;
        EXPECT_GE(item.start, w.from);
        EXPECT_LE(item.start + item.cycles, w.to);
      }
    EXPECT_GT(items, 0) << span.name;
    EXPECT_EQ(w.items, items) << span.name;
  }
}

// The scan's chain made visible: ticking "critical path" over a few of gdn-scan-fwd's grid steps
// draws arrows and outlines (white) across the lanes, and names the path's time by cause.
TEST(Gui, TheScanKernelsCriticalPathIsDrawn) {
  const auto [off, on] = before_and_after("tpusim_gui_critical_path", "click 312 377",
                                          "--kernel gdn-scan-fwd --window-us 120 124");
  ASSERT_EQ(on.w, 1600);
  auto white = [](const Png& p) {
    return count_pixels(p, 110, 430, 1590, 690,
                        [](int r, int g, int b) { return r > 230 && g > 230 && b > 230; });
  };
  // Off, the white pixels are the ruler's and lanes' labels (about 2,000); the outlines and
  // arrows of the ~30 path ops in view add about 1,800.
  EXPECT_GT(white(on), white(off) + 1000);
  // The line naming the path's causes sits above the lanes.
  EXPECT_GT(light_pixels(on, 10, 388, 1300, 404), light_pixels(off, 10, 388, 1300, 404) + 500);
}

// "Why is this slow?" for the scan forward at batch 1: the share that is one chain of dependent
// ops (its critical path by cause), and what doubling the batch would cost.
TEST(Gui, WhySlowNamesTheChainAndWhatBatchingBuys) {
  int status = -1;
  const Png p = screenshot("--kernel gdn-scan-fwd", &status);
  ASSERT_EQ(status, 0) << p.log;
  EXPECT_NE(p.log.find("% of the run is one chain of dependent ops: critical path "),
            std::string::npos)
      << p.log;
  const size_t batch = p.log.find("why: batching: at batch 1 the run takes ");
  ASSERT_NE(batch, std::string::npos) << p.log;
  EXPECT_NE(p.log.find("each sample adds", batch), std::string::npos) << p.log;
}

// The program row's box in rows [y0, y1): its leftmost and rightmost item-coloured columns.
std::pair<int, int> item_box(const Png& p, int y0, int y1) {
  int left = p.w, right = -1;
  for (int y = y0; y < y1; ++y)
    for (int x = 100; x < p.w - 20; ++x)
      if (item_pixels(p, x, y, x + 1, y + 1)) left = std::min(left, x), right = std::max(right, x);
  return {left, right};
}

// The scan forward on v5e against itself on v6e: one time axis, so both calls start after the
// same host dispatch (0.1 ms, at the same x), and v6e's ends first; on a shared cycle axis
// v6e's faster clock would push its start right by ~40 px. A bad --compare-chip names the flag.
TEST(Gui, CompareOnAnotherChipSharesTheTimeAxis) {
  int status = -1;
  const Png p =
      screenshot("--kernel gdn-scan-fwd --compare gdn-scan-fwd --compare-chip v6e", &status);
  ASSERT_EQ(status, 0) << p.log;
  const auto [first_left, first_right] = item_box(p, 430, 445);
  const auto [v6e_left, v6e_right] = item_box(p, 768, 783);
  ASSERT_GT(first_right, 0);
  ASSERT_GT(v6e_right, 0);
  EXPECT_NEAR(v6e_left, first_left, 3);
  EXPECT_LT(v6e_right, first_right - 300);
  const Png bad =
      screenshot("--kernel gdn-scan-fwd --compare gdn-scan-fwd --compare-chip v9", &status);
  EXPECT_EQ(status, 2);
  EXPECT_EQ(bad.log.rfind("tpusim-gui: error: --compare-chip: ", 0), 0u) << bad.log;
}

// Two scenarios: C1's ladder build with its main build under it, each step as its own file
// predicts it (the main build is the slower one, as `tpusim validate` says); a compared file
// that does not load is one line naming the flag.
TEST(Gui, CompareTwoScenariosDrawsBothSteps) {
  const std::string c1 = std::string(TPUSIM_SOURCE_DIR) + "/scenarios/calibration/c1/";
  int status = -1;
  const Png p =
      screenshot(c1 + "c1_ladder.yaml --compare-scenario " + c1 + "c1_main.yaml", &status);
  ASSERT_EQ(status, 0) << p.log;
  const size_t at = p.log.find("compared step: c1-main ");
  ASSERT_NE(at, std::string::npos) << p.log;
  const double compared = std::stod(p.log.substr(at + 23));
  const double first = std::stod(p.log.substr(p.log.find(", step ") + 7));
  EXPECT_GT(compared, 1.2 * first);
  // The compared step's lanes under the first's.
  EXPECT_GT(coloured_pixels(p, 200, 650, 1590, 840), kDrawn);
  const Png bad = screenshot(c1 + "c1_ladder.yaml --compare-scenario /nonexistent.yaml", &status);
  EXPECT_EQ(status, 2);
  EXPECT_EQ(bad.log.rfind("tpusim-gui: error: --compare-scenario: ", 0), 0u) << bad.log;
}

// The file browser: "open scenario..." lists the folder's scenario files; a click on one runs its
// training step.
TEST(Gui, TheFileBrowserOpensAScenario) {
  const fs::path dir = fs::temp_directory_path() / "tpusim_gui_browser";
  fs::remove_all(dir);
  fs::create_directories(dir);
  // Without its compiled step, whose path is relative to the scenario's own folder.
  std::ifstream in(std::string(TPUSIM_SOURCE_DIR) + "/scenarios/calibration/c1/c1_ladder.yaml");
  std::ofstream out(dir / "ladder.yaml");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("compiled:", 0) != 0) out << line << "\n";
  out.close();
  std::string log;
  // The button, then the second row of the list ("../" is the first).
  ASSERT_EQ(
      play(dir, "click 75 41\nwait 3\nclick 130 98\nwait 3\nscreenshot opened.png\n", "", &log), 0)
      << log;
  EXPECT_NE(log.find("step panel: 2 predicted-against-measured rows"), std::string::npos) << log;
}

// A knob change re-simulates: the scan forward at head tile 1, then 2 after a click on the knob's
// "+": a different time.
TEST(Gui, AKnobChangeSimulatesAgain) {
  const fs::path dir = fs::temp_directory_path() / "tpusim_gui_knob";
  std::string log;
  ASSERT_EQ(play(dir, "click 156 295\nwait 3\nscreenshot changed.png\n",
                 "--kernel gdn-scan-fwd --head-tile-fwd 1", &log),
            0)
      << log;
  std::vector<double> times;
  const std::string first_line = " ms; the critical TensorCore is busy";  // each run's first
  for (size_t at = log.find(first_line); at != std::string::npos; at = log.find(first_line, at + 1))
    times.push_back(std::stod(log.substr(log.rfind("why: ", at) + 5)));
  ASSERT_EQ(times.size(), 2u) << log;
  EXPECT_NE(times[0], times[1]) << log;
}

// A compiled program with the profile measured running it: the first step's 10 ops in a
// "measured" row under the program's (7 matched, 1 measured only), and hovering one gives its
// measured and predicted time.
TEST(Gui, AMeasuredProfileIsDrawnUnderTheSimulatedProgram) {
  const std::string data = std::string(TPUSIM_SOURCE_DIR) + "/tests/data/";
  const auto [still, hovered] = before_and_after("tpusim_gui_measured", "move 1000 440",
                                                 "--hlo " + data + "hlo/gdn_main_path --profile " +
                                                     data + "profile/gdn_main_path_trace.json.gz");
  ASSERT_EQ(still.w, 1600);
  // The measured row (y 433-449): orange (off by more than 25%) over most of the step.
  const int orange = count_pixels(still, 700, 433, 1590, 449, [](int r, int g, int b) {
    return r > 190 && g > 100 && g < 140 && b < 80;
  });
  EXPECT_GT(orange, 5000);
  EXPECT_GT(light_pixels(hovered, 1000, 440, 1300, 510),
            light_pixels(still, 1000, 440, 1300, 510) + 500);
  int status = -1;
  const Png p = screenshot("--hlo " + data + "hlo/gdn_main_path --profile " + data +
                               "profile/gdn_main_path_trace.json.gz",
                           &status);
  EXPECT_NE(p.log.find("measured: 7 ops matched, 1 measured only, 10 in the lane"),
            std::string::npos)
      << p.log;
  const Png bad = screenshot("--hlo " + data + "hlo/gdn_main_path --profile " + data +
                                 "profile/gdn_main_path_trace.json.gz --device 3",
                             &status);
  EXPECT_EQ(status, 2);
  EXPECT_EQ(bad.log.rfind("tpusim-gui: error: --device: " + data +
                              "profile/gdn_main_path_trace.json.gz: no device 3 (the profile has "
                              "1 device)",
                          0),
            0u)
      << bad.log;
}

// A measured profile of a scenario's step: its first step's layer loops drawn under the predicted
// step on the same axis (the forward loop blue at 57-445 us, the backward green after it), the
// table by structure in the totals; a profile without a scenario or --hlo, or a device it lacks,
// is one error line.
TEST(Gui, AMeasuredStepIsDrawnUnderThePredictedOne) {
  const std::string data = std::string(TPUSIM_SOURCE_DIR) + "/tests/data/profile/";
  const std::string args = data + "small_step.yaml --profile " + data + "small_step_trace.json.gz";
  int status = -1;
  const Png p = screenshot(args, &status);
  ASSERT_EQ(status, 0) << p.log;
  EXPECT_NE(p.log.find("measured step: /device:TPU:0 1.0820 ms against"), std::string::npos)
      << p.log;
  EXPECT_NE(p.log.find(", 7 spans"), std::string::npos) << p.log;
  const int blue =
      count_pixels(p, 188, 600, 232, 616, [](int r, int, int b) { return b > 150 && r < 120; });
  const int green = count_pixels(p, 226, 618, 288, 634,
                                 [](int r, int g, int b) { return g > 130 && r < 110 && b < 130; });
  EXPECT_GT(blue, 300);
  EXPECT_GT(green, 500);
  const Png alone = screenshot("--profile " + data + "small_step_trace.json.gz", &status);
  EXPECT_EQ(status, 2);
  EXPECT_EQ(alone.log, "tpusim-gui: error: --profile: needs --hlo DIR or a scenario file\n");
  const Png no_device = screenshot(args + " --device 3", &status);
  EXPECT_EQ(status, 2);
  EXPECT_NE(no_device.log.find("--profile: "), std::string::npos) << no_device.log;
  EXPECT_NE(no_device.log.find("no device 3"), std::string::npos) << no_device.log;
}

// Comparing the scan build's GDN layer with the heads build's, each with its own tiles: the GUI
// shows the two times `tpusim kernel gdn-layer --build ...` prints (different ones).
TEST(Gui, CompareScanWithHeadsShowsTheCliTimes) {
  int status = -1;
  const Png p = screenshot(
      "--kernel gdn-layer --build scan --compare gdn-layer --compare-build heads", &status);
  ASSERT_EQ(status, 0) << p.log;
  auto cli_ms = [](const std::string& build) {
    const fs::path out = fs::temp_directory_path() / ("tpusim_gui_cli_" + build);
    std::system(
        fmt::format("{} kernel gdn-layer --build {} >{}", TPUSIM_BIN, build, out.string()).c_str());
    std::ifstream in(out);
    const std::string text{std::istreambuf_iterator<char>(in), {}};
    return text.substr(text.find(" time ") + 6, text.find(" ms") - text.find(" time ") - 6);
  };
  const std::string scan = cli_ms("scan"), heads = cli_ms("heads");
  EXPECT_NE(scan, heads);
  EXPECT_NE(p.log.find("shown: " + scan + " ms; compared: " + heads + " ms"), std::string::npos)
      << p.log << " CLI: " << scan << ", " << heads;
}
