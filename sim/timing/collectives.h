// Collective costs on one mesh axis, by algorithm: a ring over the axis, bidirectional when the
// axis wraps around (a torus ring), otherwise a line where each link carries its direction's share
// (scaling book, sharding.md). DCN axes are bounded by the per-chip DCN bandwidth.
#pragma once
#include <cstdint>

#include "sim/chip_spec.h"
#include "sim/ir/program.h"

namespace tpusim {

double collective_seconds(const ChipSpec& chip, const Collective& c);

}  // namespace tpusim
