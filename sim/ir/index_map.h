// Affine BlockSpec index maps: grid index -> block index, one affine expression per block dim.
// Affine covers every map the kernels use: picking grid axes (matmul), constants (h0, scratch-like
// inputs) and reversal (N - 1 - n in the scan backward). Being data, it prints and serialises.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tpusim {

using GridIndex = std::vector<int64_t>;

struct AffineExpr {
  int64_t offset = 0;
  std::vector<int64_t> coeff;  // one per grid dim; missing entries are zero
  int min_axis = -1;           // >= 0: the result is clamped to at most g[min_axis]
  int max_axis = -1;           // >= 0: the result is clamped to at least g[max_axis]

  int64_t eval(const GridIndex& g) const {
    int64_t v = offset;
    for (size_t i = 0; i < coeff.size() && i < g.size(); ++i) v += coeff[i] * g[i];
    if (min_axis >= 0 && g[min_axis] < v) v = g[min_axis];
    if (max_axis >= 0 && g[max_axis] > v) v = g[max_axis];
    return v;
  }
};

// Shorthands for building maps: grid axis `a`, constant `c`, and `size - 1 - axis a`.
AffineExpr axis(int a);
AffineExpr constant(int64_t c);
AffineExpr reversed(int a, int64_t size);
// Grid axis `a` clamped to at most axis `limit`: causal kernels keep fetching the diagonal block
// for fully masked steps, so those steps move no data (splash attention's data_next).
AffineExpr clamped(int a, int limit);
// Grid axis `a` clamped to at least axis `limit` (the backward walk's skipped steps).
AffineExpr clamped_below(int a, int limit);

class IndexMap {
 public:
  IndexMap() = default;
  explicit IndexMap(std::vector<AffineExpr> dims) : dims_(std::move(dims)) {}

  size_t rank() const { return dims_.size(); }
  void eval(const GridIndex& g, std::vector<int64_t>& out) const {
    out.resize(dims_.size());
    for (size_t i = 0; i < dims_.size(); ++i) out[i] = dims_[i].eval(g);
  }
  const std::vector<AffineExpr>& dims() const { return dims_; }
  std::string to_string() const;

 private:
  std::vector<AffineExpr> dims_;
};

}  // namespace tpusim
