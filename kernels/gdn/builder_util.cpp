#include "kernels/gdn/builder_util.h"

#include <fmt/format.h>

#include "sim/error.h"

namespace tpusim::kernels::gdn {

void GdnShape::check() const {
  if (batch < 1 || seq < 1 || heads < 1 || dk < 1 || dv < 1 || chunk < 1)
    throw Error(fmt::format(
        "GDN shape: sizes must be positive (batch {}, seq {}, heads {}, dk {}, dv {}, chunk {})",
        batch, seq, heads, dk, dv, chunk));
  if (seq % chunk != 0)
    throw Error(
        fmt::format("GDN shape: seq {} is not a multiple of the chunk size {}", seq, chunk));
}

ValueId GdnBuilder::chunk_input(const std::string& name, int64_t rows, int64_t cols, DType t,
                                int64_t th, const IndexMap& map) {
  const ValueId v = b_.input({name, {s_.batch, s_.chunks(), s_.heads, rows, cols}, t},
                             {1, 1, th, rows, cols}, map);
  return b_.reshape(name, v, {th, rows, cols});
}

ValueId GdnBuilder::chunk_output(const std::string& name, int64_t rows, int64_t cols, DType t,
                                 int64_t th, const IndexMap& map) {
  return b_.output({name, {s_.batch, s_.chunks(), s_.heads, rows, cols}, t}, {1, 1, th, rows, cols},
                   map);
}

ValueId GdnBuilder::head_input(const std::string& name, int64_t rows, int64_t cols, DType t,
                               int64_t th) {
  const ValueId v = b_.input({name, {s_.batch, s_.heads, rows, cols}, t}, {1, th, rows, cols},
                             IndexMap({axis(0), axis(1), constant(0), constant(0)}));
  return b_.reshape(name, v, {th, rows, cols});
}

ValueId GdnBuilder::head_output(const std::string& name, int64_t rows, int64_t cols, DType t,
                                int64_t th) {
  return b_.output({name, {s_.batch, s_.heads, rows, cols}, t}, {1, th, rows, cols},
                   IndexMap({axis(0), axis(1), constant(0), constant(0)}));
}

ValueId GdnBuilder::cast_compute(ValueId v) {
  if (b_.value(v).dtype == s_.compute) return v;
  return b_.cast(b_.value(v).name + "." + std::string(name(s_.compute)), v, s_.compute);
}

ValueId GdnBuilder::bdot(const std::string& name, ValueId a, ValueId b, DotDims dims) {
  return b_.dot(name, cast_compute(a), cast_compute(b), DType::f32, dims, p_);
}

ValueId GdnBuilder::decay(ValueId g, int64_t th) {
  const ValueId g_row = b_.reshape("g^T", g, {th, 1, s_.chunk});
  const ValueId diff = b_.elementwise("g_i - g_j", EwFn::sub, {g, g_row}, -1);
  const ValueId inside = b_.mask("tril(g_i - g_j)", diff, MaskKind::lower);
  return b_.mask("decay", b_.elementwise("exp", EwFn::exp, {inside}, -1), MaskKind::lower);
}

GdnBuilder::ChunkEndDecay GdnBuilder::chunk_end_decay(ValueId g, ValueId k) {
  ChunkEndDecay d;
  d.g_last = b_.slice("g_last", g, 1, s_.chunk - 1, 1);
  d.gamma = b_.elementwise("gamma = exp(g_last)", EwFn::exp, {d.g_last}, -1);
  d.dvec = b_.elementwise("exp(g_last - g)", EwFn::exp,
                          {b_.elementwise("g_last - g", EwFn::sub, {d.g_last, g}, -1)}, -1);
  d.kd = b_.elementwise("kd = k * exp(g_last - g)", EwFn::mul, {k, d.dvec}, -1);
  return d;
}

}  // namespace tpusim::kernels::gdn
