// Predicted against measured by structure: a scenario's step (its parts, models/workload/step.h)
// against a measured profile of the same training step, where no compiled program gives the ops'
// names. MaxText scans its layers (`scan_layers: true`), so a step runs two layer loops of one
// trip per scanned layer (per cycle of a hybrid decoder: the full-attention layer count), the
// forward and the backward (recompute included); the embedding, the loss and the optimizer run
// outside them. The profile's while loops are the ops whose span holds others on the "XLA Ops"
// line (app/profile_import.h); the two loops whose trip count is the scenario's layer loop's, first
// and last, are matched to the forward and the backward, collective ops are set apart, and the
// device's idle time between ops stands against the host dispatch. Loops of other trip counts are
// reported as measured only; every measured microsecond lands in one row.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "app/chrome_trace.h"
#include "app/profile_import.h"
#include "models/workload/step.h"

namespace tpusim {

struct StructureRow {
  std::string name;        // "layer loop, forward", "outside the layer loops", ...
  int64_t trips = 0;       // loop rows: trips per execution; 0 otherwise
  double measured_s = 0;   // per step
  double predicted_s = 0;  // per step (-1: the model has no counterpart)
  double error_pct() const { return 100.0 * (predicted_s - measured_s) / measured_s; }
};

struct StructureComparison {
  std::string device;
  int steps = 1;
  int64_t layer_trips = 0;                  // the scenario's layer loop
  double measured_step_s = 0;               // the Steps line's mean (else the ops' span per step)
  double predicted_step_s = 0;              // the scenario's step time
  std::vector<StructureRow> rows;           // matched, largest absolute difference first
  std::vector<StructureRow> measured_only;  // loops of other trip counts
  std::vector<std::string> notes;           // what could not be matched, said once
};

// Throws Error when `device` is not in the profile or the profile has no op.
StructureComparison compare_structure(const Profile& profile, int device, const StepConfig& c,
                                      const StepPrediction& p);

// The profile's first step as spans from its start (the GUI draws them under the predicted
// step): the forward and backward layer loops (part "measured loop", pass fwd and bwd, named with
// their measured and predicted time per trip), then each other top-level op in a lane by its kind
// (part "measured: outside loops", "measured: collectives", "measured: other loops").
std::vector<TraceSpan> measured_step_spans(const Profile& profile, int device,
                                           const StructureComparison& c);

std::string structure_text(const StructureComparison& c);
std::string structure_csv(const StructureComparison& c);
nlohmann::json structure_json(const StructureComparison& c);

}  // namespace tpusim
