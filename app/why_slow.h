// "Why is this slow": a few lines on where a run's time goes and what usually changes it, for the
// GUI's totals and `tpusim kernel ... --why`. From the run alone: the critical TensorCore's
// stalls by cause, largest first, each in plain words; the kernels that take most of the time
// with what bounds them (app/op_profile.h); and, for the largest stall, what usually shortens it.
// The advice is the usual remedy for that cause, not a prediction: simulate the change to know.
#pragma once
#include <string>
#include <vector>

#include "sim/chip_spec.h"
#include "sim/timing/result.h"

namespace tpusim {

std::vector<std::string> why_slow(const RunResult& r, const ChipSpec& chip);

}  // namespace tpusim
