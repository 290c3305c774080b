// Helpers shared by the GDN schedule generators: chunk-major BlockSpecs, dot dimension numbers for
// batched products and their transposes, and the `_bdot` convention (cast operands, f32 result).
#pragma once
#include <memory>
#include <string>

#include "kernels/gdn/shape.h"
#include "kernels/tiling.h"
#include "sim/ir/kernel.h"
#include "sim/ir/validate.h"

namespace tpusim::kernels::gdn {

// [th, m, k] x [th, k, n]; [th, m, k] x [th, n, k]^T; [th, k, m]^T x [th, k, n].
inline DotDims nn() { return {{2}, {1}, {0}, {0}}; }
inline DotDims nt() { return {{2}, {2}, {0}, {0}}; }
inline DotDims tn() { return {{1}, {1}, {0}, {0}}; }

// The largest of kTileChoices (dividing `extent`) whose fusion `make(tile)` fits the XLA budget,
// else 1.
template <typename Make>
std::shared_ptr<const Kernel> fit_xla_tile(int64_t extent, Make make) {
  for (int64_t t : kTileChoices)
    if (extent % t == 0) {
      auto k = make(t);
      if (vmem_usage(*k).total_bytes <= kXlaVmemBudget) return k;
    }
  return make(1);  // the engine reports it if even a tile of one does not fit
}

class GdnBuilder {
 public:
  GdnBuilder(KernelBuilder& b, const GdnShape& s, Precision p) : b_(b), s_(s), p_(p) {}

  // A [B, N, H, rows, cols] array streamed per chunk as a (1, 1, th, rows, cols) block; inputs
  // are seen as [th, rows, cols]. rows is C for per-token data and Dk for per-chunk states.
  ValueId chunk_input(const std::string& name, int64_t rows, int64_t cols, DType t, int64_t th,
                      const IndexMap& map);
  ValueId chunk_output(const std::string& name, int64_t rows, int64_t cols, DType t, int64_t th,
                       const IndexMap& map);
  // A [B, H, rows, cols] array as a (1, th, rows, cols) block at grid (b, head tile, ...), inputs
  // seen as [th, rows, cols]: the recurrent state (rows, cols = Dk, Dv), or one chunk's slice.
  ValueId head_input(const std::string& name, int64_t rows, int64_t cols, DType t, int64_t th);
  ValueId head_output(const std::string& name, int64_t rows, int64_t cols, DType t, int64_t th);
  ValueId state_input(const std::string& name, int64_t th) {
    return head_input(name, s_.dk, s_.dv, DType::f32, th);
  }
  ValueId state_output(const std::string& name, int64_t th) {
    return head_output(name, s_.dk, s_.dv, DType::f32, th);
  }

  // MaxText's _bdot: operands cast to the compute dtype, dot_general, f32 result.
  ValueId bdot(const std::string& name, ValueId a, ValueId b, DotDims dims);
  ValueId cast_compute(ValueId v);
  // The decay matrix: where(tril, exp(where(tril, g_i - g_j, 0)), 0) from g [th, C, 1].
  ValueId decay(ValueId g, int64_t th);

  // The end-of-chunk decays from g [th, C, 1] and k [th, C, Dk]: g_last [th, 1, 1],
  // gamma = exp(g_last), dvec = exp(g_last - g) and kd = k * dvec.
  struct ChunkEndDecay {
    ValueId g_last, gamma, dvec, kd;
  };
  ChunkEndDecay chunk_end_decay(ValueId g, ValueId k);

  KernelBuilder& k() { return b_; }

 private:
  KernelBuilder& b_;
  const GdnShape& s_;
  Precision p_;
};

}  // namespace tpusim::kernels::gdn
