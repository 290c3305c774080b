// Collective costs on one mesh axis, by algorithm: a ring over the axis, bidirectional when the
// axis wraps around (a torus ring), otherwise a line where each link carries its direction's share
// (scaling book, sharding.md). DCN axes are bounded by the per-chip DCN bandwidth; a transfer to
// or from host memory by the chip's host link.
#pragma once
#include <cstdint>

#include "sim/chip_spec.h"
#include "sim/ir/program.h"

namespace tpusim {

// The torus dimensions a group of `chips` spans, laid out as evenly as the torus allows (4 chips
// as 2 x 2, 8 as 2 x 2 x 2): log2(chips), at least two, at most the chip's own.
int torus_dims_spanned(const ChipSpec& chip, int64_t chips);

// The collective's time alone on its links, latencies included: the two parts below.
double collective_seconds(const ChipSpec& chip, const Collective& c);

// The time it holds its links.
double collective_link_seconds(const ChipSpec& chip, const Collective& c);

// The part of collective_seconds that does not hold the links: on DCN the slices' latency, one
// per step of a ring over the slices (2 (N - 1) for an all-reduce, N - 1 otherwise), so that
// reductions issued together pay it once. On ICI the hop latency stays in the links' time, as
// it was fitted (the v5e AllGather), so this is 0.
double collective_latency_seconds(const ChipSpec& chip, const Collective& c);

}  // namespace tpusim
