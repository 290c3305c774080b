// The GUI's window: GLFW and ImGui set-up, the frame loop (knobs and totals on top, the timeline
// of the shown kernel and the compared one below), results taken from the worker thread as they
// arrive, and the headless --screenshot and --script modes.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gui/script.h"
#include "gui/simulation.h"

namespace tpusim::gui {

struct WindowOptions {
  Knobs knobs;
  std::vector<std::string> chips;  // the chip menu
  std::string scenario;            // a scenario file whose step is shown ("" for none)
  std::string compare_scenario;    // a second one, its step drawn under the first ("" for none)
  std::shared_ptr<const Profile> step_profile;    // measured, of the scenario's step (or none)
  int step_device = 0;                            // which device of it
  std::optional<kernels::gdn::Build> step_build;  // none: the file's own
  std::string screenshot;                         // render one frame to this PNG and return
  std::vector<double> window_us;                  // initial timeline window FROM TO
  std::vector<ScriptStep> script;                 // --script: played headless, then exit
  float font_scale = 1;                           // every text and lane (Ctrl+= / Ctrl+-)
};

// Returns the process exit code (2 when no window could be opened or the PNG not written).
int run_window(WindowOptions options);

}  // namespace tpusim::gui
