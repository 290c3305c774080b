// The GUI's panels, each drawn inside the current ImGui window: the knobs (kernel, chip, a
// compared kernel and each kernel's knobs from the catalog), the totals of a kernel run, the
// training-step breakdown of a scenario, and the scenario file browser.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "gui/simulation.h"

namespace tpusim::gui {

// Returns true when a knob changed.
bool knobs_panel(Knobs& k, const std::vector<std::string>& chips);

// A kernel run: time, throughput, stall breakdown, unit use and VMEM per kernel (or the error).
void run_panel(const Outcome& o);

// A scenario's training step: time, throughput, HBM, parts and predicted against measured (or
// the error). `step_build` (none: the file's build) is the GDN build the step runs in; returns true
// when the user picked another.
bool step_panel(const std::string& file, const Outcome& o,
                std::optional<kernels::gdn::Build>& step_build);

// A small file browser in the popup `id`: folders and *.yaml files of `dir`. Returns true with
// `file` set when a scenario file was picked.
bool open_scenario_popup(const char* id, std::filesystem::path& dir, std::string& file);

// Errors in red, wrapped.
void error_text(const std::string& error);

}  // namespace tpusim::gui
