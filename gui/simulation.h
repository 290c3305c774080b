// What the GUI simulates and shows: the knob state (a catalog kernel and its knob values, and
// optionally a second one compared on the same time axis), and the outcome of a run of the knobs
// or of a scenario file's training step. Runs happen on the worker thread (gui/worker.h).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/chrome_trace.h"
#include "app/hlo_import.h"
#include "app/profile_compare.h"
#include "app/profile_import.h"
#include "app/profile_structure.h"
#include "app/step_report.h"
#include "gui/timeline_view.h"
#include "kernels/catalog.h"
#include "kernels/gdn/layer.h"
#include "sim/ir/program.h"
#include "sim/timing/result.h"

namespace tpusim::gui {

// One kernel of the catalog with its knob values.
struct KernelChoice {
  int kernel = 0;  // index into kernels::catalog()
  kernels::KnobValues knobs;
  const kernels::CatalogEntry& entry() const;
  // "gdn-layer (dtype=bf16, build=ladder)": the name and the choice knobs.
  std::string label() const;
  bool operator==(const KernelChoice&) const = default;
};

// `kernel`'s defaults, with the values of the knobs it shares (by name and type) with `from`:
// switching kernels keeps the shape the user set.
KernelChoice switch_kernel(int kernel, const kernels::KnobValues& from);

// A compiled program shown as a kernel (`--hlo`) and the profile measured running it
// (`--profile`): the GUI draws the profile's ops under the simulated ones.
struct MeasuredInput {
  std::string kernel;  // the catalog entry of the compiled program
  HloProgram hlo;
  Profile profile;
  int device = 0;
};

struct Knobs {
  std::string chip;
  KernelChoice main;
  std::optional<KernelChoice> compare;
  std::string compare_chip;  // the compared kernel's chip ("": the shown kernel's)
  std::shared_ptr<const MeasuredInput> measured;  // compared with the program it ran
  bool operator==(const Knobs&) const = default;
};

// One simulated schedule with its lane index for the timeline.
struct Shown {
  std::string what;
  Program program;  // what ran: the timeline's tooltips read shapes from it
  RunResult run;
  TimelineLanes lanes;
  std::vector<CriticalPath>
      paths;  // of its kernel calls (all for a kernel, opened ones for a step)
};

struct Outcome {
  std::optional<Shown> run, compare;
  std::optional<StepPrediction> step;
  std::vector<TraceSpan> step_spans;  // the step's predicted structure (app/step_structure.h)
  std::optional<Shown> layers;        // one layer of each kind, simulated: the step's drill-down
  // A second scenario's step (its file's own build), compared with the first.
  std::optional<StepPrediction> compare_step;
  std::vector<TraceSpan> compare_spans;
  std::string compare_what;
  std::vector<ValidationRow> validation;  // predicted against the scenario's measured values
  std::vector<BatchSplit> batch;          // each part's batch-independent and per-sample time
  int64_t batch_per_chip = 0;
  std::string error, what;
  std::vector<std::string> why;  // why the shown run takes its time (app/why_slow.h)
  // A measured profile against the shown run (app/profile_compare.h): per op, and its first
  // step's ops on the run's time axis.
  std::optional<ProfileComparison> comparison;
  std::vector<MeasuredSpan> measured;
  // A measured profile of the scenario's step against it by structure (app/profile_structure.h),
  // and the profile's first step as spans under the predicted ones.
  std::optional<StructureComparison> structure;
  std::vector<TraceSpan> measured_step;
  double peak_flops = 0;
  bool scenario = false;  // from the scenario file (the training-step panel), not the knobs
};

Outcome simulate_knobs(const Knobs& k);
// `build`: the build to run the scenario's GDN layers in (none: the file's own); `compare`: a
// second scenario file to predict beside it ("": none); `profile`: a measured profile of the
// step (null: none) and its device.
Outcome simulate_scenario(const std::string& file, std::optional<kernels::gdn::Build> build,
                          const std::string& compare = "",
                          std::shared_ptr<const Profile> profile = nullptr, int device = 0);

}  // namespace tpusim::gui
