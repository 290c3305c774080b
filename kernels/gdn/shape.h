// Problem sizes of the Gated Delta Net chunked kernels (gdn_kernels.md section 1): per-device
// batch B, sequence T (a multiple of the chunk C), N = T / C chunks, H value heads, head dims.
#pragma once
#include <cstdint>

#include "sim/ir/dtype.h"
#include "sim/ir/kernel.h"

namespace tpusim::kernels::gdn {

struct GdnShape {
  int64_t batch = 1;
  int64_t seq = 4096;
  int64_t heads = 32;
  int64_t dk = 128, dv = 128;
  int64_t chunk = 128;
  DType compute = DType::bf16;  // cfg.dtype: w, u, q, k, o and the operands of the kernels' dots

  int64_t chunks() const { return seq / chunk; }
  // Throws Error unless the sizes make sense (seq a multiple of chunk, positive sizes).
  void check() const;
};

// The precision of the scan kernels' dots: the TPU runs them at DEFAULT (one bf16 pass); the
// functional tests also run them at HIGHEST to check the algorithm at f32 accuracy.
struct ScanOptions {
  int64_t head_tile = 1;  // th: heads batched per grid cell
  Precision precision = Precision::default_;
};

}  // namespace tpusim::kernels::gdn
