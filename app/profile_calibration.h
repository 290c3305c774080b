// `tpusim calibrate --profile TRACE --hlo DIR`: which of the model's constants a measured profile
// would move, and by how much. For each constant the engine reads directly (step overhead, DMA
// latency, MXU fill/drain, the row-solve step, the vector rate scale, HBM and ICI efficiency, the
// ICI hop latency), the compiled program is simulated again with the constant 10% larger; the
// matched ops whose prediction moves by 0.5% or more are the ones it governs. Alone (the others
// as recorded), the constant is then solved so those ops' predicted time meets their measured
// time (bisection over 1/10 .. 10x). A report, not a fit of the model: the constants stay
// fitted on their own data (docs/calibration.md) unless `--write` puts the moved values in the
// chip files.
#pragma once
#include <string>
#include <vector>

#include "app/calibrated_value.h"
#include "app/hlo_import.h"
#include "app/profile_import.h"
#include "app/report.h"
#include "sim/chip_spec.h"

namespace tpusim {

struct ProfileConstantMove {
  std::string key;
  bool integer = false;            // a cycle count
  double recorded = 0, moved = 0;  // moved: where the profile puts it (= recorded if none)
  std::vector<std::string> ops;    // the matched ops it governs
  double measured_s = 0, predicted_s = 0, predicted_moved_s = 0;  // of those ops, per step
  std::string note;  // why it does not move ("no op depends on it", "beyond 1/10 .. 10x")
};

std::vector<ProfileConstantMove> profile_constant_moves(const Profile& profile, int device,
                                                        const HloProgram& h, const ChipSpec& chip);

std::string profile_moves_text(const std::vector<ProfileConstantMove>& moves);

// The moved constants as values for the chip files (those that move).
std::vector<CalibratedValue> moved_values(const std::vector<ProfileConstantMove>& moves,
                                          const std::string& profile_path);

// Stages each moved value into the chip file that holds it (the chip's own, else shared.yaml);
// returns what could not be written (a key the files set without a provenance block), one line
// each.
std::vector<std::string> stage_moved_values(const std::vector<CalibratedValue>& values,
                                            const std::string& chip, OutputFiles& files);

}  // namespace tpusim
