// build/tpusim-gui [SCENARIO.yaml] [--screenshot OUT.png] [--kernel NAME] [knobs]: interactive
// schedule exploration. Pick a catalog kernel and its knobs; the simulation runs on a worker
// thread, and the timeline, totals and (for a scenario file) the training-step breakdown redraw.
// --screenshot renders one frame after the simulations finish, writes it as PNG and exits (for
// Xvfb). The window's frame loop is in gui/window.cpp, its panels in gui/*_panel.cpp.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "app/command_line.h"
#include "app/hlo_import.h"
#include "app/knob_options.h"
#include "app/profile_import.h"
#include "app/program_import.h"
#include "app/scenario.h"
#include "app/sim_flags.h"
#include "gui/window.h"
#include "kernels/gdn/layer.h"
#include "models/chip_loader.h"
#include "sim/timing/engine.h"

namespace {

using namespace tpusim;
namespace fs = std::filesystem;

// The kernel's index in the catalog; throws Error listing the kernels.
int catalog_index(const std::string& name) {
  return static_cast<int>(&kernels::find_kernel(name) - kernels::catalog().data());
}

// How the window shows things: its first timeline window, its font, and the headless modes.
void add_view_options(CLI::App& app, gui::WindowOptions& w, std::string& script) {
  app.add_option("--screenshot", w.screenshot, "render one frame to this PNG and exit");
  app.add_option("--script", script,
                 "play input steps from FILE headless, then exit (gui/script.h)");
  app.add_option("--font-scale", w.font_scale, "text and lane size (also Ctrl+= and Ctrl+-)")
      ->check(CLI::Range(0.5, 4.0))
      ->capture_default_str();
  app.add_option("--window-us", w.window_us, "initial timeline window FROM TO (microseconds)")
      ->expected(2);
}

// The compared kernel: which, in which build, on which chip.
void add_compare_options(CLI::App& app, gui::WindowOptions& w, std::string& compare,
                         std::string& compare_build) {
  app.add_option("--compare", compare,
                 "a second kernel drawn under the first on the same time axis");
  app.add_option("--compare-build", compare_build, "GDN build of the compared kernel")
      ->check(CLI::IsMember(kernels::gdn::build_names()));
  app.add_option("--compare-chip", w.knobs.compare_chip,
                 "the compared kernel's chip (default: --chip); both on one time axis");
  app.add_option("--compare-scenario", w.compare_scenario,
                 "a second scenario whose training step is drawn under the first's");
}

struct MeasuredFlags {
  std::string hlo, profile;
  int device = 0;
};

// The compiled program joins the catalog (before anything holds an entry) and is shown, on its
// compile's chip unless --chip says otherwise; with its measured profile when given. Returns the
// kernel's name; throws Error.
std::string open_compiled(gui::WindowOptions& w, const MeasuredFlags& f, bool chip_given) {
  auto m = std::make_shared<gui::MeasuredInput>();
  m->hlo = import_hlo(f.hlo);
  m->kernel = "hlo:" + fs::path(f.hlo).filename().string();
  kernels::register_kernel({m->kernel,
                            "compiled program " + f.hlo,
                            {},
                            [program = m->hlo.program](
                                const ChipSpec&, const kernels::KnobValues&) { return program; }});
  if (!chip_given && !m->hlo.chip.empty()) w.knobs.chip = m->hlo.chip;
  if (!f.profile.empty()) {
    m->profile = load_profile(f.profile);
    m->device = f.device;
    try {
      profile_device(m->profile, f.device);
    } catch (const Error& e) {
      throw Error(std::string("--device: ") + e.what());
    }
    w.knobs.measured = m;
  }
  return m->kernel;
}

// An error line, exit status 2.
int fail(const std::string& what) {
  std::fprintf(stderr, "tpusim-gui: error: %s\n", what.c_str());
  return 2;
}

// Runs `check`; a failure is an error line naming `flag`.
template <typename Check>
std::optional<int> named(const char* flag, Check check) {
  try {
    check();
    return std::nullopt;
  } catch (const Error& e) {
    return fail(std::string(flag) + ": " + e.what());
  }
}

// The compared scenario and the compared kernel's chip: each needs what it is compared with.
std::optional<int> check_compared(const gui::WindowOptions& w, const std::string& compare) {
  if (!w.compare_scenario.empty()) {
    if (w.scenario.empty()) return fail("--compare-scenario: needs a scenario file to compare");
    if (auto stop = named("--compare-scenario", [&] { load_scenario(w.compare_scenario); }))
      return stop;
  }
  if (!w.knobs.compare_chip.empty()) {
    if (compare.empty()) return fail("--compare-chip: needs --compare (the kernel to compare)");
    if (auto stop = named("--compare-chip", [&] { load_chip(w.knobs.compare_chip); })) return stop;
  }
  return std::nullopt;
}

// --profile without --hlo: the measured profile of the scenario's step; its device must exist.
std::optional<int> step_profile(gui::WindowOptions& w, const MeasuredFlags& f) {
  if (f.profile.empty() || !f.hlo.empty()) return std::nullopt;
  if (w.scenario.empty()) return fail("--profile: needs --hlo DIR or a scenario file");
  auto profile = std::make_shared<Profile>();
  if (auto stop = named("--profile", [&] {
        *profile = load_profile(f.profile);
        profile_device(*profile, f.device);
      }))
    return stop;
  w.step_profile = std::move(profile);
  w.step_device = f.device;
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tpusim-gui: interactive schedule exploration"};
  gui::WindowOptions w;
  std::string kernel = "gdn-scan-fwd", compare, compare_build, step_build, script;
  w.knobs.chip = "v5e";
  app.add_option("file", w.scenario,
                 "a scenario YAML (training-step breakdown), or a program exported from JAX "
                 "(python -m tpusim_jax export), shown as the kernel");
  app.add_option("--kernel", kernel, "the kernel shown (any of `tpusim kernel --help`)")
      ->capture_default_str();
  app.add_option("--chip", w.knobs.chip, "chip name or chip YAML file")->capture_default_str();
  const auto builds = CLI::IsMember(kernels::gdn::build_names());
  add_compare_options(app, w, compare, compare_build);
  app.add_option("--step-build", step_build,
                 "run the scenario's GDN layers in this build instead of the file's")
      ->check(builds);
  add_view_options(app, w, script);
  MeasuredFlags measured;
  app.add_option("--hlo", measured.hlo,
                 "a compiled program (python -m tpusim_jax compile DIR, or an HLO text file) "
                 "shown as the kernel");
  app.add_option("--profile", measured.profile,
                 "a measured profile (Perfetto trace JSON, .gz or not, or a profile directory): "
                 "of the --hlo program, its ops drawn under the simulated ones with a per-op "
                 "table; of the scenario's step, its first step under the predicted one with "
                 "the table by layer loops");
  app.add_option("--device", measured.device, "which device of the profile (default 0)");
  SimFlags sim_flags;
  add_sim_flags(app, sim_flags,
                "draw every grid step (by default spans that repeat the steps before them are "
                "jumped over and marked)");
  // Every knob of every catalog kernel; a flag sets it in both the shown and the compared kernel.
  KnobOptions knobs;
  knobs.add_union(&app, kernels::catalog());
  if (const auto stop = parse_command_line(app, "tpusim-gui", argc, argv)) return *stop;

  apply_sim_flags(sim_flags);
  try {
    if (!measured.hlo.empty()) kernel = open_compiled(w, measured, app.count("--chip") > 0);
    if (!w.scenario.empty() && is_program_file(w.scenario)) {
      // A program from JAX joins the catalog (before anything holds an entry) and is shown.
      const ImportedProgram p = import_program(w.scenario);
      kernels::register_kernel(catalog_entry(p));
      kernel = catalog_entry(p).name;
      w.scenario.clear();
    }
    // A bad flag's error names the flag.
    int shown = 0;
    if (auto stop = named("--chip", [&] { load_chip(w.knobs.chip); })) return *stop;
    if (auto stop = named("--kernel", [&] { shown = catalog_index(kernel); })) return *stop;
    if (!compare.empty())
      if (auto stop = named("--compare", [&] { catalog_index(compare); })) return *stop;
    if (auto stop = check_compared(w, compare)) return *stop;
    if (auto stop = step_profile(w, measured)) return *stop;
    w.knobs.main = gui::switch_kernel(shown, {});
    knobs.apply(w.knobs.main.entry(), w.knobs.main.knobs);
    if (!compare.empty()) {
      w.knobs.compare = gui::switch_kernel(catalog_index(compare), w.knobs.main.knobs);
      knobs.apply(w.knobs.compare->entry(), w.knobs.compare->knobs);
      if (!compare_build.empty()) w.knobs.compare->knobs.set("build", compare_build);
    }
    if (!script.empty()) w.script = gui::load_script(script);
    if (!step_build.empty()) w.step_build = kernels::gdn::parse_build(step_build);
    w.knobs.main.entry().check(w.knobs.main.knobs);
    if (w.knobs.compare) w.knobs.compare->entry().check(w.knobs.compare->knobs);
  } catch (const Error& e) {
    return fail(e.what());
  } catch (const std::exception& e) {
    return fail(std::string("internal error: ") + shortened(e.what()));
  }
  w.chips = known_chips();
  return gui::run_window(w);
}
