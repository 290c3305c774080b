// How many times a while loop of the compiler's optimized HLO runs: known_trip_count from its
// backend config, else read from its condition (`counter < constant`, the counter starting at a
// constant in the initial tuple and growing by a constant the body adds).
#pragma once
#include <cstdint>

#include "app/hlo_text.h"

namespace tpusim {

// `w` a while instruction of `comp`; an error naming the loop when its count cannot be read.
int64_t hlo_trip_count(const HloModule& m, const HloComputation& comp, const HloInstruction& w);

}  // namespace tpusim
