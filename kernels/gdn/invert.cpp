#include "kernels/gdn/invert.h"

#include <fmt/format.h>

#include "kernels/gdn/builder_util.h"
#include "sim/error.h"

namespace tpusim::kernels::gdn {
namespace {

constexpr auto kPar = DimSemantics::parallel;

// The manual bf16x3 product of two f32 operands: hi*hi + hi*lo + lo*hi with f32 accumulation.
ValueId dot_bf16x3(KernelBuilder& b, const std::string& name, ValueId x, ValueId y) {
  auto split = [&](ValueId v, const std::string& n) {
    const ValueId hi = b.cast(n + ".hi", v, DType::bf16);
    const ValueId lo =
        b.cast(n + ".lo", b.elementwise(n + " - hi", EwFn::sub, {v, hi}, -1), DType::bf16);
    return std::pair{hi, lo};
  };
  const auto [xh, xl] = split(x, name + ".a");
  const auto [yh, yl] = split(y, name + ".b");
  const auto dot = [&](const char* part, ValueId l, ValueId r) {
    return b.dot(name + " " + part, l, r, DType::f32, nn(), Precision::bf16x3_manual);
  };
  const ValueId hh = dot("hi*hi", xh, yh);
  const ValueId hl = dot("hi*lo", xh, yl);
  const ValueId lh = dot("lo*hi", xl, yh);
  return b.elementwise(name, EwFn::add,
                       {b.elementwise(name + " hh+hl", EwFn::add, {hh, hl}, -1), lh}, -1);
}

// The chunk tile (1, tile, 1, C, C) of a [B, N, H, C, C] array at grid (b, h, n).
IndexMap tile_map() { return IndexMap({axis(0), axis(2), axis(1), constant(0), constant(0)}); }

}  // namespace

std::shared_ptr<const Kernel> invert_ladder(const GdnShape& s, int64_t tile_n,
                                            LadderProducts products) {
  s.check();
  const int64_t C = s.chunk, N = s.chunks();
  if ((C & (C - 1)) != 0)
    throw Error(fmt::format("GDN inversion ladder: chunk {} is not a power of two", C));
  if (tile_n < 1 || N % tile_n != 0)
    throw Error(
        fmt::format("GDN inversion ladder: tile_n {} must divide the {} chunks", tile_n, N));
  KernelBuilder kb(fmt::format("gdn invert ladder (tile_n={}{})", tile_n,
                               products == LadderProducts::bf16x3 ? "" : ", bf16 dots"));
  kb.grid({s.batch, s.heads, N / tile_n}, {kPar, kPar, kPar});
  const Shape array{s.batch, N, s.heads, C, C}, block{1, tile_n, 1, C, C}, tile{tile_n, C, C};
  const ValueId S = kb.reshape("S", kb.input({"S", array, DType::f32}, block, tile_map()), tile);
  const ValueId A = kb.output({"A", array, DType::f32}, block, tile_map());
  const ValueId one = kb.fill("1", kb.temp("one", {1, 1, 1}, DType::f32), 1.0);
  ValueId X = kb.mask("X = I", one, MaskKind::diagonal, 0, 0, tile);
  for (int64_t b = 1; b < C; b *= 2) {
    const ValueId Sb = kb.mask(fmt::format("S_{}", b), S, MaskKind::sibling_block, 0, b);
    const auto product = [&](const std::string& name, ValueId l, ValueId r) {
      return products == LadderProducts::bf16x3
                 ? dot_bf16x3(kb, name, l, r)
                 : kb.dot(name, l, r, DType::f32, nn(), Precision::default_);
    };
    const ValueId Y = product(fmt::format("S_{} X", b), Sb, X);
    const ValueId Z = product(fmt::format("X (S_{} X)", b), X, Y);
    X = kb.elementwise(fmt::format("X -= X S_{} X", b), EwFn::sub, {X, Z}, -1);
  }
  kb.copy("A = X", X, A);
  return kb.build();
}

Program invert_vjp(const GdnShape& s) {
  s.check();
  const int64_t C = s.chunk, N = s.chunks();
  const Shape array{s.batch, N, s.heads, C, C};
  // Two XLA fusions, as the compiled VJP has them (docs/kernels/gdn.md): the inner product's
  // result goes through HBM to the second.
  auto fusion = [&](const std::string& name, auto body) {
    return fit_xla_tile(N, [&](int64_t tile) {
      KernelBuilder kb(name, Origin::xla);
      kb.grid({s.batch, s.heads, N / tile}, {kPar, kPar, kPar});
      const Shape block{1, tile, 1, C, C}, view{tile, C, C};
      auto in = [&](const std::string& n) {
        return kb.reshape(n, kb.input({n, array, DType::f32}, block, tile_map()), view);
      };
      body(kb, in, kb.output({name, array, DType::f32}, block, tile_map()));
      return kb.build();
    });
  };
  Program p;
  p.name = "gdn invert vjp (xla)";
  p.add_kernel(fusion("dA A^T", [&](KernelBuilder& kb, auto in, ValueId out) {
    kb.copy("store", kb.dot("dA A^T", in("dA"), in("A"), DType::f32, nt(), Precision::highest),
            out);
  }));
  p.add_kernel(fusion("dS", [&](KernelBuilder& kb, auto in, ValueId out) {
    const ValueId t2 =
        kb.dot("A^T (dA A^T)", in("A"), in("dA A^T"), DType::f32, tn(), Precision::highest);
    kb.copy("dS", kb.mask("-tril_(.)", kb.scale("-", t2, -1.0), MaskKind::strict_lower), out);
  }));
  return p;
}

}  // namespace tpusim::kernels::gdn
