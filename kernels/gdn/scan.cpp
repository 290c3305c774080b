#include "kernels/gdn/scan.h"

#include <fmt/format.h>

#include "kernels/gdn/builder_util.h"
#include "sim/error.h"

namespace tpusim::kernels::gdn {
namespace {

constexpr auto kPar = DimSemantics::parallel;
constexpr auto kArb = DimSemantics::arbitrary;

void check_tile(const GdnShape& s, const ScanOptions& o) {
  s.check();
  if (o.head_tile < 1 || s.heads % o.head_tile != 0)
    throw Error(
        fmt::format("GDN scan: head tile {} must divide the {} heads", o.head_tile, s.heads));
}

}  // namespace

std::shared_ptr<const Kernel> scan_forward(const GdnShape& s, const ScanOptions& o) {
  check_tile(s, o);
  const int64_t th = o.head_tile, C = s.chunk;
  KernelBuilder kb(fmt::format("gdn scan fwd (th={})", th));
  kb.grid({s.batch, s.heads / th, s.chunks()}, {kPar, kPar, kArb});
  GdnBuilder g(kb, s, o.precision);
  const IndexMap per_chunk({axis(0), axis(2), axis(1), constant(0), constant(0)});
  const When first_chunk{When::first, 2}, last_chunk{When::last, 2};

  const ValueId w = g.chunk_input("w", C, s.dk, s.compute, th, per_chunk);
  const ValueId u = g.chunk_input("u", C, s.dv, s.compute, th, per_chunk);
  const ValueId q = g.chunk_input("q", C, s.dk, s.compute, th, per_chunk);
  const ValueId k = g.chunk_input("k", C, s.dk, s.compute, th, per_chunk);
  const ValueId gc = g.chunk_input("g", C, 1, DType::f32, th, per_chunk);
  const ValueId h0 = g.state_input("h0", th);
  const ValueId o_out = g.chunk_output("o", C, s.dv, s.compute, th, per_chunk);
  const ValueId h_saved = g.chunk_output("h_saved", s.dk, s.dv, DType::f32, th, per_chunk);
  const ValueId h_final = g.state_output("h_final", th);
  const ValueId h = kb.scratch("h", {th, s.dk, s.dv}, DType::f32);

  kb.copy("h = h0", h0, h, first_chunk);
  kb.copy("h_saved = h", h, h_saved);
  const ValueId e = kb.elementwise("exp(g)", EwFn::exp, {gc}, -1);
  const ValueId q_g = kb.elementwise("q_g = q * exp(g)", EwFn::mul, {q, e}, -1);
  // The merged matmul: [q_g; w] h gives the inter-chunk output and v' = w h in one MXU pass.
  const ValueId qw = kb.concat("[q_g; w]", {q_g, w}, 1);
  const ValueId merged = g.bdot("[q_g; w] @ h", qw, h, nn());
  const ValueId o_inter = kb.slice("o_inter", merged, 1, 0, C);
  const ValueId v_prime = kb.slice("w h", merged, 1, C, C);
  const ValueId v_new = kb.elementwise("v_new = u - w h", EwFn::sub, {u, v_prime}, -1);
  const ValueId p = g.bdot("q k^T", q, k, nt());
  const ValueId sm = kb.elementwise("s = q k^T * decay", EwFn::mul, {p, g.decay(gc, th)}, -1);
  const ValueId sv = g.bdot("s v_new", sm, v_new, nn());
  kb.copy("o = o_inter + s v_new",
          kb.elementwise("o_inter + s v_new", EwFn::add, {o_inter, sv}, -1), o_out);
  const auto [g_last, gamma, dvec, kd] = g.chunk_end_decay(gc, k);
  const ValueId update = g.bdot("kd^T v_new", kd, v_new, tn());
  const ValueId decayed = kb.elementwise("gamma h", EwFn::mul, {h, gamma}, -1);
  kb.elementwise("h = gamma h + kd^T v_new", EwFn::add, {decayed, update}, h);
  kb.copy("h_final = h", h, h_final, last_chunk);
  return kb.build();
}

std::shared_ptr<const Kernel> scan_backward(const GdnShape& s, const ScanOptions& o) {
  check_tile(s, o);
  const int64_t th = o.head_tile, C = s.chunk;
  KernelBuilder kb(fmt::format("gdn scan bwd (th={})", th));
  kb.grid({s.batch, s.heads / th, s.chunks()}, {kPar, kPar, kArb});
  GdnBuilder g(kb, s, o.precision);
  // Grid step n touches chunk N - 1 - n: the walk runs backwards.
  const IndexMap rev({axis(0), reversed(2, s.chunks()), axis(1), constant(0), constant(0)});
  const When first_step{When::first, 2}, last_step{When::last, 2};

  const ValueId w = g.chunk_input("w", C, s.dk, s.compute, th, rev);
  const ValueId q = g.chunk_input("q", C, s.dk, s.compute, th, rev);
  const ValueId k = g.chunk_input("k", C, s.dk, s.compute, th, rev);
  const ValueId u = g.chunk_input("u", C, s.dv, s.compute, th, rev);
  const ValueId gc = g.chunk_input("g", C, 1, DType::f32, th, rev);
  const ValueId h = g.chunk_input("h_saved", s.dk, s.dv, DType::f32, th, rev);
  const ValueId d_o = g.chunk_input("do", C, s.dv, s.compute, th, rev);
  const ValueId dh_final = g.state_input("dh_final", th);
  const ValueId dw_out = g.chunk_output("dw", C, s.dk, DType::f32, th, rev);
  const ValueId dq_out = g.chunk_output("dq", C, s.dk, DType::f32, th, rev);
  const ValueId dk_out = g.chunk_output("dk", C, s.dk, DType::f32, th, rev);
  const ValueId du_out = g.chunk_output("du", C, s.dv, DType::f32, th, rev);
  const ValueId dg_out = g.chunk_output("dg", C, 1, DType::f32, th, rev);
  const ValueId dh0 = g.state_output("dh0", th);
  const ValueId dh =
      kb.scratch("dh", {th, s.dk, s.dv}, DType::f32);  // cotangent of the state leaving the chunk

  kb.copy("dh = dh_final", dh_final, dh, first_step);
  // Recompute the forward quantities of this chunk from h_saved.
  const ValueId e = kb.elementwise("exp(g)", EwFn::exp, {gc}, -1);
  const ValueId q_g = kb.elementwise("q_g", EwFn::mul, {q, e}, -1);
  const ValueId v_prime = g.bdot("w h", w, h, nn());
  const ValueId v_new = kb.elementwise("v_new", EwFn::sub, {u, v_prime}, -1);
  const auto [g_last, gamma, dvec, kd] = g.chunk_end_decay(gc, k);

  // The dh chain first: dh_next -> kd dh_next -> (+ s^T do) -> w^T dv_new -> dh.
  const ValueId dv_state = g.bdot("kd dh", kd, dh, nn());
  const ValueId p = g.bdot("q k^T", q, k, nt());
  const ValueId decay = g.decay(gc, th);
  const ValueId sm = kb.elementwise("s", EwFn::mul, {p, decay}, -1);
  const ValueId dv_out = g.bdot("s^T do", sm, d_o, tn());
  const ValueId dv_new = kb.elementwise("dv_new", EwFn::add, {dv_state, dv_out}, -1);
  const ValueId dh_v = g.bdot("w^T dv_new", w, dv_new, tn());
  const ValueId dh_o = g.bdot("q_g^T do", q_g, d_o, tn());
  const ValueId dgamma =
      kb.reduce("dgamma", kb.elementwise("h dh", EwFn::mul, {h, dh}, -1), {1, 2});
  const ValueId dh_decayed = kb.elementwise("gamma dh", EwFn::mul, {dh, gamma}, -1);
  const ValueId dh_sum = kb.elementwise("gamma dh + q_g^T do", EwFn::add, {dh_decayed, dh_o}, -1);
  const ValueId dh_new = kb.elementwise("dh - w^T dv_new", EwFn::sub, {dh_sum, dh_v}, -1);

  // Through h' = gamma h + kd^T v_new.
  const ValueId dkd = g.bdot("v_new dh^T", v_new, dh, nt());
  const ValueId dk_state = kb.elementwise("dkd * dvec", EwFn::mul, {dkd, dvec}, -1);
  const ValueId ddvec = kb.reduce("ddvec", kb.elementwise("dkd k", EwFn::mul, {dkd, k}, -1), {2});
  // Through o = q_g h + s v_new.
  const ValueId ds = kb.mask("ds", g.bdot("do v_new^T", d_o, v_new, nt()), MaskKind::lower);
  const ValueId dp = kb.elementwise("dp", EwFn::mul, {ds, decay}, -1);
  const ValueId t = kb.elementwise("ddecay * decay", EwFn::mul,
                                   {kb.elementwise("ddecay", EwFn::mul, {ds, p}, -1), decay}, -1);
  const ValueId dq_intra = g.bdot("dp k", dp, k, nn());
  const ValueId dk_intra = g.bdot("dp^T q", dp, q, tn());
  const ValueId dg_decay =
      kb.elementwise("rowsum - colsum", EwFn::sub,
                     {kb.reduce("rowsum", t, {2}),
                      kb.reshape("colsum^T", kb.reduce("colsum", t, {1}), {th, C, 1})},
                     -1);
  const ValueId dq_g = g.bdot("do h^T", d_o, h, nt());
  // Through v_new = u - w h.
  const ValueId dw = kb.scale("dw = -dv_new h^T", g.bdot("dv_new h^T", dv_new, h, nt()), -1.0);
  // Through q_g and the decays.
  const ValueId dq = kb.elementwise(
      "dq", EwFn::add, {dq_intra, kb.elementwise("dq_g e", EwFn::mul, {dq_g, e}, -1)}, -1);
  const ValueId dg_q = kb.elementwise(
      "rowsum(dq_g q) e", EwFn::mul,
      {kb.reduce("rowsum(dq_g q)", kb.elementwise("dq_g q", EwFn::mul, {dq_g, q}, -1), {2}), e},
      -1);
  const ValueId dd = kb.elementwise("ddvec dvec", EwFn::mul, {ddvec, dvec}, -1);
  const ValueId dg_body =
      kb.elementwise("dg", EwFn::sub,
                     {kb.elementwise("dg_decay + dg_q", EwFn::add, {dg_decay, dg_q}, -1), dd}, -1);
  const ValueId last =
      kb.elementwise("sum(ddvec dvec) + dgamma gamma", EwFn::add,
                     {kb.reduce("sum(ddvec dvec)", dd, {1}),
                      kb.elementwise("dgamma gamma", EwFn::mul, {dgamma, gamma}, -1)},
                     -1);
  const ValueId dg = kb.elementwise(
      "dg + last row", EwFn::add,
      {dg_body, kb.mask("at g_last", last, MaskKind::last_row, 0, 0, {th, C, 1})}, -1);

  kb.copy("store dw", dw, dw_out);
  kb.copy("store dq", dq, dq_out);
  kb.copy("store dk", kb.elementwise("dk", EwFn::add, {dk_state, dk_intra}, -1), dk_out);
  kb.copy("store du", dv_new, du_out);
  kb.copy("store dg", dg, dg_out);
  kb.copy("dh = next", dh_new, dh);  // last: the ops above read this chunk's dh
  kb.copy("dh0 = dh", dh, dh0, last_step);
  return kb.build();
}

}  // namespace tpusim::kernels::gdn
