// `tpusim calibrate`: fits the engine's constants (matmul table, AllGather) and the whole-step
// ones (the MXU fill/drain latency on C1's head-batching saving, the inversion's row-step latency
// on C4's forward ratio, v6e's vector rate scale on C3 #1, the DCN slices' latency on C5 #41's
// drop over 32 slices), each on its own data, and renders
// docs/calibration.md. The fits depend on each other (the matmul table sees the fill/drain latency,
// C1 the matmul constants), so they repeat until the values stop changing.
#pragma once
#include <functional>
#include <string>

#include "app/collective_fit.h"
#include "app/dcn_fit.h"
#include "app/gdn_inverse_fit.h"
#include "app/matmul_table.h"
#include "app/report.h"
#include "app/step_fit.h"

namespace tpusim {

struct Calibration {
  EngineConstants engine;
  StepConstantFit fill_drain, row_solve_step, vector_scale, dcn_slice_latency;
  MatmulTable matmul, blind_matmul;  // predicted with the fitted constants
  CollectiveTable gather;
  InverseRatioTable inverse;  // C4, predicted with the fitted constants
  SliceTable slices;          // C3 and C5 #41, predicted with the fitted constants
  std::string markdown;       // docs/calibration.md

  // A few lines: each fitted constant with what it was fitted on, and the rows that check them.
  std::string summary() const;
};

// Every data file is read from the repository (repo_path).
// Called after each fit with what was fitted and the seconds it took.
using CalibrationProgress = std::function<void(const std::string& what, double seconds)>;
Calibration calibrate(const CalibrationProgress& progress = {});

// Stages what `calibrate --write` updates: shared.yaml, the fitted chip's file and
// docs/calibration.md. Returns the paths staged.
std::vector<std::string> stage_calibration(const Calibration& c, OutputFiles& files);

}  // namespace tpusim
