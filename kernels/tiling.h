// Tile choices shared by the kernel generators: the VMEM budget XLA's fusions are sized to, and
// MaxText's choice of head and chunk tiles.
#pragma once
#include <cstdint>

namespace tpusim::kernels {

// XLA sizes a fusion's tiles to its scoped VMEM; 16 MiB is the smallest default among the chips
// (v5e, v5p: tpu_hardware.md, XLA-flags), so a fusion that fits it fits everywhere.
inline constexpr int64_t kXlaVmemBudget = int64_t{16} << 20;

// MaxText's `_head_tile` (gated_delta_network.py): the first of these that divides the extent.
inline constexpr int64_t kTileChoices[] = {8, 4, 2};

// The first of kTileChoices at most `max_tile` that divides `extent`, else 1.
inline int64_t default_tile(int64_t extent, int64_t max_tile = 8) {
  for (int64_t t : kTileChoices)
    if (t <= max_tile && extent % t == 0) return t;
  return 1;
}

}  // namespace tpusim::kernels
