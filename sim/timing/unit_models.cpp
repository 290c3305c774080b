#include "sim/timing/unit_models.h"

#include <algorithm>
#include <cmath>

namespace tpusim {
namespace {
int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t per_cycle(const ChipSpec& chip, int64_t vregs, double rate) {
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(static_cast<double>(vregs) /
                                                             (rate * chip.vector_rate_scale))));
}
}  // namespace

MxuWork mxu_work(const ChipSpec& chip, const DotShape& s, int passes, bool int8) {
  const int64_t d = chip.mxu_dim;
  const int64_t n = chip.mxus_per_core;
  MxuWork w;
  w.weight_tiles = s.batch * cdiv(s.k, d) * cdiv(s.n, d) * passes;
  w.latency = chip.mxu_fill_drain_cycles;
  if (w.weight_tiles >= n) {
    w.mxus = static_cast<int>(n);
    w.cycles = cdiv(w.weight_tiles, n) * std::max(s.m, d);
  } else {
    const int64_t splits = std::max<int64_t>(1, std::min(n / w.weight_tiles, cdiv(s.m, d)));
    w.mxus = static_cast<int>(w.weight_tiles * splits);
    w.cycles = std::max(cdiv(s.m, splits), d);
  }
  if (int8)
    w.cycles =
        std::max<int64_t>(1, static_cast<int64_t>(std::ceil(w.cycles / chip.int8_speedup())));
  return w;
}

int64_t vpu_cycles(const ChipSpec& chip, const Kernel& k, const Op& op) {
  const Value& out = k.values.at(op.output);
  switch (op.kind) {
    case OpKind::dot:
      return 0;
    case OpKind::iota:
      return per_cycle(chip, vreg_count(out.shape), chip.vpu_simple_per_cycle);
    case OpKind::elementwise:
      if (op.fn == EwFn::div || op.fn == EwFn::idiv || op.fn == EwFn::rem)
        return per_cycle(chip, vreg_count(out.shape), chip.vpu_divide_per_cycle);
      return per_cycle(chip, vreg_count(out.shape), chip.vpu_simple_per_cycle);
    case OpKind::transcendental:
      return per_cycle(chip, vreg_count(out.shape), chip.vpu_transcendental_per_cycle);
    case OpKind::cast: {
      const DType from = k.values.at(op.inputs.at(0)).dtype;
      const bool repacks = (from == DType::f32 && out.dtype == DType::bf16) ||
                           (from == DType::bf16 && out.dtype == DType::f32);
      return per_cycle(chip, vreg_count(out.shape),
                       chip.vpu_simple_per_cycle / (repacks ? chip.vpu_cast_ops_per_vreg : 1.0));
    }
    case OpKind::copy:
      return per_cycle(chip, vreg_count(out.shape), chip.vpu_simple_per_cycle);
    case OpKind::mask:  // iota, compare, select; a broadcast only stores
      return per_cycle(chip, (op.mask == MaskKind::all ? 1 : 3) * vreg_count(out.shape),
                       chip.vpu_simple_per_cycle);
    case OpKind::reshape: {  // a view unless the minor (lane) dim changes: then a relayout
      const Shape& in = k.values.at(op.inputs.at(0)).shape;
      const bool same_lanes = !in.empty() && !out.shape.empty() && in.back() == out.shape.back();
      return same_lanes ? 0 : per_cycle(chip, vreg_count(out.shape), chip.vpu_cross_lane_per_cycle);
    }
    case OpKind::slice: {  // sublane-aligned slices of the last two dims, and leading dims, are
                           // views
      const int rank = static_cast<int>(out.shape.size());
      const bool view = op.axis < rank - 2 || (op.axis == rank - 2 && op.start % kSublanes == 0 &&
                                               op.size % kSublanes == 0);
      return view ? 0 : per_cycle(chip, vreg_count(out.shape), chip.vpu_simple_per_cycle);
    }
    case OpKind::concat:
      return per_cycle(chip, vreg_count(out.shape), chip.vpu_simple_per_cycle);
    case OpKind::reduce: {
      const Shape& in = k.values.at(op.inputs.at(0)).shape;
      const int rank = static_cast<int>(in.size());
      // Vregs first combine elementwise down to one per output tile; only the last step of a
      // lane or sublane reduction crosses lanes (the XLU), once per output vreg.
      int64_t c = per_cycle(chip, vreg_count(in), chip.vpu_simple_per_cycle);
      for (int a : op.reduce_axes)
        if (a >= rank - 2)
          c += per_cycle(chip, vreg_count(out.shape), chip.vpu_cross_lane_per_cycle);
      return c;
    }
  }
  return 1;
}

}  // namespace tpusim
