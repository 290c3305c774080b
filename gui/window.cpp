#include "gui/window.h"

#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>

#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>

#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "gui/em.h"
#include "gui/panels.h"
#include "gui/step_timeline.h"
#include "gui/worker.h"

namespace tpusim::gui {
namespace {

constexpr int kWidth = 1600, kHeight = 1000;
constexpr float kTopPanelHeight = 330;
// Frames drawn after the last result before a screenshot, so ImGui's layout has settled.
constexpr int kSettleFrames = 3;

bool save_png(const std::string& path, int w, int h) {
  std::vector<unsigned char> px(static_cast<size_t>(w) * h * 4);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadPixels(0, 0, w, h, GL_RGBA, GL_UNSIGNED_BYTE, px.data());
  stbi_flip_vertically_on_write(1);
  return stbi_write_png(path.c_str(), w, h, 4, px.data(), w * 4) != 0;
}

GLFWwindow* open_window() {
  if (!glfwInit()) {
    std::fprintf(stderr, "tpusim-gui: error: cannot initialise GLFW (no display?)\n");
    return nullptr;
  }
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  GLFWwindow* window = glfwCreateWindow(kWidth, kHeight, "tpusim", nullptr, nullptr);
  if (!window) {
    std::fprintf(stderr, "tpusim-gui: error: cannot create an OpenGL 3.3 window\n");
    glfwTerminate();
    return nullptr;
  }
  glfwMakeContextCurrent(window);
  glfwSwapInterval(1);
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGui::GetIO().IniFilename = nullptr;
  ImGui::StyleColorsDark();
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 330");
  return window;
}

void close_window(GLFWwindow* window) {
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
}

// The shown kernel's timeline, and the compared one under it on the same cycle axis. Returns the
// time drawing took.
double timelines(Outcome& shown, TimelineState& tl, double last_draw_ms) {
  const size_t events = (shown.run ? shown.run->run.events.size() : 0) +
                        (shown.compare ? shown.compare->run.events.size() : 0);
  ImGui::Text(
      "timeline (wheel or W/S: zoom, drag or A/D: pan, R: whole run, right-click: grid step)   "
      "%zu events, drawn in "
      "%.1f ms",
      events, last_draw_ms);
  ImGui::SetNextItemWidth(240 * em());
  const bool entered =
      ImGui::InputTextWithHint("##find", "find ops by name (e.g. dot)", tl.find, sizeof tl.find,
                               ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  tl.find_next = ImGui::Button("next") || entered;
  ImGui::SameLine();
  ImGui::Checkbox("critical path", &tl.show_path);
  if (!shown.run) return last_draw_ms;
  const auto t0 = std::chrono::steady_clock::now();
  for (const Shown* s : {&*shown.run, shown.compare ? &*shown.compare : nullptr}) {
    if (!s) continue;
    if (shown.compare) ImGui::TextUnformatted(s->what.c_str());
    if (tl.show_path)
      for (const CriticalPath& path : s->paths)
        ImGui::TextUnformatted(critical_path_text(path, s->run.clock_hz).c_str());
    if (s == &*shown.run) {
      draw_timeline(s->run, s->lanes, tl, "timeline",
                    {&s->program, &s->paths, shown.measured.empty() ? nullptr : &shown.measured});
      continue;
    }
    // The same window in time: the compared run's cycles, on its chip's clock, line up with the
    // first's; zooming or panning either moves both.
    const double ratio = s->run.clock_hz / shown.run->run.clock_hz;
    TimelineState c = tl;
    c.from = std::llround(tl.from * ratio);
    c.to = std::llround(tl.to * ratio);
    c.fit_cycles = std::llround(tl.fit_cycles * ratio);
    const TimelineState scaled = c;
    draw_timeline(s->run, s->lanes, c, "compare", {&s->program, &s->paths});
    if (c.from != scaled.from || c.to != scaled.to)
      tl.from = std::llround(c.from / ratio), tl.to = std::llround(c.to / ratio);
    tl.selected_step = c.selected_step;
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// A fresh timeline view for a kernel outcome: fitted to the longer run, or the --window-us one.
TimelineState view_of(const Outcome& o, const std::vector<double>& window_us) {
  TimelineState tl;
  if (!o.run) return tl;
  const RunResult& r = o.run->run;
  // The longer run in the first's cycles (the compared one may run on another clock), and the
  // measured profile's step, which may end after the simulated run.
  tl.fit_cycles = std::max<int64_t>(
      r.cycles, o.compare
                    ? std::llround(o.compare->run.cycles * r.clock_hz / o.compare->run.clock_hz)
                    : int64_t{0});
  if (!o.measured.empty()) {
    const MeasuredSpan& last = o.measured.back();
    tl.fit_cycles = std::max<int64_t>(tl.fit_cycles,
                                      std::llround((last.start_s + last.duration_s) * r.clock_hz));
  }
  if (window_us.size() == 2) {
    tl.from = static_cast<int64_t>(window_us[0] * 1e-6 * r.clock_hz);
    tl.to = static_cast<int64_t>(window_us[1] * 1e-6 * r.clock_hz);
  }
  return tl;
}

// The bottom of the window shows the knobs' kernel or, once a scenario is open, its training step
// (a tab each); the top right shows the same one's totals.
enum class View { kernel, step };

// What the window shows and the worker computing it.
struct Session {
  explicit Session(WindowOptions options)
      : o(std::move(options)), headless(!o.screenshot.empty() || !o.script.empty()) {}
  WindowOptions o;
  const bool headless;  // say what a click opened on stderr, for the scripted tests
  Worker worker;
  Outcome shown, step_shown;
  TimelineState tl, layer_tl;  // the kernel's timeline; the step's drill-down into its kernels
  StepTimelineState step_tl;
  View view = View::kernel;
  bool view_changed = false;  // select the view's tab in the next frame
  std::filesystem::path browse_dir = std::filesystem::current_path();
  double draw_ms = 0;

  void show(View v) {
    view_changed = view != v;
    view = v;
  }
  void submit_knobs() {
    worker.submit(Worker::knobs, [k = o.knobs] { return simulate_knobs(k); });
    show(View::kernel);
  }
  void submit_step() {
    worker.submit(Worker::scenario,
                  [f = o.scenario, b = o.step_build, c = o.compare_scenario, p = o.step_profile,
                   d = o.step_device] { return simulate_scenario(f, b, c, p, d); });
    show(View::step);
  }
  // Takes a finished simulation; returns true if there was one.
  bool take_result() {
    auto result = worker.take();
    if (!result) return false;
    if (result->scenario) {
      step_shown = std::move(*result);
      step_tl = {};
      if (step_shown.compare_step) step_tl.fit_s = step_shown.compare_step->step_time_s;
      for (const TraceSpan& m : step_shown.measured_step)
        step_tl.fit_s = std::max(step_tl.fit_s, m.start_s + m.duration_s);
      layer_tl = {};
      if (headless && step_shown.step)
        std::fprintf(stderr,
                     "step panel: %zu predicted-against-measured rows, %zu parts split by batch, "
                     "step %.4f s\n",
                     step_shown.validation.size(), step_shown.batch.size(),
                     step_shown.step->step_time_s);
      if (headless && step_shown.step && !step_shown.step->compiled_verdict.empty())
        std::fprintf(stderr, "compiler's peak: %s\n", step_shown.step->compiled_verdict.c_str());
      if (headless && step_shown.compare_step)
        std::fprintf(stderr, "compared step: %s %.4f s\n", step_shown.compare_what.c_str(),
                     step_shown.compare_step->step_time_s);
      if (headless && step_shown.structure)
        std::fprintf(stderr, "measured step: %s %.4f ms against %.4f ms predicted, %zu spans\n",
                     step_shown.structure->device.c_str(),
                     step_shown.structure->measured_step_s * 1e3,
                     step_shown.structure->predicted_step_s * 1e3, step_shown.measured_step.size());
    } else {
      shown = std::move(*result);
      if (headless && shown.run) {
        std::fprintf(stderr, "shown: %.4f ms", shown.run->run.time_s * 1e3);
        if (shown.compare)
          std::fprintf(stderr, "; compared: %.4f ms", shown.compare->run.time_s * 1e3);
        std::fprintf(stderr, "\n");
      }
      if (headless)
        for (const std::string& line : shown.why) std::fprintf(stderr, "why: %s\n", line.c_str());
      if (headless && shown.comparison)
        std::fprintf(stderr, "measured: %zu ops matched, %zu measured only, %zu in the lane\n",
                     shown.comparison->ops.size(), shown.comparison->measured_only.size(),
                     shown.measured.size());
      const TimelineState before = tl;
      tl = view_of(shown, o.window_us);
      std::copy(std::begin(before.find), std::end(before.find), tl.find);  // the search stays
    }
    return true;
  }
  // Ctrl+= and Ctrl+- grow and shrink every text and lane (GLFW's key codes for them are ASCII).
  static void font_keys() {
    ImGuiIO& io = ImGui::GetIO();
    if (!io.KeyCtrl || io.WantTextInput) return;
    if (ImGui::IsKeyPressed('=')) io.FontGlobalScale = std::min(4.0f, io.FontGlobalScale * 1.25f);
    if (ImGui::IsKeyPressed('-')) io.FontGlobalScale = std::max(0.5f, io.FontGlobalScale / 1.25f);
  }

  // The step's drill-down: a click on a span shows its pass's kernels on the timeline below.
  void open_span(int clicked) {
    const TraceSpan& s = step_shown.step_spans[clicked];
    const StageWindow w = stage_window(step_shown.layers->run, s);
    if (w.items == 0) return;
    const int64_t margin = std::max<int64_t>(1, (w.to - w.from) / 50);
    layer_tl.from = w.from - margin;
    layer_tl.to = w.to + margin;
    layer_tl.stage = s.part + " / " + s.pass;
    if (headless)
      std::fprintf(stderr, "step timeline: opened '%s': %d kernels of %s / %s\n", s.name.c_str(),
                   w.items, s.part.c_str(), s.pass.c_str());
  }
  // A kernel of the drill-down: its grid steps fill the view, with its critical path.
  void open_kernel(int item) {
    Shown& layers = *step_shown.layers;
    layers.paths = {critical_path(layers.run, layers.program, item)};
    if (!headless) return;
    const ItemResult& it = layers.run.items[item];
    std::fprintf(stderr, "kernel timeline: opened '%s' (stage %s, %.3f us); %s\n", it.name.c_str(),
                 it.stage.c_str(), it.cycles / layers.run.clock_hz * 1e6,
                 critical_path_text(layers.paths.front(), layers.run.clock_hz).c_str());
  }
  void step_view() {
    if (!step_shown.error.empty()) return error_text(step_shown.error);
    if (step_shown.step_spans.empty() || !step_shown.layers)
      return ImGui::TextUnformatted(worker.busy() ? "simulating the step..." : "");
    ImGui::Text(
        "training step (predicted), %.4f s: a lane per layer kind and pass; click a span for its "
        "kernels below, a kernel's box for its grid steps",
        step_shown.step->step_time_s);
    if (const int clicked = draw_step_timeline(step_shown.step_spans, step_tl); clicked >= 0)
      open_span(clicked);
    if (step_shown.compare_step) {  // on the same window in seconds; its clicks select nothing
      ImGui::Text("compared: %s, %.4f s", step_shown.compare_what.c_str(),
                  step_shown.compare_step->step_time_s);
      StepTimelineState c = step_tl;
      c.selected = -1;
      draw_step_timeline(step_shown.compare_spans, c);
      step_tl.from_s = c.from_s, step_tl.to_s = c.to_s;
    }
    if (step_shown.structure) {  // the profile's first step on the same window
      ImGui::Text("measured: %s, step %.4f ms (the profile's mean; hover a loop for its error)",
                  step_shown.structure->device.c_str(),
                  step_shown.structure->measured_step_s * 1e3);
      StepTimelineState m = step_tl;
      m.selected = -1;
      draw_step_timeline(step_shown.measured_step, m);
      step_tl.from_s = m.from_s, step_tl.to_s = m.to_s;
    }
    const Shown& layers = *step_shown.layers;
    const double clock = layers.run.clock_hz;
    const int selected = step_tl.selected;
    ImGui::TextUnformatted(
        selected >= 0 ? ("kernels of " + step_shown.step_spans[selected].name +
                         " (one layer of the kind, as simulated)")
                            .c_str()
                      : "one layer of each kind and the embedding and logits, as simulated");
    ImGui::SameLine();
    ImGui::Checkbox("critical path of the opened kernel", &layer_tl.show_path);
    for (const CriticalPath& path : layers.paths)
      if (layer_tl.show_path) ImGui::TextUnformatted(critical_path_text(path, clock).c_str());
    const int opened = layer_tl.opened_item;
    draw_timeline(layers.run, layers.lanes, layer_tl, "layers", {&layers.program, &layers.paths});
    if (layer_tl.opened_item != opened) open_kernel(layer_tl.opened_item);
  }
  // The bottom: the knobs' kernel, or a tab each for the step and the kernel.
  void bottom() {
    if (!step_shown.scenario && o.scenario.empty()) {
      draw_ms = timelines(shown, tl, draw_ms);
      return;
    }
    if (ImGui::BeginTabBar("views")) {
      auto tab = [&](const char* label, View v) {
        const ImGuiTabItemFlags flags =
            view_changed && view == v ? ImGuiTabItemFlags_SetSelected : 0;
        if (!ImGui::BeginTabItem(label, nullptr, flags)) return false;
        if (!view_changed) view = v;
        return true;
      };
      if (tab("training step", View::step)) {
        step_view();
        ImGui::EndTabItem();
      }
      if (tab("kernel (knobs)", View::kernel)) {
        draw_ms = timelines(shown, tl, draw_ms);
        ImGui::EndTabItem();
      }
      ImGui::EndTabBar();
    }
    view_changed = false;
  }

  // The panels: knobs and totals on top, the timelines below.
  void draw() {
    font_keys();
    // The layout follows the window's size and the font's (--font-scale, Ctrl+= and Ctrl+-).
    ImGui::SetNextWindowPos(ImVec2(0, 0));
    ImGui::SetNextWindowSize(ImGui::GetIO().DisplaySize);
    ImGui::Begin("tpusim", nullptr,
                 ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoMove);
    ImGui::BeginChild("knobs", ImVec2(330 * em(), kTopPanelHeight * em()), true);
    ImGui::TextUnformatted("scenario and knobs");
    if (ImGui::Button("open scenario...")) ImGui::OpenPopup("open scenario");
    if (open_scenario_popup("open scenario", browse_dir, o.scenario)) submit_step();
    if (!o.scenario.empty()) {
      ImGui::SameLine();
      if (ImGui::Button("compare with...")) ImGui::OpenPopup("compare scenario");
      if (open_scenario_popup("compare scenario", browse_dir, o.compare_scenario)) submit_step();
    }
    if (knobs_panel(o.knobs, o.chips)) submit_knobs();
    ImGui::Text(worker.busy() ? "simulating..." : "ready");
    ImGui::EndChild();
    ImGui::SameLine();
    ImGui::BeginChild("totals", ImVec2(0, kTopPanelHeight * em()), true);
    if (view == View::step && (step_shown.scenario || !o.scenario.empty())) {
      if (step_panel(o.scenario, step_shown, o.step_build)) submit_step();
    } else {
      run_panel(shown);
    }
    ImGui::EndChild();
    ImGui::BeginChild("timeline", ImVec2(0, 0), true);
    bottom();
    ImGui::EndChild();
    ImGui::End();
  }
};

}  // namespace

int run_window(WindowOptions options) {
  GLFWwindow* window = open_window();
  if (!window) return 2;
  ImGui::GetIO().FontGlobalScale = options.font_scale;
  Session s{std::move(options)};
  s.submit_knobs();
  if (!s.o.scenario.empty()) s.submit_step();
  int pending = s.o.scenario.empty() ? 1 : 2;  // the first results, which a screenshot shows
  int frames_after_result = 0, exit_code = 0;
  std::optional<ScriptPlayer> script;
  if (!s.o.script.empty()) script.emplace(s.o.script);
  const bool headless = !s.o.screenshot.empty() || script;
  while (!glfwWindowShouldClose(window)) {
    if (!headless) glfwPollEvents();
    if (s.take_result()) {
      pending = std::max(0, pending - 1);
      frames_after_result = 0;
    }
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    if (headless) ImGui::GetIO().MousePos = ImVec2(-FLT_MAX, -FLT_MAX);  // no stray hover
    // A script step runs once what the steps before it set off has been simulated and drawn.
    const bool settled = pending == 0 && !s.worker.busy() && frames_after_result >= kSettleFrames;
    if (script && settled) script->before_frame(ImGui::GetIO());
    ImGui::NewFrame();
    s.draw();
    ImGui::Render();
    int fw, fh;
    glfwGetFramebufferSize(window, &fw, &fh);
    glViewport(0, 0, fw, fh);
    glClearColor(0.08f, 0.08f, 0.09f, 1);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    if (script) {
      if (pending == 0 && !s.worker.busy()) ++frames_after_result;
      if (settled && !script->shot().empty() && !save_png(script->shot(), fw, fh)) {
        std::fprintf(stderr, "tpusim-gui: error: cannot write '%s'\n", script->shot().c_str());
        exit_code = 2;
        break;
      }
      if (settled) script->after_frame();
      if (script->done()) break;
    } else if (headless && pending == 0 && !s.worker.busy() &&
               ++frames_after_result >= kSettleFrames) {
      std::fprintf(stderr, "timeline drawn in %.1f ms\n", s.draw_ms);
      if (!save_png(s.o.screenshot, fw, fh)) {
        std::fprintf(stderr, "tpusim-gui: error: cannot write '%s'\n", s.o.screenshot.c_str());
        exit_code = 2;
      }
      // The picture shows a failed simulation's error; the exit status says so too.
      for (const Outcome* failed : {&s.shown, &s.step_shown})
        if (!failed->error.empty()) {
          std::fprintf(stderr, "tpusim-gui: error: %s\n", failed->error.c_str());
          exit_code = 2;
        }
      break;
    }
    glfwSwapBuffers(window);
  }
  close_window(window);
  return exit_code;
}

}  // namespace tpusim::gui
