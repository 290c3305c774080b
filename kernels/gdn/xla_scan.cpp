// The main build's lax.scan over chunks as XLA compiles it (C1's compiled loops): the forward
// walk, its recompute that stacks residuals, and the reverse walk.
#include <string>
#include <utility>

#include "kernels/gdn/xla.h"
#include "kernels/gdn/xla_fusion.h"

namespace tpusim::kernels::gdn {

// One trip of the main build's lax.scan over chunks, one fusion per dot as compiled (C1's forward
// loop body: 5 dot fusions a trip). The recompute under remat also stacks the residuals the
// reverse walk reads, each by a dynamic-update-slice fusion of its own that recomputes its value
// from what it reads (C1's recompute loop: 20 ops a trip against the forward's 11; docs/kernels/
// gdn.md, "The lax.scan loops as compiled").
Program xla_lax_scan_forward(const GdnShape& s, bool save_residuals) {
  const int64_t C = s.chunk, Dk = s.dk, Dv = s.dv;
  const DType cd = s.compute, f32 = DType::f32;
  LoopBody body(s);
  auto e_g = [&](IterationFusion& f) {
    return f.kb.elementwise("e^g", EwFn::exp, {f.in("g[n]", C, 1, f32)}, -1);
  };
  if (save_residuals)  // the state entering the chunk, before the walk replaces it
    body.add("res h",
             [&](IterationFusion& f) { f.out("res h", f.in("h", Dk, Dv, f32), Dk, Dv, f32); });
  body.add("scan q_g h", [&](IterationFusion& f) {
    const ValueId q_g = f.ew("q_g", EwFn::mul, {f.in("q[n]", C, Dk, cd), e_g(f)});
    f.out("attn_inter", f.dot("q_g h", q_g, f.in("h", Dk, Dv, f32), nn()), C, Dv, f32);
  });
  body.add("scan w h", [&](IterationFusion& f) {
    const ValueId w = f.kb.cast("f32(w)", f.in("w[n]", C, Dk, cd), f32);
    f.out("v_new",
          f.ew("v_new = u - w h", EwFn::sub,
               {f.in("u[n]", C, Dv, cd), f.dot("w h", w, f.in("h", Dk, Dv, f32), nn())}),
          C, Dv, f32);
  });
  // jnp.matmul of the bf16 q and k returns bf16.
  body.add("scan q k^T", [&](IterationFusion& f) {
    f.out("q k^T",
          f.kb.dot("q k^T", f.in("q[n]", C, Dk, cd), f.in("k[n]", C, Dk, cd), cd, nt(),
                   Precision::highest),
          C, C, cd);
  });
  auto attn_i = [&](IterationFusion& f) {
    const ValueId decay = f.g.decay(f.in("g[n]", C, 1, f32), f.hb);
    const ValueId p = f.kb.cast("f32(q k^T)", f.in("q k^T", C, C, cd), f32);
    return std::pair{f.ew("attn_i", EwFn::mul, {p, decay}), decay};
  };
  body.add("scan o", [&](IterationFusion& f) {
    const ValueId attn = attn_i(f).first;
    const ValueId o = f.dot("attn_i v_new", attn, f.in("v_new", C, Dv, f32), nn());
    f.out("o[n]", f.ew("o_c", EwFn::add, {f.in("attn_inter", C, Dv, f32), o}), C, Dv, f32);
  });
  auto chunk_end = [&](IterationFusion& f) {
    return f.g.chunk_end_decay(f.in("g[n]", C, 1, f32), f.in("k[n]", C, Dk, cd));
  };
  body.add("scan state", [&](IterationFusion& f) {
    const auto e = chunk_end(f);
    f.out("h",
          f.ew("h_new", EwFn::add,
               {f.ew("h gamma", EwFn::mul, {f.in("h", Dk, Dv, f32), e.gamma}),
                f.dot("kd^T v_new", e.kd, f.in("v_new", C, Dv, f32), tn())}),
          Dk, Dv, f32);
  });
  if (save_residuals) {
    body.add("res q_g", [&](IterationFusion& f) {
      f.out("res q_g", f.ew("q_g", EwFn::mul, {f.in("q[n]", C, Dk, cd), e_g(f)}), C, Dk, f32);
    });
    body.add("res f32(w)", [&](IterationFusion& f) {
      f.out("res f32(w)", f.kb.cast("f32(w)", f.in("w[n]", C, Dk, cd), f32), C, Dk, f32);
    });
    body.add("res v_new", [&](IterationFusion& f) {
      f.out("res v_new", f.in("v_new", C, Dv, f32), C, Dv, f32);
    });
    body.add("res attn_i decay", [&](IterationFusion& f) {
      const auto [attn, decay] = attn_i(f);
      f.out("res attn_i", attn, C, C, f32);
      f.out("res decay", decay, C, C, f32);
    });
    body.add("res kd", [&](IterationFusion& f) { f.out("res kd", chunk_end(f).kd, C, Dk, f32); });
  }
  Program p;
  p.name = save_residuals ? "lax.scan fwd + residuals" : "lax.scan fwd";
  p.add_loop(p.name, body.take(), s.chunks());
  return p;
}

// The reverse walk, one fusion per dot as the compiled main build runs it (C1's backward loop
// body holds 10 dot fusions a trip, each reading its operands from HBM and writing its result:
// docs/kernels/gdn.md, "The lax.scan loops as compiled"), the elementwise work fused into the
// dot it feeds or follows. The state's cotangent dh is the loop's carry: kd dh -> dv_new ->
// gamma dh - w^T dv_new -> + q_g^T do.
Program xla_lax_scan_backward(const GdnShape& s) {
  const int64_t C = s.chunk, Dk = s.dk, Dv = s.dv;
  const DType cd = s.compute, f32 = DType::f32;
  Program p;
  p.name = "lax.scan bwd";
  LoopBody body(s);
  body.add("rscan kd dh", [&](IterationFusion& f) {
    f.out("kd dh", f.dot("kd dh", f.in("res kd", C, Dk, f32), f.in("dh", Dk, Dv, f32), nn()), C, Dv,
          f32);
  });
  body.add("rscan dv_new", [&](IterationFusion& f) {
    const ValueId attn = f.in("res attn_i", C, C, f32), d_o = f.in("do[n]", C, Dv, f32);
    const ValueId dv_new = f.ew("dv_new", EwFn::add,
                                {f.in("kd dh", C, Dv, f32), f.dot("attn_i^T do", attn, d_o, tn())});
    f.out("dv_new", dv_new, C, Dv, f32);
    // u enters only through v_new = u - w h: its cotangent, stacked over the chunks (the scan's
    // transpose writes the cotangent of each xs slice), in u's dtype.
    f.out("du[n]", f.kb.cast("du", dv_new, cd), C, Dv, cd);
  });
  body.add("rscan dw", [&](IterationFusion& f) {
    const ValueId dv_new = f.in("dv_new", C, Dv, f32), h = f.in("res h", Dk, Dv, f32);
    f.out(
        "dw[n]",
        f.kb.cast("dw", f.kb.scale("-dv_new h^T", f.dot("dv_new h^T", dv_new, h, nt()), -1.0), cd),
        C, Dk, cd);
  });
  body.add("rscan dh w", [&](IterationFusion& f) {
    const ValueId dh = f.in("dh", Dk, Dv, f32), g = f.in("g[n]", C, 1, f32);
    const ValueId w = f.in("res f32(w)", C, Dk, f32), dv_new = f.in("dv_new", C, Dv, f32);
    const ValueId gamma =
        f.kb.elementwise("gamma", EwFn::exp, {f.kb.slice("g_last", g, 1, C - 1, 1)}, -1);
    f.out("gamma dh - w^T dv_new",
          f.ew("gamma dh - w^T dv_new", EwFn::sub,
               {f.ew("gamma dh", EwFn::mul, {dh, gamma}), f.dot("w^T dv_new", w, dv_new, tn())}),
          Dk, Dv, f32);
  });
  body.add("rscan dh", [&](IterationFusion& f) {
    const ValueId q_g = f.in("res q_g", C, Dk, f32), d_o = f.in("do[n]", C, Dv, f32);
    f.out("dh",
          f.ew("dh_new", EwFn::add,
               {f.in("gamma dh - w^T dv_new", Dk, Dv, f32), f.dot("q_g^T do", q_g, d_o, tn())}),
          Dk, Dv, f32);
  });
  body.add("rscan dq_g dg", [&](IterationFusion& f) {
    const ValueId d_o = f.in("do[n]", C, Dv, f32), h = f.in("res h", Dk, Dv, f32),
                  q_g = f.in("res q_g", C, Dk, f32);
    const ValueId dq_g = f.dot("do h^T", d_o, h, nt());
    f.out("dq_g", dq_g, C, Dk, f32);
    f.out("dg[n]", f.kb.reduce("dg", f.ew("dq_g q_g", EwFn::mul, {dq_g, q_g}), {2}), C, 1, f32);
  });
  body.add("rscan dp", [&](IterationFusion& f) {
    const ValueId d_o = f.in("do[n]", C, Dv, f32), v_new = f.in("res v_new", C, Dv, f32);
    const ValueId ds = f.kb.mask("ds", f.dot("do v_new^T", d_o, v_new, nt()), MaskKind::lower);
    f.out("dp", f.kb.cast("dp.c", f.ew("dp", EwFn::mul, {ds, f.in("res decay", C, C, f32)}), cd), C,
          C, cd);
  });
  body.add("rscan dq", [&](IterationFusion& f) {
    const ValueId dp = f.in("dp", C, C, cd), k = f.in("k[n]", C, Dk, cd);
    f.out("dq[n]",
          f.kb.cast("dq",
                    f.ew("dp k + dq_g", EwFn::add,
                         {f.dot("dp k", dp, k, nn()), f.in("dq_g", C, Dk, f32)}),
                    cd),
          C, Dk, cd);
  });
  body.add("rscan dkd", [&](IterationFusion& f) {
    const ValueId v_new = f.in("res v_new", C, Dv, f32), dh = f.in("dh", Dk, Dv, f32);
    f.out("dkd", f.dot("v_new dh^T", v_new, dh, nt()), C, Dk, f32);
  });
  body.add("rscan dk", [&](IterationFusion& f) {
    const ValueId dp = f.in("dp", C, C, cd), q = f.in("q[n]", C, Dk, cd);
    const ValueId dkd_kd =
        f.ew("dkd kd", EwFn::mul, {f.in("dkd", C, Dk, f32), f.in("res kd", C, Dk, f32)});
    f.out("dk[n]",
          f.kb.cast("dk",
                    f.ew("dp^T q + dkd kd", EwFn::add, {f.dot("dp^T q", dp, q, tn()), dkd_kd}), cd),
          C, Dk, cd);
  });
  p.add_loop(p.name, body.take(), s.chunks());
  return p;
}

}  // namespace tpusim::kernels::gdn
