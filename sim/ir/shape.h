// Shapes and the TPU (8, 128) tiled layout that sets VMEM footprints, DMA sizes and vreg counts.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "sim/ir/dtype.h"

namespace tpusim {

using Shape = std::vector<int64_t>;

// Sublanes x lanes of one 32-bit vreg, and the minor tile of VMEM/HBM layouts (PALLAS-details).
inline constexpr int64_t kSublanes = 8;
inline constexpr int64_t kLanes = 128;

int64_t num_elements(const Shape& s);

// Broadcasts `s` into `out` numpy-style (right-aligned, size-1 dims stretch); false if they clash.
bool broadcast_into(Shape& out, const Shape& s);
std::string to_string(const Shape& s);

// Bytes a tensor occupies in the tiled layout: the last dim is padded to 128 lanes and the
// second-last to 8 sublanes (32-bit) or 16 (packed 16-bit) or 32 (8-bit). Leading dims are free.
int64_t tiled_bytes(const Shape& s, DType t);
// Bytes an array occupies in HBM as XLA lays it out: size-1 dims put out of the way
// (f32[.., 128, 1] is {3,4,...:T(1,128)} in the compiled programs), the others tiled as above.
int64_t hbm_tiled_bytes(const Shape& s, DType t);

// Number of 32-bit (8, 128) vregs the VPU touches to process every element of `s` once.
// Sub-32-bit data is upcast for elementwise work (PALLAS-details), so the count is dtype-free.
int64_t vreg_count(const Shape& s);

}  // namespace tpusim
