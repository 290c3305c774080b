// XLA fusions of the GDN layer's XLA stages as the generators build them: over hb heads per grid
// step, chunk-parallel or one while-loop iteration, their tiles as large as the scoped VMEM
// allows (fit_xla_tile), and the while-loop bodies the compiled main build runs (LoopBody).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/gdn/builder_util.h"

namespace tpusim::kernels::gdn {

inline const IndexMap kPerChunk({axis(0), axis(2), axis(1), constant(0), constant(0)});

// An XLA fusion over hb heads per grid step: chunk-parallel over grid (B, H / hb, N) on
// [B, N, H, ., .] arrays, or one while-loop iteration over grid (B, H / hb) on one chunk's
// [B, H, ., .] slices.
struct Fusion {
  enum Over { chunks, iteration };
  KernelBuilder kb;
  GdnBuilder g;
  int64_t hb;
  const GdnShape& s;
  Over over;
  Fusion(const std::string& name, const GdnShape& shape, int64_t heads_per_step, Over o)
      : kb(name + " (xla)", Origin::xla),
        g(kb, shape, Precision::highest),
        hb(heads_per_step),
        s(shape),
        over(o) {
    if (over == chunks)
      kb.grid({s.batch, s.heads / hb, s.chunks()},
              {DimSemantics::parallel, DimSemantics::parallel, DimSemantics::parallel});
    else
      kb.grid({s.batch, s.heads / hb}, {DimSemantics::parallel, DimSemantics::parallel});
  }
  ValueId in(const std::string& n, int64_t rows, int64_t cols, DType t) {
    return over == chunks ? g.chunk_input(n, rows, cols, t, hb, kPerChunk)
                          : g.head_input(n, rows, cols, t, hb);
  }
  void out(const std::string& n, ValueId v, int64_t rows, int64_t cols, DType t) {
    kb.copy("store " + n, v,
            over == chunks ? g.chunk_output(n, rows, cols, t, hb, kPerChunk)
                           : g.head_output(n, rows, cols, t, hb));
  }
  ValueId dot(const std::string& n, ValueId a, ValueId b, DotDims d) {
    return kb.dot(n, a, b, DType::f32, d, Precision::highest);
  }
  ValueId ew(const std::string& n, EwFn f, std::vector<ValueId> in) {
    return kb.elementwise(n, f, std::move(in), -1);
  }
};
struct ChunkFusion : Fusion {
  ChunkFusion(const std::string& name, const GdnShape& shape, int64_t hb)
      : Fusion(name, shape, hb, chunks) {}
};
struct IterationFusion : Fusion {
  IterationFusion(const std::string& name, const GdnShape& shape, int64_t hb)
      : Fusion(name, shape, hb, iteration) {}
};

// A while loop's body as XLA compiles it: a list of fusions, each built by `body` on an
// IterationFusion at the largest head tile that fits.
class LoopBody {
 public:
  explicit LoopBody(const GdnShape& s) : s_(s) {}
  void add(const std::string& name, const std::function<void(IterationFusion&)>& body) {
    fusions_.push_back(fit_xla_tile(s_.heads, [&](int64_t hb) {
      IterationFusion f(name, s_, hb);
      body(f);
      return f.kb.build();
    }));
  }
  std::vector<std::shared_ptr<const Kernel>> take() { return std::move(fusions_); }

 private:
  const GdnShape& s_;
  std::vector<std::shared_ptr<const Kernel>> fusions_;
};

}  // namespace tpusim::kernels::gdn
