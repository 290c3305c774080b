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

namespace {

// One XLA fusion over the chunk tiles of [B, N, H, C, C] arrays, as large a tile of chunks as
// XLA's scoped VMEM allows: body(kb, in, out) reads its operands with in(name[, dtype]) and
// writes out, the array `result`.
template <class Body>
std::shared_ptr<const Kernel> chunk_tile_fusion(const GdnShape& s, const std::string& name,
                                                const std::string& result, DType out_type,
                                                Body body) {
  const int64_t C = s.chunk, N = s.chunks();
  const Shape array{s.batch, N, s.heads, C, C};
  return fit_xla_tile(N, [&](int64_t tile) {
    KernelBuilder kb(name + " (xla)", Origin::xla);
    kb.grid({s.batch, s.heads, N / tile}, {kPar, kPar, kPar});
    const Shape block{1, tile, 1, C, C}, view{tile, C, C};
    auto in = [&](const std::string& n, DType t = DType::f32) {
      return kb.reshape(n, kb.input({n, array, t}, block, tile_map()), view);
    };
    body(kb, in, kb.output({result, array, out_type}, block, tile_map()));
    return kb.build();
  });
}

// The VJP dS = -A^T (dA A^T) in two fusions, the inner product's result through HBM.
Program product_vjp(const GdnShape& s, const std::string& name, Precision precision,
                    bool strictly_lower) {
  s.check();
  Program p;
  p.name = name;
  p.add_kernel(chunk_tile_fusion(
      s, "dA A^T", "dA A^T", DType::f32, [&](KernelBuilder& kb, auto in, ValueId out) {
        kb.copy("store", kb.dot("dA A^T", in("dA"), in("A"), DType::f32, nt(), precision), out);
      }));
  p.add_kernel(
      chunk_tile_fusion(s, "dS", "dS", DType::f32, [&](KernelBuilder& kb, auto in, ValueId out) {
        const ValueId t2 =
            kb.dot("A^T (dA A^T)", in("A"), in("dA A^T"), DType::f32, tn(), precision);
        const ValueId neg = kb.scale("-", t2, -1.0);
        kb.copy("dS", strictly_lower ? kb.mask("-tril_(.)", neg, MaskKind::strict_lower) : neg,
                out);
      }));
  return p;
}

}  // namespace

Program invert_vjp(const GdnShape& s) {
  // Two XLA fusions, as the compiled VJP has them (docs/kernels/gdn.md).
  return product_vjp(s, "gdn invert vjp (xla)", Precision::highest, true);
}

Program doubling_inverse(const GdnShape& s) {
  s.check();
  const int64_t C = s.chunk;
  if (C < 2 || (C & (C - 1)) != 0)
    throw Error(fmt::format("GDN doubling inverse: chunk {} is not a power of two", C));
  int64_t levels = 0;
  while ((int64_t{1} << levels) < C) ++levels;  // ceil(log2 C)
  Program p;
  p.name = "gdn doubling inverse (xla)";
  // E_0 = -S is read from S; later E live as bf16, the dtype of a default-precision product's
  // operands (the v6e compile stores them so). A_0 = I is a constant inside the first fusion.
  std::string e = "S";
  DType e_type = DType::f32;
  std::string a;
  for (int64_t l = 1; l <= levels; ++l) {
    // The last level writes the inverse under the name the WY stage reads.
    const std::string a_next = l == levels ? "A" : fmt::format("A_{}", l),
                      e_next = fmt::format("E_{}", l);
    p.add_kernel(chunk_tile_fusion(
        s, fmt::format("doubling {}: A + A E", l), a_next, DType::f32,
        [&](KernelBuilder& kb, auto in, ValueId out) {
          const ValueId E = l == 1 ? kb.scale("E_0 = -S", in(e, e_type), -1.0) : in(e, e_type);
          const ValueId A =
              a.empty() ? kb.mask("I", kb.fill("1", kb.temp("one", {1, 1, 1}, DType::f32), 1.0),
                                  MaskKind::diagonal, 0, 0, kb.value(E).shape)
                        : in(a);
          const ValueId AE = kb.dot("A E", A, E, DType::f32, nn(), Precision::default_);
          kb.copy("store",
                  kb.mask("tril(A + A E)", kb.elementwise("A + A E", EwFn::add, {A, AE}, -1),
                          MaskKind::lower),
                  out);
        }));
    if (l < levels)  // the last level's E is never used
      p.add_kernel(chunk_tile_fusion(
          s, fmt::format("doubling {}: E E", l), e_next, DType::bf16,
          [&](KernelBuilder& kb, auto in, ValueId out) {
            const ValueId E = l == 1 ? kb.scale("E_0 = -S", in(e, e_type), -1.0) : in(e, e_type);
            kb.copy("store",
                    kb.cast("bf16",
                            kb.mask("tril(E E, -1)",
                                    kb.dot("E E", E, E, DType::f32, nn(), Precision::default_),
                                    MaskKind::strict_lower),
                            DType::bf16),
                    out);
          }));
    a = a_next;
    e = e_next;
    e_type = DType::bf16;
  }
  return p;
}

Program doubling_vjp(const GdnShape& s) {
  return product_vjp(s, "gdn doubling inverse vjp (xla)", Precision::default_, false);
}

}  // namespace tpusim::kernels::gdn
