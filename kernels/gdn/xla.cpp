#include "kernels/gdn/xla.h"

#include <fmt/format.h>

#include <utility>

#include "kernels/gdn/builder_util.h"
#include "kernels/gdn/invert.h"
#include "kernels/gdn/xla_fusion.h"

namespace tpusim::kernels::gdn {
namespace {

constexpr auto kPar = DimSemantics::parallel;

}  // namespace

std::shared_ptr<const Kernel> xla_prep(const GdnShape& s) {
  return fit_xla_tile(s.heads, [&](int64_t hb) {
    ChunkFusion f("gdn prep", s, hb);
    const int64_t C = s.chunk;
    for (const char* n : {"q", "k"}) {  // l2norm over Dk, then the chunk-major layout
      const ValueId x = f.in(std::string(n) + " tokens", C, s.dk, s.compute);
      const ValueId ss = f.kb.reduce(std::string("sum ") + n + "^2",
                                     f.ew(std::string(n) + "^2", EwFn::mul, {x, x}), {2});
      const ValueId r = f.kb.elementwise("rsqrt", EwFn::rsqrt,
                                         {f.kb.with_scalar("+eps", EwFn::add, ss, 1e-6)}, -1);
      f.out(n, f.ew(std::string("l2norm ") + n, EwFn::mul, {x, r}), C, s.dk, s.compute);
    }
    f.out("v", f.in("v tokens", C, s.dv, s.compute), C, s.dv, s.compute);
    f.out("beta", f.in("beta tokens", C, 1, s.compute), C, 1, s.compute);
    f.out("g tokens f32", f.in("g tokens", C, 1, DType::f32), C, 1, DType::f32);
    return f.kb.build();
  });
}

std::shared_ptr<const Kernel> xla_gates_s(const GdnShape& s) {
  return fit_xla_tile(s.heads, [&](int64_t hb) {
    ChunkFusion f("gdn gates + S", s, hb);
    const int64_t C = s.chunk;
    const ValueId k = f.in("k", C, s.dk, s.compute);
    const ValueId beta = f.in("beta", C, 1, s.compute);
    const ValueId g = f.in("g tokens f32", C, 1, DType::f32);
    // cumsum over the chunk as a product with a lower-triangular ones matrix (exact at HIGHEST).
    const ValueId ones =
        f.kb.mask("tril(1)", f.kb.fill("1", f.kb.temp("one", {1, 1, 1}, DType::f32), 1.0),
                  MaskKind::lower, 0, 0, {f.hb, C, C});
    const ValueId g_cum = f.dot("cumsum g", ones, g, nn());
    const ValueId k_beta = f.ew("k beta", EwFn::mul, {k, beta});
    // jnp.matmul of compute-dtype operands returns the compute dtype (bf16 in training).
    const ValueId s_raw = f.kb.dot("k_beta k^T", f.kb.cast("k_beta.c", k_beta, s.compute), k,
                                   s.compute, nt(), Precision::highest);
    const ValueId decay = f.kb.elementwise(
        "exp", EwFn::exp,
        {f.kb.mask("tril_(g_i - g_j)",
                   f.ew("g_i - g_j", EwFn::sub, {g_cum, f.kb.reshape("g^T", g_cum, {f.hb, 1, C})}),
                   MaskKind::strict_lower)},
        -1);
    f.out("S",
          f.kb.mask("S", f.ew("S_raw e^gd", EwFn::mul, {s_raw, decay}), MaskKind::strict_lower), C,
          C, DType::f32);
    f.out("g", g_cum, C, 1, DType::f32);
    return f.kb.build();
  });
}

std::shared_ptr<const Kernel> xla_wy(const GdnShape& s) {
  return fit_xla_tile(s.heads, [&](int64_t hb) {
    ChunkFusion f("gdn WY", s, hb);
    const int64_t C = s.chunk;
    const ValueId A = f.in("A", C, C, DType::f32);
    const ValueId v = f.in("v", C, s.dv, s.compute);
    const ValueId k = f.in("k", C, s.dk, s.compute);
    const ValueId beta = f.in("beta", C, 1, s.compute);
    const ValueId g = f.in("g", C, 1, DType::f32);
    const ValueId v_beta =
        f.kb.cast("f32(v beta)", f.ew("v beta", EwFn::mul, {v, beta}), DType::f32);
    f.out("u", f.dot("u = A v_beta", A, v_beta, nn()), C, s.dv, s.compute);
    const ValueId k_bg =
        f.ew("k beta e^g", EwFn::mul,
             {f.kb.cast("f32(k beta)", f.ew("k beta", EwFn::mul, {k, beta}), DType::f32),
              f.kb.elementwise("e^g", EwFn::exp, {g}, -1)});
    f.out("w", f.dot("w = A k_bg", A, k_bg, nn()), C, s.dk, s.compute);
    return f.kb.build();
  });
}

std::shared_ptr<const Kernel> xla_wy_backward(const GdnShape& s) {
  return fit_xla_tile(s.heads, [&](int64_t hb) {
    ChunkFusion f("gdn WY bwd", s, hb);
    const int64_t C = s.chunk;
    const ValueId dw = f.in("dw", C, s.dk, s.compute), du = f.in("du", C, s.dv, s.compute);
    const ValueId A = f.in("A", C, C, DType::f32);
    const ValueId k = f.in("k", C, s.dk, s.compute), v = f.in("v", C, s.dv, s.compute);
    const ValueId beta = f.in("beta", C, 1, s.compute), g = f.in("g", C, 1, DType::f32);
    const ValueId eg = f.kb.elementwise("e^g", EwFn::exp, {g}, -1);
    const ValueId k_bg = f.ew("k beta e^g", EwFn::mul, {f.ew("k beta", EwFn::mul, {k, beta}), eg});
    const ValueId v_b = f.kb.cast("f32(v beta)", f.ew("v beta", EwFn::mul, {v, beta}), DType::f32);
    const ValueId dwf = f.kb.cast("f32(dw)", dw, DType::f32),
                  duf = f.kb.cast("f32(du)", du, DType::f32);
    const ValueId dA =
        f.ew("dA", EwFn::add,
             {f.dot("dw k_bg^T", dwf, k_bg, nt()), f.dot("du v_beta^T", duf, v_b, nt())});
    const ValueId dk_bg = f.dot("A^T dw", A, dwf, tn());
    const ValueId dv_b = f.dot("A^T du", A, duf, tn());
    f.out("dA", dA, C, C, DType::f32);
    f.out("dk_beta", f.ew("dk_bg e^g", EwFn::mul, {dk_bg, eg}), C, s.dk, DType::f32);
    f.out("dv", f.ew("dv_b beta", EwFn::mul, {dv_b, beta}), C, s.dv, DType::f32);
    f.out("dg_wy",
          f.kb.reduce("rowsum(dk_bg k_bg)", f.ew("dk_bg k_bg", EwFn::mul, {dk_bg, k_bg}), {2}), C,
          1, DType::f32);
    f.out("dbeta_v", f.kb.reduce("rowsum(dv_b v)", f.ew("dv_b v", EwFn::mul, {dv_b, v}), {2}), C, 1,
          DType::f32);
    return f.kb.build();
  });
}

std::shared_ptr<const Kernel> xla_s_backward(const GdnShape& s) {
  return fit_xla_tile(s.heads, [&](int64_t hb) {
    ChunkFusion f("gdn S bwd", s, hb);
    const int64_t C = s.chunk;
    const ValueId dS = f.in("dS", C, C, DType::f32), S = f.in("S", C, C, DType::f32);
    const ValueId k = f.in("k", C, s.dk, s.compute), beta = f.in("beta", C, 1, s.compute);
    const ValueId g = f.in("g", C, 1, DType::f32), dk_beta = f.in("dk_beta", C, s.dk, DType::f32);
    const ValueId gd = f.kb.mask(
        "tril_(g_i - g_j)", f.ew("g_i - g_j", EwFn::sub, {g, f.kb.reshape("g^T", g, {f.hb, 1, C})}),
        MaskKind::strict_lower);
    const ValueId ds_raw = f.kb.cast(
        "dS_raw", f.ew("dS e^gd", EwFn::mul, {dS, f.kb.elementwise("e^gd", EwFn::exp, {gd}, -1)}),
        s.compute);
    const ValueId k_beta = f.kb.cast("k beta", f.ew("k beta", EwFn::mul, {k, beta}), s.compute);
    const ValueId dkb =
        f.ew("dk_beta total", EwFn::add,
             {dk_beta, f.kb.dot("dS_raw k", ds_raw, k, DType::f32, nn(), Precision::highest)});
    const ValueId dk =
        f.ew("dk", EwFn::add,
             {f.ew("dk_beta beta", EwFn::mul, {dkb, beta}),
              f.kb.dot("dS_raw^T k_beta", ds_raw, k_beta, DType::f32, tn(), Precision::highest)});
    const ValueId dsS = f.ew("dS S", EwFn::mul, {dS, S});
    f.out("dk_s", dk, C, s.dk, DType::f32);
    f.out("dg_s",
          f.ew("rowsum - colsum", EwFn::sub,
               {f.kb.reduce("rowsum", dsS, {2}),
                f.kb.reshape("colsum^T", f.kb.reduce("colsum", dsS, {1}), {f.hb, C, 1})}),
          C, 1, DType::f32);
    f.out("dbeta_k", f.kb.reduce("rowsum(dk_beta k)", f.ew("dk_beta k", EwFn::mul, {dkb, k}), {2}),
          C, 1, DType::f32);
    return f.kb.build();
  });
}

std::shared_ptr<const Kernel> xla_prep_backward(const GdnShape& s) {
  return fit_xla_tile(s.heads, [&](int64_t hb) {
    ChunkFusion f("gdn prep bwd", s, hb);
    const int64_t C = s.chunk;
    // The cotangents summed per input: q's come from the scan alone; k's from the scan and from
    // the S backward (which takes in the WY backward's); g's from the scan, the WY and the S
    // backward; beta's from the WY and the S backward. Then the l2norm backward of q and k (their
    // normed values are the prep's outputs) and back to token-major.
    auto sum = [&](const std::string& name, const std::vector<std::string>& parts, int64_t cols) {
      ValueId total = f.in(parts.front(), C, cols, DType::f32);
      for (size_t i = 1; i < parts.size(); ++i)
        total = f.ew(name, EwFn::add, {total, f.in(parts[i], C, cols, DType::f32)});
      return total;
    };
    const ValueId dq = sum("dq", {"dq"}, s.dk), dk = sum("dk total", {"dk", "dk_s"}, s.dk);
    for (const auto& [N, dx] : {std::pair{std::string("q"), dq}, std::pair{std::string("k"), dk}}) {
      const ValueId x = f.in(N, C, s.dk, s.compute);
      const ValueId proj =
          f.kb.reduce("<d" + N + ", " + N + ">", f.ew("d" + N + " " + N, EwFn::mul, {dx, x}), {2});
      f.out("d" + N + " tokens",
            f.ew("l2norm bwd " + N, EwFn::sub, {dx, f.ew("proj " + N, EwFn::mul, {proj, x})}), C,
            s.dk, s.compute);
    }
    f.out("dv tokens", f.in("dv", C, s.dv, DType::f32), C, s.dv, s.compute);
    f.out("dg tokens", sum("dg total", {"dg", "dg_wy", "dg_s"}, 1), C, 1, DType::f32);
    f.out("dbeta tokens", sum("dbeta total", {"dbeta_v", "dbeta_k"}, 1), C, 1, DType::f32);
    return f.kb.build();
  });
}

namespace {

// XLA's TPU InvertDiagBlocksLowerTriangular over the [B, N, H, C, C] diagonal blocks. Its scoped
// VMEM is five [C, C] f32 blocks whatever their number (344,064 B on v5e, 327,680 on v6e, 348,160
// on v5p at C 128, for 1024 and for 2048 blocks): one block at a time, in and out double-buffered
// and one at work, so each block is read and written once. Inside a block, forward substitution's
// C - 1 dependent row steps x[j] = -a[j] . x run on the vector units: a multiply by the row, a
// reduction over the rows and the row's update. The algorithm is not public: the ops have the
// shapes and the dependences of the row-oriented substitution, not its exact indices (so the
// kernel does not run functionally), and each step's latency beyond its vector work is the
// chip's calibrated xla_row_solve_step_cycles. On a megacore chip it runs on one TensorCore: the
// compiled v5p custom call carries no megacore_config, where the fusions around it name their
// megacore_split_dim; so its grid is not split (arbitrary).
std::shared_ptr<const Kernel> invert_blocks(const GdnShape& s) {
  const int64_t C = s.chunk, N = s.chunks();
  const Shape arr{s.batch, N, s.heads, C, C}, blk{1, 1, 1, C, C}, view{C, C};
  const IndexMap one_block({axis(0), axis(2), axis(1), constant(0), constant(0)});
  KernelBuilder kb("InvertDiagBlocksLowerTriangular (xla)", Origin::xla);
  constexpr auto kOneCore = DimSemantics::arbitrary;
  kb.grid({s.batch, s.heads, N}, {kOneCore, kOneCore, kOneCore});
  const ValueId a = kb.reshape("a", kb.input({"S", arr, DType::f32}, blk, one_block), view);
  const ValueId x = kb.reshape("x", kb.output({"x", arr, DType::f32}, blk, one_block), view);
  kb.mask("x = -I", kb.fill("-1", kb.temp("m1", {1, 1}, DType::f32), -1.0), MaskKind::diagonal, 0,
          0, view, {}, x);
  for (int64_t j = 1; j < C; ++j) {
    const ValueId row = kb.slice(fmt::format("a[{}]", j), a, 1, j, 1);  // as a [C, 1] column
    const ValueId terms = kb.elementwise("a[j] * x", EwFn::mul, {row, x}, -1);
    const ValueId dot = kb.reduce("a[j] . x", terms, {0});
    kb.kernel().body.back().latency = Latency::xla_row_solve_step;
    kb.elementwise("x[j] = -a[j] . x", EwFn::sub, {x, dot}, x);
  }
  return kb.build();
}

// The final product of the expander: A = inv x b with b = I, tb chunks x hb heads per step.
std::shared_ptr<const Kernel> solve_product_tiled(const GdnShape& s, int64_t tb, int64_t hb) {
  const int64_t C = s.chunk, N = s.chunks();
  const Shape arr{s.batch, N, s.heads, C, C}, blk{1, tb, hb, C, C}, view{tb * hb, C, C};
  const IndexMap tiles({axis(0), axis(2), axis(1), constant(0), constant(0)});
  KernelBuilder kb("solve inv x b (xla)", Origin::xla);
  kb.grid({s.batch, s.heads / hb, N / tb}, {kPar, kPar, kPar});
  const ValueId inv = kb.reshape("inv", kb.input({"x", arr, DType::f32}, blk, tiles), view);
  const ValueId b = kb.mask("b = I", kb.fill("1", kb.temp("one", {1, 1, 1}, DType::f32), 1.0),
                            MaskKind::diagonal, 0, 0, view);
  kb.copy("store A", kb.dot("inv x b", inv, b, DType::f32, nn(), Precision::highest),
          kb.output({"A", arr, DType::f32}, blk, tiles));
  return kb.build();
}

// The product's tiles, like every XLA fusion's as large as the scoped VMEM allows (chunks first,
// then heads).
std::shared_ptr<const Kernel> solve_product(const GdnShape& s) {
  const int64_t tb = default_tile(s.chunks());
  for (int64_t hb : kTileChoices)
    if (s.heads % hb == 0) {
      auto k = solve_product_tiled(s, tb, hb);
      if (vmem_usage(*k).total_bytes <= kXlaVmemBudget) return k;
    }
  return solve_product_tiled(s, tb, 1);
}

}  // namespace

Program xla_invert_diagonal_blocks(const GdnShape& s) {
  Program p;
  p.name = "solve_triangular";
  p.add_kernel(invert_blocks(s));
  return p;
}

Program xla_solve_triangular(const GdnShape& s) {
  Program p = xla_invert_diagonal_blocks(s);
  p.add_kernel(solve_product(s));
  return p;
}

std::shared_ptr<const Kernel> xla_inverse_product(const GdnShape& s) { return solve_product(s); }

std::shared_ptr<const Kernel> xla_solve_vjp_product(const GdnShape& s) {
  return fit_xla_tile(s.heads, [&](int64_t hb) {
    ChunkFusion f("solve vjp ct X^T", s, hb);
    const int64_t C = s.chunk;
    const ValueId ct = f.in("dA", C, C, DType::f32), X = f.in("A", C, C, DType::f32);
    f.out("dS",
          f.kb.mask("-tril_(ct X^T)", f.kb.scale("-", f.dot("ct X^T", ct, X, nt()), -1.0),
                    MaskKind::strict_lower),
          C, C, DType::f32);
    return f.kb.build();
  });
}

namespace {

// A_i = gamma I - kd^T w and B_i = kd^T u for one chunk of all heads (kd = k e^(g_last - g)).
std::shared_ptr<const Kernel> cp_chunk_map(const GdnShape& s, const std::string& name) {
  return fit_xla_tile(s.heads, [&](int64_t hb) {
    IterationFusion f(name, s, hb);
    const int64_t C = s.chunk, Dk = s.dk, Dv = s.dv;
    const ValueId w = f.in("w[n]", C, Dk, s.compute), u = f.in("u[n]", C, Dv, s.compute),
                  k = f.in("k[n]", C, Dk, s.compute), g = f.in("g[n]", C, 1, DType::f32);
    const auto [g_last, gamma, dvec, kd] = f.g.chunk_end_decay(g, k);
    const ValueId eye = f.kb.mask("I", f.kb.fill("1", f.kb.temp("one", {1, 1, 1}, DType::f32), 1.0),
                                  MaskKind::diagonal, 0, 0, {hb, Dk, Dk});
    f.out("A_i",
          f.ew("A_i", EwFn::sub,
               {f.ew("gamma I", EwFn::mul, {eye, gamma}),
                f.dot("kd^T w", kd, f.kb.cast("f32(w)", w, DType::f32), tn())}),
          Dk, Dk, DType::f32);
    f.out("B_i", f.dot("kd^T u", kd, f.kb.cast("f32(u)", u, DType::f32), tn()), Dk, Dv, DType::f32);
    return f.kb.build();
  });
}

// (A_r, B_r) o (A_l, B_l) = (A_r A_l, A_r B_l + B_r) over all heads: one chunk folded into the
// carry, or one device's prefix into another's.
std::shared_ptr<const Kernel> cp_compose(const GdnShape& s, const std::string& name,
                                         bool stack_carry) {
  return fit_xla_tile(s.heads, [&](int64_t hb) {
    IterationFusion f(name, s, hb);
    const int64_t Dk = s.dk, Dv = s.dv;
    const ValueId Ar = f.in("A_r", Dk, Dk, DType::f32), Br = f.in("B_r", Dk, Dv, DType::f32),
                  Al = f.in("A_l", Dk, Dk, DType::f32), Bl = f.in("B_l", Dk, Dv, DType::f32);
    f.out("A", f.dot("A_r A_l", Ar, Al, nn()), Dk, Dk, DType::f32);
    f.out("B", f.ew("A_r B_l + B_r", EwFn::add, {f.dot("A_r B_l", Ar, Bl, nn()), Br}), Dk, Dv,
          DType::f32);
    if (stack_carry) {  // the incoming carry, stacked per chunk for the backward
      f.out("res A", Al, Dk, Dk, DType::f32);
      f.out("res B", Bl, Dk, Dv, DType::f32);
    }
    return f.kb.build();
  });
}

// The transpose of cp_compose: dA_l = A_r^T dA, dB_l = A_r^T dB, dA_r = dA A_l^T + dB B_l^T,
// dB_r = dB.
std::shared_ptr<const Kernel> cp_compose_transpose(const GdnShape& s, const std::string& name) {
  return fit_xla_tile(s.heads, [&](int64_t hb) {
    IterationFusion f(name, s, hb);
    const int64_t Dk = s.dk, Dv = s.dv;
    const ValueId Ar = f.in("A_r", Dk, Dk, DType::f32), Al = f.in("A_l", Dk, Dk, DType::f32),
                  Bl = f.in("B_l", Dk, Dv, DType::f32), dA = f.in("dA", Dk, Dk, DType::f32),
                  dB = f.in("dB", Dk, Dv, DType::f32);
    f.out("dA_l", f.dot("A_r^T dA", Ar, dA, tn()), Dk, Dk, DType::f32);
    f.out("dB_l", f.dot("A_r^T dB", Ar, dB, tn()), Dk, Dv, DType::f32);
    f.out(
        "dA_r",
        f.ew("dA_r", EwFn::add, {f.dot("dA A_l^T", dA, Al, nt()), f.dot("dB B_l^T", dB, Bl, nt())}),
        Dk, Dk, DType::f32);
    return f.kb.build();
  });
}

// The transpose of cp_chunk_map into the chunk's xs cotangents: dkd = u dB^T - w dA_i^T,
// dw = -kd dA_i, du = kd dB, then dk and dg through the decay.
std::shared_ptr<const Kernel> cp_chunk_map_transpose(const GdnShape& s) {
  return fit_xla_tile(s.heads, [&](int64_t hb) {
    IterationFusion f("cp chunk map bwd", s, hb);
    const int64_t C = s.chunk, Dk = s.dk, Dv = s.dv;
    const ValueId w = f.kb.cast("f32(w)", f.in("w[n]", C, Dk, s.compute), DType::f32),
                  u = f.kb.cast("f32(u)", f.in("u[n]", C, Dv, s.compute), DType::f32),
                  k = f.in("k[n]", C, Dk, s.compute), g = f.in("g[n]", C, 1, DType::f32);
    const ValueId dA = f.in("dA_i", Dk, Dk, DType::f32), dB = f.in("dB_i", Dk, Dv, DType::f32);
    const auto [g_last, gamma, dvec, kd] = f.g.chunk_end_decay(g, k);
    const ValueId dkd =
        f.ew("dkd", EwFn::sub, {f.dot("u dB^T", u, dB, nt()), f.dot("w dA^T", w, dA, nt())});
    f.out("dw[n] (cp)", f.kb.scale("dw", f.dot("kd dA", kd, dA, nn()), -1.0), C, Dk, DType::f32);
    f.out("du[n] (cp)", f.dot("kd dB", kd, dB, nn()), C, Dv, DType::f32);
    f.out("dk[n] (cp)", f.ew("dk", EwFn::mul, {dkd, dvec}), C, Dk, DType::f32);
    f.out("dg[n] (cp)", f.kb.reduce("dg", f.ew("dkd k", EwFn::mul, {dkd, k}), {2}), C, 1,
          DType::f32);
    return f.kb.build();
  });
}

// A state-sized copy that takes what a ppermute delivered (so what follows waits for it).
std::shared_ptr<const Kernel> cp_take(const GdnShape& s, const std::string& name,
                                      const std::string& in, const std::string& out) {
  return fit_xla_tile(s.heads, [&](int64_t hb) {
    IterationFusion f(name, s, hb);
    f.out(out, f.in(in, s.dk, s.dv, DType::f32), s.dk, s.dv, DType::f32);
    return f.kb.build();
  });
}

int64_t prefix_rounds(int64_t devices) {
  int64_t r = 0;
  while ((int64_t{1} << r) < devices) ++r;
  return r;
}

Collective cp_permute(const GdnShape& s, const MeshAxis& context) {
  return {CollectiveKind::permute, s.batch * s.heads * (s.dk * s.dk + s.dk * s.dv) * 4, context};
}

}  // namespace

Program xla_cp_compose_local(const GdnShape& s, bool stack_carries) {
  Program p;
  p.name = "cp compose local";
  p.add_loop(p.name,
             {cp_chunk_map(s, "cp chunk map"), cp_compose(s, "cp fold chunk", stack_carries)},
             s.chunks());
  return p;
}

Program xla_cp_compose_local_backward(const GdnShape& s) {
  Program p;
  p.name = "cp compose local bwd";
  // The checkpointed body recomputes (A_i, B_i) from the chunk, then transposes the fold.
  p.add_loop(p.name,
             {cp_chunk_map(s, "cp chunk map (recompute)"),
              cp_compose_transpose(s, "cp fold chunk bwd"), cp_chunk_map_transpose(s)},
             s.chunks());
  return p;
}

Program xla_cp_prefix(const GdnShape& s, const MeshAxis& context) {
  Program p;
  p.name = "cp prefix";
  int last = -1;
  for (int64_t r = 0; r < prefix_rounds(context.size); ++r) {
    const int x =
        p.add_collective(fmt::format("cp ppermute (A, B) round {}", r), cp_permute(s, context),
                         last < 0 ? std::vector<int>{} : std::vector<int>{last});
    last = p.add_kernel(cp_compose(s, "cp prefix compose", false), {x});
  }
  // The exclusive prefix: every device takes its left neighbour's inclusive prefix; with
  // h_init = 0 the incoming state is its B.
  const int shift = p.add_collective("cp ppermute shift", cp_permute(s, context),
                                     last < 0 ? std::vector<int>{} : std::vector<int>{last});
  p.add_kernel(cp_take(s, "cp h_in", "B prefix", "h_in"), {shift});
  return p;
}

Program xla_cp_prefix_backward(const GdnShape& s, const MeshAxis& context) {
  Program p;
  p.name = "cp prefix bwd";
  int last = p.add_collective("cp ppermute shift (cotangent)", cp_permute(s, context));
  for (int64_t r = prefix_rounds(context.size) - 1; r >= 0; --r) {
    const int k = p.add_kernel(cp_compose_transpose(s, "cp prefix compose bwd"), {last});
    last = p.add_collective(fmt::format("cp ppermute (dA, dB) round {}", r), cp_permute(s, context),
                            {k});
  }
  p.add_kernel(cp_take(s, "cp dB of the local map", "dB", "dB local"), {last});
  return p;
}

}  // namespace tpusim::kernels::gdn
