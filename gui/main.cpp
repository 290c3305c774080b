// build/tpusim-gui [SCENARIO.yaml] [--screenshot OUT.png] [knobs]: interactive schedule
// exploration. Pick a kernel and its knobs, the simulation runs on a worker thread, and the
// timeline, totals and (for a scenario file) the training-step breakdown redraw. --screenshot
// renders one frame after the simulation finishes, writes it as PNG and exits (for Xvfb).
#include <GLFW/glfw3.h>
#include <fmt/format.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>

#include <CLI/CLI.hpp>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>

#include <atomic>
#include <cfloat>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "app/command_line.h"
#include "app/scenario.h"
#include "app/step_report.h"
#include "gui/timeline_view.h"
#include "kernels/gdn/invert.h"
#include "kernels/gdn/layer.h"
#include "kernels/gdn/scan.h"
#include "kernels/gdn/xla.h"
#include "kernels/generic.h"
#include "models/chip_loader.h"
#include "sim/error.h"
#include "sim/ir/validate.h"
#include "sim/timing/engine.h"

namespace {

using namespace tpusim;
namespace g = kernels::gdn;

const char* kKernels[] = {"matmul",     "gdn-scan-fwd",         "gdn-scan-bwd",
                          "gdn-invert", "gdn-solve-triangular", "gdn-layer"};
const char* kChips[] = {"v5e", "v6e", "v5p"};
const char* kBuilds[] = {"main", "scan", "heads", "ladder"};
// The scan kernels' dot precision: what the TPU runs (one bf16 pass), or HIGHEST (six passes, as
// the functional tests check the algorithm). Mosaic has no HIGH.
const char* kPrecisions[] = {"DEFAULT", "HIGHEST"};
// Errors within this are shown green in the predicted-against-measured table (the bar the
// calibration rows are held to, issue 4).
constexpr double kCloseErrorPct = 10;

struct Knobs {
  int kernel = 1, chip = 0, build = 3;
  int batch = 1, seq = 4096, heads = 32, chunk = 128, head_tile = 8, head_tile_bwd = 4, tile_n = 8;
  int m = 4096, bm = 512, bk = 1024, bn = 1024;
  int precision = 0;                    // index into kPrecisions
  int compare = -1, compare_build = 0;  // a second kernel (and GDN build) on the same axis
  bool operator==(const Knobs&) const = default;
};

// One simulated schedule with its lane index for the timeline.
struct Shown {
  std::string what;
  Program program;  // what ran: the timeline's tooltips read shapes from it
  RunResult run;
  std::vector<gui::LaneIndex> lanes;
};

struct Outcome {
  std::optional<Shown> run, compare;
  std::optional<StepPrediction> step;
  std::vector<ValidationRow> validation;  // predicted against the scenario's measured values
  std::string error, what;
  double peak_flops = 0;
  bool scenario = false;  // from the scenario file (the training-step panel), not the knobs
};

// Runs simulations one at a time on a worker thread (SystemC's kernel is global). There is one
// waiting slot per kind of job (knobs, scenario file): the newest request replaces the waiting
// one of its kind, so dragging a knob never queues up stale runs nor drops an opened file.
class Worker {
 public:
  enum Slot { knobs, scenario, slots };
  Worker() : thread_([this] { loop(); }) {}
  ~Worker() {
    {
      std::lock_guard<std::mutex> l(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void submit(Slot slot, std::function<Outcome()> job) {
    {
      std::lock_guard<std::mutex> l(m_);
      pending_[slot] = std::move(job);
      busy_ = true;
    }
    cv_.notify_all();
  }
  bool busy() const { return busy_; }
  std::optional<Outcome> take() {
    std::lock_guard<std::mutex> l(m_);
    if (done_.empty()) return std::nullopt;
    Outcome o = std::move(done_.front());
    done_.erase(done_.begin());
    return o;
  }

 private:
  bool any_pending() const { return pending_[0] || pending_[1]; }
  void loop() {
    for (;;) {
      std::function<Outcome()> job;
      {
        std::unique_lock<std::mutex> l(m_);
        cv_.wait(l, [&] { return stop_ || any_pending(); });
        if (stop_) return;
        auto& next = pending_[0] ? pending_[0] : pending_[1];
        job = std::move(next);
        next = nullptr;
      }
      Outcome o = job();
      std::lock_guard<std::mutex> l(m_);
      done_.push_back(std::move(o));
      busy_ = any_pending();
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::function<Outcome()> pending_[slots];
  std::vector<Outcome> done_;
  std::atomic<bool> busy_{false};
  bool stop_ = false;
  std::thread thread_;
};

Precision scan_precision(const Knobs& k) {
  return k.precision == 1 ? Precision::highest : Precision::default_;
}

Program program_for(int kernel, int build, const Knobs& k) {
  const g::GdnShape s{
      .batch = k.batch, .seq = k.seq, .heads = k.heads, .dk = 128, .dv = 128, .chunk = k.chunk};
  Program p;
  switch (kernel) {
    case 0:
      p.add_kernel(kernels::pallas_matmul({k.m, k.m, k.m, k.bm, k.bk, k.bn}));
      break;
    case 1:
      p.add_kernel(g::scan_forward(s, {k.head_tile, scan_precision(k)}));
      break;
    case 2:
      p.add_kernel(g::scan_backward(s, {k.head_tile_bwd, scan_precision(k)}));
      break;
    case 3:
      p.add_kernel(g::invert_ladder(s, k.tile_n));
      break;
    case 4:
      p = g::xla_solve_triangular(s);
      break;
    default:
      p = g::layer_core(s,
                        {g::parse_build(kBuilds[build]), k.head_tile, k.head_tile_bwd, k.tile_n});
  }
  return p;
}

std::string label_of(int kernel, int build) {
  return kernel == 5 ? std::string(kKernels[kernel]) + " (" + kBuilds[build] + ")"
                     : kKernels[kernel];
}

Shown simulate_one(const ChipSpec& chip, int kernel, int build, const Knobs& k) {
  Shown s{label_of(kernel, build), program_for(kernel, build, k), {}, {}};
  s.run = simulate(chip, s.program, {.record_timeline = true});
  s.lanes = gui::index_lanes(s.run);
  return s;
}

Outcome simulate_knobs(const Knobs& k) {
  Outcome o;
  try {
    const ChipSpec chip = load_chip(kChips[k.chip]);
    o.peak_flops = chip.peak_bf16_flops;
    o.what = label_of(k.kernel, k.build);
    o.run = simulate_one(chip, k.kernel, k.build, k);
    if (k.compare >= 0) o.compare = simulate_one(chip, k.compare, k.compare_build, k);
  } catch (const std::exception& e) {
    o.error = e.what();
  }
  return o;
}

// `build`: an index into kBuilds to run the scenario's GDN layers in, or -1 for the file's.
Outcome simulate_scenario(const std::string& file, int build) {
  Outcome o;
  o.scenario = true;
  try {
    Scenario s = load_scenario(file);
    const g::Build as_measured = s.step.gdn.build;
    if (build >= 0) {
      s.step.gdn.build = g::parse_build(kBuilds[build]);
      check(s.step);  // e.g. a kernel build under context parallelism
    }
    o.step = predict_step(s.step);
    // The file's measurements belong to its own build.
    if (s.step.gdn.build == as_measured) o.validation = validation_rows(s, *o.step);
    o.what = s.name;
    o.peak_flops = s.step.chip.peak_bf16_flops;
  } catch (const std::exception& e) {
    o.error = e.what();
  }
  return o;
}

bool knobs_panel(Knobs& k) {
  Knobs before = k;
  ImGui::Combo("kernel", &k.kernel, kKernels, IM_ARRAYSIZE(kKernels));
  ImGui::Combo("chip", &k.chip, kChips, IM_ARRAYSIZE(kChips));
  if (k.kernel == 0) {
    ImGui::InputInt("m=k=n", &k.m, 1024);
    ImGui::InputInt("bm", &k.bm, 128);
    ImGui::InputInt("bk", &k.bk, 128);
    ImGui::InputInt("bn", &k.bn, 128);
  } else {
    if (k.kernel == 5) ImGui::Combo("build", &k.build, kBuilds, IM_ARRAYSIZE(kBuilds));
    // "compare with": none or any kernel (a GDN layer in another build), on one time axis.
    int compare = k.compare + 1;
    const char* options[IM_ARRAYSIZE(kKernels) + 1] = {"(none)"};
    for (int i = 0; i < IM_ARRAYSIZE(kKernels); ++i) options[i + 1] = kKernels[i];
    ImGui::Combo("compare with", &compare, options, IM_ARRAYSIZE(options));
    k.compare = compare - 1;
    if (k.compare == 5)
      ImGui::Combo("compare build", &k.compare_build, kBuilds, IM_ARRAYSIZE(kBuilds));
    ImGui::InputInt("batch", &k.batch);
    ImGui::InputInt("seq", &k.seq, 1024);
    ImGui::InputInt("heads", &k.heads);
    ImGui::InputInt("chunk", &k.chunk, 64);
    if (k.kernel != 2) ImGui::SliderInt("head tile", &k.head_tile, 1, 16);
    if (k.kernel == 2 || k.kernel == 5) ImGui::SliderInt("bwd head tile", &k.head_tile_bwd, 1, 16);
    ImGui::SliderInt("tile_n", &k.tile_n, 1, 8);
    if (k.kernel == 1 || k.kernel == 2)
      ImGui::Combo("precision", &k.precision, kPrecisions, IM_ARRAYSIZE(kPrecisions));
  }
  return !(before == k);
}

void totals_panel(const Outcome& o) {
  if (!o.error.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(255, 110, 110, 255));
    ImGui::TextWrapped("error: %s", o.error.c_str());
    ImGui::PopStyleColor();
    return;
  }
  if (o.run) {
    const RunResult& r = o.run->run;
    ImGui::Text("%s on %s: %.4f ms, %.1f TFLOP/s (%.1f%% of peak)", o.what.c_str(), r.chip.c_str(),
                r.time_s * 1e3, r.flops / r.time_s / 1e12, 100 * r.flops / r.time_s / o.peak_flops);
    if (o.compare) {
      const RunResult& c = o.compare->run;
      ImGui::Text("compared with %s: %.4f ms, %.1f TFLOP/s  (%.2fx the first)",
                  o.compare->what.c_str(), c.time_s * 1e3, c.flops / c.time_s / 1e12,
                  c.time_s / r.time_s);
    }
    // Stall breakdown bar: TensorCore 0's time by cause.
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float w = ImGui::GetContentRegionAvail().x;
    float x = p.x;
    for (int c = 0; c < kNumCauses; ++c) {
      const float cw =
          w * static_cast<float>(r.time[c]) / static_cast<float>(std::max<int64_t>(1, r.cycles));

      dl->AddRectFilled(ImVec2(x, p.y), ImVec2(x + cw, p.y + 14),
                        gui::cause_colour(static_cast<Cause>(c)));
      x += cw;
    }
    ImGui::Dummy(ImVec2(w, 16));
    for (int c = 0; c < kNumCauses; ++c)
      if (r.time[c] > 0) {
        ImGui::Text("%s %.1f%%", std::string(name(static_cast<Cause>(c))).c_str(),
                    100.0 * r.time[c] / r.cycles);
        ImGui::SameLine();
      }
    ImGui::NewLine();
    std::string busy = "utilisation:";
    for (size_t u = 0; u < r.units.size(); ++u)
      if (r.unit_busy[u] > 0)
        busy += fmt::format("  {} {:.0f}%", r.units[u].name, 100.0 * r.unit_busy[u] / r.cycles);
    ImGui::TextWrapped("%s", busy.c_str());
    // Per-kernel VMEM, folded away for programs of many kernels so the step panel stays visible.
    ImGui::SetNextItemOpen(r.kernels.size() <= 4, ImGuiCond_Appearing);
    if (ImGui::TreeNode("vmem", "VMEM per kernel (%zu kernels)", r.kernels.size())) {
      for (const KernelStats& k : r.kernels) {
        const float frac =
            static_cast<float>(k.vmem.total_bytes) / static_cast<float>(k.vmem_limit_bytes);
        ImGui::ProgressBar(
            frac, ImVec2(220, 0),
            (format_bytes(k.vmem.total_bytes) + " / " + format_bytes(k.vmem_limit_bytes)).c_str());
        ImGui::SameLine();
        ImGui::Text("VMEM %s", k.name.c_str());
      }
      ImGui::TreePop();
    }
  }
  if (o.step) {
    const StepPrediction& s = *o.step;
    ImGui::Text("%s: step %.4f s, %.1f tokens/s/chip, %.1f TFLOP/s/chip, MFU %.1f%%",
                o.what.c_str(), s.step_time_s, s.tokens_per_s_per_chip, s.tflops_per_s_per_chip,
                100 * s.mfu);
    ImGui::ProgressBar(
        static_cast<float>(s.peak_hbm_bytes) / s.hbm_capacity_bytes, ImVec2(300, 0),
        ("HBM " + format_bytes(s.peak_hbm_bytes) + " / " + format_bytes(s.hbm_capacity_bytes))
            .c_str());
    ImGui::Text("unit busy: %s", unit_utilisation_text(s).c_str());
    for (const StepPart& part : s.parts)
      ImGui::Text("  %-40s x%-3lld %9.3f ms  (+%.3f ms exposed collectives)", part.name.c_str(),
                  static_cast<long long>(part.count), part.compute_s * 1e3, part.exposed_s * 1e3);
    if (!o.validation.empty() &&
        ImGui::BeginTable("validation", 4,
                          ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit)) {
      for (const char* h : {"metric", "predicted", "measured", "error"}) ImGui::TableSetupColumn(h);
      ImGui::TableHeadersRow();
      for (const ValidationRow& v : o.validation) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(v.metric.c_str());
        ImGui::TableNextColumn();
        ImGui::Text("%.6g", v.predicted);
        ImGui::TableNextColumn();
        ImGui::Text("%.6g", v.measured);
        ImGui::TableNextColumn();
        const bool close = std::abs(v.error_pct()) <= kCloseErrorPct;
        ImGui::TextColored(close ? ImVec4(0.5f, 0.9f, 0.5f, 1) : ImVec4(1, 0.55f, 0.4f, 1),
                           "%+.1f%%", v.error_pct());
      }
      ImGui::EndTable();
    }
  }
}

// A small file browser in a popup: folders and *.yaml files of the current directory. Returns
// true with `file` set when a scenario file was picked.
bool open_scenario_popup(std::filesystem::path& dir, std::string& file) {
  namespace fs = std::filesystem;
  bool picked = false;
  if (ImGui::BeginPopup("open scenario")) {
    ImGui::TextUnformatted(dir.string().c_str());
    ImGui::BeginChild("files", ImVec2(520, 360), true);
    if (ImGui::Selectable("../")) dir = dir.parent_path();
    std::vector<fs::directory_entry> entries;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.is_directory() || e.path().extension() == ".yaml") entries.push_back(e);
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
      return std::pair(!a.is_directory(), a.path().filename()) <
             std::pair(!b.is_directory(), b.path().filename());
    });
    if (ec) ImGui::TextColored(ImVec4(1, 0.45f, 0.45f, 1), "%s", ec.message().c_str());
    for (const auto& e : entries) {
      const std::string name = e.path().filename().string() + (e.is_directory() ? "/" : "");
      if (!ImGui::Selectable(name.c_str())) continue;
      if (e.is_directory()) {
        dir = e.path();
      } else {
        file = e.path().string();
        picked = true;
        ImGui::CloseCurrentPopup();
      }
    }
    ImGui::EndChild();
    ImGui::EndPopup();
  }
  return picked;
}

bool save_png(const std::string& path, int w, int h) {
  std::vector<unsigned char> px(static_cast<size_t>(w) * h * 4);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, w, h, GL_RGBA, GL_UNSIGNED_BYTE, px.data());
  stbi_flip_vertically_on_write(1);
  return stbi_write_png(path.c_str(), w, h, 4, px.data(), w * 4) != 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tpusim-gui: interactive schedule exploration"};
  std::string file, screenshot;
  Knobs knobs;
  std::string kernel_name = "gdn-scan-fwd", chip_name = "v5e", build_name = "ladder";
  app.add_option("file", file, "a scenario YAML (training-step breakdown)");
  app.add_option("--screenshot", screenshot, "render one frame to this PNG and exit");
  app.add_option("--kernel", kernel_name,
                 "matmul, gdn-scan-fwd, gdn-scan-bwd, gdn-invert, gdn-solve-triangular, gdn-layer");
  app.add_option("--chip", chip_name, "v5e, v6e or v5p");
  app.add_option("--build", build_name, "GDN build for gdn-layer");
  std::string compare_name, compare_build_name = "main", step_build_name;
  app.add_option("--step-build", step_build_name,
                 "run the scenario's GDN layers in this build instead of the file's");
  app.add_option("--compare", compare_name,
                 "a second kernel drawn under the first on the same time axis");
  app.add_option("--compare-build", compare_build_name, "GDN build of the compared gdn-layer");
  app.add_option("--head-tile", knobs.head_tile, "heads per scan forward grid cell");
  app.add_option("--head-tile-bwd", knobs.head_tile_bwd, "heads per scan backward grid cell");
  app.add_option("--tile-n", knobs.tile_n, "chunk tiles per inversion grid cell");
  app.add_option("--seq", knobs.seq, "sequence length");
  app.add_option("--chunk", knobs.chunk, "chunk size");
  std::vector<double> window_us;
  app.add_option("--window-us", window_us, "initial timeline window FROM TO (microseconds)")
      ->expected(2);
  if (const auto stop = parse_command_line(app, "tpusim-gui", argc, argv)) return *stop;
  auto index_of = [](const char* const* names, int n, const std::string& v) {
    for (int i = 0; i < n; ++i)
      if (v == names[i]) return i;
    return -1;
  };
  knobs.kernel = index_of(kKernels, IM_ARRAYSIZE(kKernels), kernel_name);
  knobs.chip = index_of(kChips, IM_ARRAYSIZE(kChips), chip_name);
  knobs.build = index_of(kBuilds, IM_ARRAYSIZE(kBuilds), build_name);
  knobs.compare_build = index_of(kBuilds, IM_ARRAYSIZE(kBuilds), compare_build_name);
  if (!compare_name.empty())
    knobs.compare = index_of(kKernels, IM_ARRAYSIZE(kKernels), compare_name);
  int step_build =
      step_build_name.empty() ? -1 : index_of(kBuilds, IM_ARRAYSIZE(kBuilds), step_build_name);
  if (knobs.kernel < 0 || knobs.chip < 0 || knobs.build < 0 || knobs.compare_build < 0 ||
      (!compare_name.empty() && knobs.compare < 0) ||
      (!step_build_name.empty() && step_build < 0)) {
    std::fprintf(stderr,
                 "tpusim-gui: error: unknown --kernel, --chip, --build, --compare, "
                 "--compare-build or --step-build\n");
    return 2;
  }

  if (!glfwInit()) {
    std::fprintf(stderr, "tpusim-gui: error: cannot initialise GLFW (no display?)\n");
    return 2;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  const int W = 1600, H = 1000;
  GLFWwindow* window = glfwCreateWindow(W, H, "tpusim", nullptr, nullptr);
  if (!window) {
    std::fprintf(stderr, "tpusim-gui: error: cannot create an OpenGL 3.3 window\n");
    glfwTerminate();
    return 2;
  }
  glfwMakeContextCurrent(window);
  glfwSwapInterval(1);
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;
  ImGui::StyleColorsDark();
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 330");

  Worker worker;
  Outcome shown, step_shown;
  gui::TimelineState tl;
  worker.submit(Worker::knobs, [k = knobs] { return simulate_knobs(k); });
  auto submit_step = [&] {
    worker.submit(Worker::scenario, [f = file, b = step_build] { return simulate_scenario(f, b); });
  };
  if (!file.empty()) submit_step();
  int pending = file.empty() ? 1 : 2;  // the first results, which the headless screenshot shows
  std::filesystem::path browse_dir = std::filesystem::current_path();
  int frames_after_result = 0;
  int exit_code = 0;
  double draw_ms = 0;
  while (!glfwWindowShouldClose(window)) {
    if (screenshot.empty()) glfwPollEvents();
    if (auto o = worker.take()) {
      if (o->scenario) {
        step_shown = std::move(*o);
        if (screenshot.size() && step_shown.step)
          std::fprintf(stderr, "step panel: %zu predicted-against-measured rows, step %.4f s\n",
                       step_shown.validation.size(), step_shown.step->step_time_s);
      } else {
        shown = std::move(*o);
        tl = {};
        if (shown.run) {
          const RunResult& r = shown.run->run;
          tl.fit_cycles = std::max(r.cycles, shown.compare ? shown.compare->run.cycles : 0);
          if (window_us.size() == 2) {
            tl.from = static_cast<int64_t>(window_us[0] * 1e-6 * r.clock_hz);
            tl.to = static_cast<int64_t>(window_us[1] * 1e-6 * r.clock_hz);
          }
        }
      }
      pending = std::max(0, pending - 1);
      frames_after_result = 0;
    }
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    if (!screenshot.empty())
      ImGui::GetIO().MousePos = ImVec2(-FLT_MAX, -FLT_MAX);  // no stray hover
    ImGui::NewFrame();
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(ImVec2(static_cast<float>(W), static_cast<float>(H)));
    ImGui::Begin("tpusim", nullptr,
                 ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoMove);
    ImGui::BeginChild("knobs", ImVec2(330, 330), true);
    ImGui::TextUnformatted("scenario and knobs");
    if (ImGui::Button("open scenario...")) ImGui::OpenPopup("open scenario");
    if (open_scenario_popup(browse_dir, file)) submit_step();
    if (knobs_panel(knobs)) worker.submit(Worker::knobs, [k = knobs] { return simulate_knobs(k); });
    ImGui::Text(worker.busy() ? "simulating..." : "ready");
    ImGui::EndChild();
    ImGui::SameLine();
    ImGui::BeginChild("totals", ImVec2(0, 330), true);
    totals_panel(shown);
    if (step_shown.scenario || !file.empty()) {
      ImGui::Separator();
      ImGui::TextUnformatted(("training step: " + file).c_str());
      // Re-run the step with its GDN layers in another build of the kernel change.
      int choice = step_build + 1;
      const char* builds[IM_ARRAYSIZE(kBuilds) + 1] = {"(as in the file)"};
      for (int i = 0; i < IM_ARRAYSIZE(kBuilds); ++i) builds[i + 1] = kBuilds[i];
      ImGui::SetNextItemWidth(200);
      if (ImGui::Combo("GDN build of the step", &choice, builds, IM_ARRAYSIZE(builds))) {
        step_build = choice - 1;
        submit_step();
      }
      totals_panel(step_shown);
    }
    ImGui::EndChild();
    ImGui::BeginChild("timeline", ImVec2(0, 0), true);
    const size_t events = (shown.run ? shown.run->run.events.size() : 0) +
                          (shown.compare ? shown.compare->run.events.size() : 0);
    ImGui::Text(
        "timeline (wheel: zoom, drag: pan, right-click: select grid step)   %zu events, drawn in "
        "%.1f ms",
        events, draw_ms);
    if (shown.run) {
      const auto t0 = std::chrono::steady_clock::now();
      if (shown.compare) ImGui::TextUnformatted(shown.run->what.c_str());
      gui::draw_timeline(shown.run->run, shown.run->lanes, tl, "timeline", &shown.run->program);
      if (shown.compare) {
        // The same window (from, to) on the same cycle axis: the two schedules line up.
        ImGui::TextUnformatted(shown.compare->what.c_str());
        gui::draw_timeline(shown.compare->run, shown.compare->lanes, tl, "compare",
                           &shown.compare->program);
      }
      draw_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
    ImGui::EndChild();
    ImGui::End();
    ImGui::Render();
    int fw, fh;
    glfwGetFramebufferSize(window, &fw, &fh);
    glViewport(0, 0, fw, fh);
    glClearColor(0.08f, 0.08f, 0.09f, 1);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    if (!screenshot.empty() && pending == 0 && !worker.busy() && ++frames_after_result >= 3) {
      std::fprintf(stderr, "timeline drawn in %.1f ms\n", draw_ms);
      if (!save_png(screenshot, fw, fh)) {
        std::fprintf(stderr, "tpusim-gui: error: cannot write '%s'\n", screenshot.c_str());
        exit_code = 2;
      }
      break;
    }
    glfwSwapBuffers(window);
  }
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
  return exit_code;
}
