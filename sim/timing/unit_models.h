// Cycle costs of one op on the MXUs and the VPU, from the chip spec alone. Pure arithmetic, no
// SystemC: the body scheduler and the tests call these directly.
#pragma once
#include <cstdint>

#include "sim/chip_spec.h"
#include "sim/ir/kernel.h"

namespace tpusim {

// A dot's work on the MXU array. A d x d MXU holds one weight tile (d x d of the RHS) and streams
// one LHS row per cycle; loading the next weight tile takes d cycles and overlaps streaming, so a
// tile costs max(rows, d) cycles. Weight tiles (batch x K/d x N/d x passes) are spread over the
// MXUs; when there are fewer tiles than MXUs, a tile's rows are split over several MXUs (never
// below d rows each, where the weight load would dominate). Results leave the array
// `mxu_fill_drain_cycles` after the last row enters.
struct MxuWork {
  int mxus = 1;         // MXUs the dot occupies
  int64_t cycles = 0;   // busy cycles on each of them
  int64_t latency = 0;  // fill/drain after the busy period
  int64_t weight_tiles = 0;
};
// `int8`: both operands int8, streamed at the chip's int8 rate (int8_speedup() x bf16).
MxuWork mxu_work(const ChipSpec& chip, const DotShape& d, int passes, bool int8 = false);

// VPU busy cycles for a non-dot op, from its vreg count and op class; 0 for views (aligned
// slices, reshapes that keep the lane dim), which take no unit.
int64_t vpu_cycles(const ChipSpec& chip, const Kernel& k, const Op& op);

}  // namespace tpusim
