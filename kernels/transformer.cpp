#include "kernels/transformer.h"

#include <fmt/format.h>

#include <limits>

#include "kernels/tiling.h"
#include "sim/error.h"
#include "sim/ir/validate.h"

namespace tpusim::kernels {
namespace {

constexpr auto kPar = DimSemantics::parallel;
constexpr auto kArb = DimSemantics::arbitrary;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();
const DotDims kNT{{1}, {1}, {}, {}};  // [m, k] x [n, k]^T
const DotDims kTN{{0}, {0}, {}, {}};  // [k, m]^T x [k, n]
const DotDims kNN{{1}, {0}, {}, {}};

void check(const AttentionShape& s) {
  if (s.q_heads % s.kv_heads != 0 || s.seq % s.block != 0 || s.kv_len() % s.block != 0)
    throw Error(
        fmt::format("attention: {} query heads over {} kv heads, seq {} (keys {}) in blocks of {}",
                    s.q_heads, s.kv_heads, s.seq, s.kv_len(), s.block));
  if (s.causal && s.kv_len() != s.seq)
    throw Error(fmt::format("attention: a causal mask needs as many keys ({}) as queries ({})",
                            s.kv_len(), s.seq));
}

struct AttentionArrays {
  Tensor q, k, v, o, lse, d_o, di;
};

AttentionArrays arrays(const AttentionShape& s) {
  const int64_t G = s.q_heads / s.kv_heads;
  const Shape qs{s.batch, s.kv_heads, G, s.seq, s.head_dim},
      kvs{s.batch, s.kv_heads, s.kv_len(), s.head_dim},
      vs{s.batch, s.kv_heads, s.kv_len(), s.v_dim()}, os{s.batch, s.kv_heads, G, s.seq, s.v_dim()};
  const Shape stat{s.batch, s.kv_heads, G, s.seq, 1};
  return {{"q", qs, s.dtype},      {"k", kvs, s.dtype},       {"v", vs, s.dtype},
          {"o", os, s.dtype},      {"lse", stat, DType::f32}, {"do", os, s.dtype},
          {"di", stat, DType::f32}};
}

// The blocks a backward kernel reads at one grid step, seen as [b, D] (and [b, 1] statistics).
struct BackwardInputs {
  ValueId q, d_o, lse, di, k, v;
};

// D: the queries' and keys' head dim, Dv the values'.
BackwardInputs backward_inputs(KernelBuilder& kb, const AttentionArrays& a, const IndexMap& q_map,
                               const IndexMap& kv_map, int64_t b, int64_t D, int64_t Dv) {
  auto in = [&](const char* n, const Tensor& t, Shape block, const IndexMap& map, Shape view) {
    return kb.reshape(n, kb.input(t, std::move(block), map), std::move(view));
  };
  return {in("q", a.q, {1, 1, 1, b, D}, q_map, {b, D}),
          in("do", a.d_o, {1, 1, 1, b, Dv}, q_map, {b, Dv}),
          in("lse", a.lse, {1, 1, 1, b, 1}, q_map, {b, 1}),
          in("di", a.di, {1, 1, 1, b, 1}, q_map, {b, 1}),
          in("k", a.k, {1, 1, b, D}, kv_map, {b, D}),
          in("v", a.v, {1, 1, b, Dv}, kv_map, {b, Dv})};
}

// The forward's probabilities recomputed from the saved statistics: p = exp(q k^T - lse), the
// causal mask on diagonal blocks.
ValueId recompute_p(KernelBuilder& kb, const AttentionShape& s, const BackwardInputs& x,
                    ValueId scores, When live, When diagonal) {
  kb.dot_into("s = q k^T", x.q, x.k, scores, kNT, Precision::default_, live);
  if (s.causal) kb.mask("causal mask", scores, MaskKind::lower, kNegInf, 0, {}, diagonal, scores);
  return kb.elementwise("p = exp(s - lse)", EwFn::exp,
                        {kb.elementwise("s - lse", EwFn::sub, {scores, x.lse}, -1, live)}, -1,
                        live);
}

// ds = p (do v^T - di).
ValueId score_gradient(KernelBuilder& kb, const BackwardInputs& x, ValueId p, When live) {
  const ValueId dp = kb.dot("dp = do v^T", x.d_o, x.v, DType::f32, kNT, Precision::default_, live);
  return kb.elementwise("ds = p (dp - di)", EwFn::mul,
                        {p, kb.elementwise("dp - di", EwFn::sub, {dp, x.di}, -1, live)}, -1, live);
}

}  // namespace

std::shared_ptr<const Kernel> attention_forward(const AttentionShape& s) {
  check(s);
  const int64_t G = s.q_heads / s.kv_heads, n = s.seq / s.block, nk = s.kv_len() / s.block,
                b = s.block, D = s.head_dim, Dv = s.v_dim();
  const AttentionArrays a = arrays(s);
  KernelBuilder kb(fmt::format("attention fwd (block {})", b));
  // grid (batch, kv head, query head in group, q block i, kv block j)
  kb.grid({s.batch, s.kv_heads, G, n, nk}, {kPar, kPar, kPar, kPar, kArb});
  const IndexMap q_map({axis(0), axis(1), axis(2), axis(3), constant(0)});
  const IndexMap kv_map({axis(0), axis(1), s.causal ? clamped(4, 3) : axis(4), constant(0)});
  const ValueId q = kb.reshape("q", kb.input(a.q, {1, 1, 1, b, D}, q_map), {b, D});
  const ValueId k = kb.reshape("k", kb.input(a.k, {1, 1, b, D}, kv_map), {b, D});
  const ValueId v = kb.reshape("v", kb.input(a.v, {1, 1, b, Dv}, kv_map), {b, Dv});
  const ValueId o = kb.output(a.o, {1, 1, 1, b, Dv}, q_map);
  const ValueId lse = kb.output(a.lse, {1, 1, 1, b, 1}, q_map);
  const ValueId m = kb.scratch("m", {b, 1}, DType::f32), l = kb.scratch("l", {b, 1}, DType::f32);
  const ValueId acc = kb.scratch("acc", {b, Dv}, DType::f32);
  const When first{When::first, 4}, last{When::last, 4};
  const When live = s.causal ? When{When::at_or_below, 3, 4} : When{};
  kb.fill("m = -inf", m, kNegInf, first);
  kb.fill("l = 0", l, 0, first);
  kb.fill("acc = 0", acc, 0, first);
  // splash's block_kv_compute: the kv block is processed in sub-blocks of `compute` columns. All
  // sub-blocks' q k^T are issued first (they do not depend on the softmax state), so the MXUs work
  // on the next sub-block while the VPU and EUP run this one's online softmax.
  const int64_t bc = std::min(s.block_compute, b), parts = b / bc;
  std::vector<ValueId> scores;
  for (int64_t c = 0; c < parts; ++c) {
    const ValueId kc = parts == 1 ? k : kb.slice(fmt::format("k[{}]", c), k, 0, c * bc, bc, live);
    const ValueId sc_c =
        kb.dot(fmt::format("s[{}] = q k^T", c), q, kc, DType::f32, kNT, Precision::default_, live);
    if (s.causal)  // on the diagonal block: keep columns c*bc + j <= row i
      kb.mask(fmt::format("causal mask [{}]", c), sc_c, MaskKind::lower, kNegInf, -c * bc, {},
              {When::on_diagonal, 3, 4}, sc_c);
    scores.push_back(sc_c);
  }
  for (int64_t c = 0; c < parts; ++c) {
    const ValueId sc = scores[c];
    const ValueId vc = parts == 1 ? v : kb.slice(fmt::format("v[{}]", c), v, 0, c * bc, bc, live);
    const ValueId m_new =
        kb.elementwise("m_new", EwFn::max, {m, kb.reduce_max("rowmax", sc, {1}, live)}, -1, live);
    const ValueId p =
        kb.elementwise("p = exp(s - m_new)", EwFn::exp,
                       {kb.elementwise("s - m_new", EwFn::sub, {sc, m_new}, -1, live)}, -1, live);
    const ValueId alpha =
        kb.elementwise("alpha", EwFn::exp,
                       {kb.elementwise("m - m_new", EwFn::sub, {m, m_new}, -1, live)}, -1, live);
    kb.elementwise("l = alpha l + rowsum p", EwFn::add,
                   {kb.elementwise("alpha l", EwFn::mul, {alpha, l}, -1, live),
                    kb.reduce("rowsum p", p, {1}, live)},
                   l, live);
    const ValueId pv = kb.dot("p v", kb.cast("p.bf16", p, s.dtype, live), vc, DType::f32, kNN,
                              Precision::default_, live);
    kb.elementwise("acc = alpha acc + p v", EwFn::add,
                   {kb.elementwise("alpha acc", EwFn::mul, {alpha, acc}, -1, live), pv}, acc, live);
    kb.copy("m = m_new", m_new, m, live);
  }
  kb.copy("o = acc / l", kb.elementwise("acc / l", EwFn::div, {acc, l}, -1, last), o, last);
  kb.copy("lse = m + log l",
          kb.elementwise("m + log l", EwFn::add,
                         {m, kb.elementwise("log l", EwFn::log, {l}, -1, last)}, -1, last),
          lse, last);
  return kb.build();
}

std::shared_ptr<const Kernel> attention_backward_dkv(const AttentionShape& s) {
  check(s);
  const int64_t G = s.q_heads / s.kv_heads, n = s.seq / s.block, nk = s.kv_len() / s.block,
                b = s.block, D = s.head_dim, Dv = s.v_dim();
  const AttentionArrays a = arrays(s);
  KernelBuilder kb(fmt::format("attention bwd dkv (block {})", b));
  // grid (batch, kv head, kv block j, query head in group, q block i): dk, dv accumulate over (g,
  // i).
  kb.grid({s.batch, s.kv_heads, nk, G, n}, {kPar, kPar, kPar, kArb, kArb});
  const IndexMap q_map(
      {axis(0), axis(1), axis(3), s.causal ? clamped_below(4, 2) : axis(4), constant(0)});
  const IndexMap kv_map({axis(0), axis(1), axis(2), constant(0)});
  const BackwardInputs x = backward_inputs(kb, a, q_map, kv_map, b, D, Dv);
  // dk and dv in the keys' and values' dtype, accumulated in f32 scratch
  // (splash_attention_kernel.py L2160-2167: ShapeDtypeStruct.like(k), .like(v)).
  const ValueId dk = kb.output({"dk", a.k.shape, s.dtype}, {1, 1, b, D}, kv_map);
  const ValueId dv = kb.output({"dv", a.v.shape, s.dtype}, {1, 1, b, Dv}, kv_map);
  const ValueId dk_acc = kb.scratch("dk_acc", {b, D}, DType::f32),
                dv_acc = kb.scratch("dv_acc", {b, Dv}, DType::f32);
  const ValueId sc = kb.scratch("s", {b, b}, DType::f32);
  const When live = s.causal ? When{When::at_or_below, 4, 2} : When{};
  kb.fill("dk = 0", dk_acc, 0, {When::first_both, 3, 4});
  kb.fill("dv = 0", dv_acc, 0, {When::first_both, 3, 4});
  const ValueId p = recompute_p(kb, s, x, sc, live, {When::on_diagonal, 4, 2});
  const ValueId p16 = kb.cast("p.bf16", p, s.dtype, live);
  kb.elementwise("dv += p^T do", EwFn::add,
                 {dv_acc, kb.dot("p^T do", p16, x.d_o, DType::f32, kTN, Precision::default_, live)},
                 dv_acc, live);
  const ValueId ds = score_gradient(kb, x, p, live);
  kb.elementwise("dk += ds^T q", EwFn::add,
                 {dk_acc, kb.dot("ds^T q", kb.cast("ds.bf16", ds, s.dtype, live), x.q, DType::f32,
                                 kTN, Precision::default_, live)},
                 dk_acc, live);
  const When last{When::last_both, 3, 4};
  kb.copy("store dk", kb.cast("dk.out", dk_acc, s.dtype, last), dk, last);
  kb.copy("store dv", kb.cast("dv.out", dv_acc, s.dtype, last), dv, last);
  return kb.build();
}

std::shared_ptr<const Kernel> attention_backward_dq(const AttentionShape& s) {
  check(s);
  const int64_t G = s.q_heads / s.kv_heads, n = s.seq / s.block, nk = s.kv_len() / s.block,
                b = s.block, D = s.head_dim, Dv = s.v_dim();
  const AttentionArrays a = arrays(s);
  KernelBuilder kb(fmt::format("attention bwd dq (block {})", b));
  kb.grid({s.batch, s.kv_heads, G, n, nk}, {kPar, kPar, kPar, kPar, kArb});
  const IndexMap q_map({axis(0), axis(1), axis(2), axis(3), constant(0)});
  const IndexMap kv_map({axis(0), axis(1), s.causal ? clamped(4, 3) : axis(4), constant(0)});
  const BackwardInputs x = backward_inputs(kb, a, q_map, kv_map, b, D, Dv);
  // dq in the queries' dtype, accumulated in f32 scratch (splash_attention_kernel.py L1608-1610).
  const ValueId dq = kb.output({"dq", a.q.shape, s.dtype}, {1, 1, 1, b, D}, q_map);
  const ValueId dq_acc = kb.scratch("dq_acc", {b, D}, DType::f32),
                sc = kb.scratch("s", {b, b}, DType::f32);
  const When live = s.causal ? When{When::at_or_below, 3, 4} : When{};
  kb.fill("dq = 0", dq_acc, 0, {When::first, 4});
  const ValueId p = recompute_p(kb, s, x, sc, live, {When::on_diagonal, 3, 4});
  const ValueId ds = score_gradient(kb, x, p, live);
  kb.elementwise("dq += ds k", EwFn::add,
                 {dq_acc, kb.dot("ds k", kb.cast("ds.bf16", ds, s.dtype, live), x.k, DType::f32,
                                 kNN, Precision::default_, live)},
                 dq_acc, live);
  kb.copy("store dq", kb.cast("dq.out", dq_acc, s.dtype, {When::last, 4}), dq, {When::last, 4});
  return kb.build();
}

std::string name(Fusion f) {
  switch (f) {
    case Fusion::rmsnorm:
      return "rmsnorm";
    case Fusion::rmsnorm_bwd:
      return "rmsnorm bwd";
    case Fusion::rope:
      return "rope";
    case Fusion::swiglu:
      return "swiglu";
    case Fusion::swiglu_bwd:
      return "swiglu bwd";
    case Fusion::sigmoid_gate:
      return "sigmoid gate";
    case Fusion::sigmoid_gate_bwd:
      return "sigmoid gate bwd";
    case Fusion::gelu:
      return "gelu";
    case Fusion::gelu_bwd:
      return "gelu bwd";
    case Fusion::residual_add:
      return "residual add";
    case Fusion::causal_conv:
      return "causal conv";
    case Fusion::causal_conv_bwd:
      return "causal conv bwd";
    case Fusion::gdn_gates:
      return "gdn gates";
    case Fusion::gated_rmsnorm:
      return "gated rmsnorm";
    case Fusion::gated_rmsnorm_bwd:
      return "gated rmsnorm bwd";
    case Fusion::cross_entropy:
      return "cross entropy";
    case Fusion::adamw:
      return "adamw";
    case Fusion::quantize:
      return "quantize int8";
    case Fusion::quantize_stochastic:
      return "quantize int8 (stochastic rounding)";
  }
  return "?";
}

std::shared_ptr<const Kernel> xla_fusion(Fusion f, int64_t rows, int64_t cols, DType dtype) {
  // Rows per step: the largest power of two up to 512 dividing rows whose blocks fit 16 MiB.
  auto make = [&](int64_t br) {
    KernelBuilder kb(fmt::format("{} [{}x{}] (xla)", name(f), rows, cols), Origin::xla);
    kb.grid({rows / br}, {kPar});
    const IndexMap by_rows({axis(0), constant(0)});
    auto in = [&](const std::string& n, int64_t c, DType t) {
      return kb.input({n, {rows, c}, t}, {br, c}, by_rows);
    };
    auto out = [&](const std::string& n, ValueId v, int64_t c, DType t) {
      kb.copy("store " + n, v, kb.output({n, {rows, c}, t}, {br, c}, by_rows));
    };
    auto ew = [&](const std::string& n, EwFn fn, std::vector<ValueId> args) {
      return kb.elementwise(n, fn, std::move(args), -1);
    };
    const DType f32 = DType::f32;
    switch (f) {
      case Fusion::rmsnorm:
      case Fusion::gated_rmsnorm: {
        const ValueId x = in("x", cols, dtype);
        const ValueId r = kb.elementwise(
            "rsqrt", EwFn::rsqrt,
            {kb.with_scalar(
                "mean + eps", EwFn::add,
                kb.scale("mean", kb.reduce("sum x^2", ew("x^2", EwFn::mul, {x, x}), {1}),
                         1.0 / cols),
                1e-6)},
            -1);
        ValueId y = ew("x r", EwFn::mul, {x, r});
        if (f == Fusion::gated_rmsnorm) {
          const ValueId z = in("z", cols, dtype);
          y = ew("y silu(z)", EwFn::mul,
                 {y, ew("silu z", EwFn::mul,
                        {z, kb.elementwise("sigmoid z", EwFn::logistic, {z}, -1)})});
        }
        out("y", y, cols, dtype);
        break;
      }
      case Fusion::rmsnorm_bwd:
      case Fusion::gated_rmsnorm_bwd: {
        const ValueId x = in("x", cols, dtype), dy = in("dy", cols, dtype);
        const ValueId r = kb.elementwise(
            "rsqrt", EwFn::rsqrt,
            {kb.with_scalar(
                "mean + eps", EwFn::add,
                kb.scale("mean", kb.reduce("sum x^2", ew("x^2", EwFn::mul, {x, x}), {1}),
                         1.0 / cols),
                1e-6)},
            -1);
        ValueId g = dy;
        if (f == Fusion::gated_rmsnorm_bwd) {
          const ValueId z = in("z", cols, dtype);
          const ValueId sz = kb.elementwise("sigmoid z", EwFn::logistic, {z}, -1);
          out("dz",
              ew("dz", EwFn::mul,
                 {dy, ew("silu' z", EwFn::mul, {sz, ew("x r", EwFn::mul, {x, r})})}),
              cols, f32);
          g = ew("dy silu z", EwFn::mul, {dy, ew("silu z", EwFn::mul, {z, sz})});
        }
        const ValueId proj = kb.reduce("<g, x>", ew("g x", EwFn::mul, {g, x}), {1});
        out("dx",
            ew("dx", EwFn::sub,
               {ew("g r", EwFn::mul, {g, r}),
                ew("x proj r^3", EwFn::mul,
                   {x, ew("proj r^3", EwFn::mul,
                          {proj, ew("r^3", EwFn::mul, {r, ew("r^2", EwFn::mul, {r, r})})})})}),
            cols, f32);
        break;
      }
      case Fusion::rope: {
        const ValueId x = in("x", cols, dtype), cs = in("cos sin", cols, f32);
        out("y",
            ew("x cos + rot(x) sin", EwFn::add,
               {ew("x cos", EwFn::mul, {x, cs}), ew("rot(x) sin", EwFn::mul, {x, cs})}),
            cols, dtype);
        break;
      }
      case Fusion::swiglu:
      case Fusion::swiglu_bwd: {
        const ValueId gate = in("gate", cols, dtype), up = in("up", cols, dtype);
        const ValueId sg = kb.elementwise("sigmoid gate", EwFn::logistic, {gate}, -1);
        const ValueId silu = ew("silu gate", EwFn::mul, {gate, sg});
        if (f == Fusion::swiglu) {
          out("h", ew("silu(gate) up", EwFn::mul, {silu, up}), cols, dtype);
        } else {
          const ValueId dh = in("dh", cols, dtype);
          out("dup", ew("dh silu", EwFn::mul, {dh, silu}), cols, dtype);
          // silu' = sg + silu (1 - sg), as sg + (silu - silu sg) (a scalar is the right operand)
          const ValueId dsilu = ew(
              "silu'", EwFn::add,
              {sg, ew("silu - silu sg", EwFn::sub, {silu, ew("silu sg", EwFn::mul, {silu, sg})})});
          out("dgate", ew("dh up silu'", EwFn::mul, {ew("dh up", EwFn::mul, {dh, up}), dsilu}),
              cols, dtype);
        }
        break;
      }
      case Fusion::sigmoid_gate:
      case Fusion::sigmoid_gate_bwd: {
        const ValueId o = in("o", cols, dtype), gate = in("gate", cols, dtype);
        const ValueId sg = kb.elementwise("sigmoid gate", EwFn::logistic, {gate}, -1);
        if (f == Fusion::sigmoid_gate) {
          out("y", ew("o sigmoid(gate)", EwFn::mul, {o, sg}), cols, dtype);
        } else {
          const ValueId dy = in("dy", cols, dtype);
          out("do", ew("dy sigmoid(gate)", EwFn::mul, {dy, sg}), cols, dtype);
          const ValueId dsg = ew("sg - sg^2", EwFn::sub, {sg, ew("sg^2", EwFn::mul, {sg, sg})});
          out("dgate", ew("dy o sg'", EwFn::mul, {ew("dy o", EwFn::mul, {dy, o}), dsg}), cols,
              dtype);
        }
        break;
      }
      case Fusion::gelu:
      case Fusion::gelu_bwd: {
        const ValueId x = in("x", cols, dtype);
        const ValueId t = kb.elementwise(
            "tanh", EwFn::tanh,
            {kb.scale(
                "sqrt(2/pi)(x + 0.044715x^3)",
                ew("x + c x^3", EwFn::add,
                   {x, kb.scale("c x^3", ew("x^3", EwFn::mul, {x, ew("x^2", EwFn::mul, {x, x})}),
                                0.044715)}),
                0.7978845608)},
            -1);
        const ValueId half =
            kb.scale("(1 + tanh) / 2", kb.with_scalar("1 + tanh", EwFn::add, t, 1.0), 0.5);
        if (f == Fusion::gelu) {
          out("y", ew("x (1 + tanh) / 2", EwFn::mul, {x, half}), cols, dtype);
        } else {
          const ValueId dy = in("dy", cols, dtype);
          out("dx",
              ew("dy gelu'", EwFn::mul,
                 {dy, ew("gelu'", EwFn::add,
                         {half, ew("x sech^2 ...", EwFn::sub,
                                   {x, ew("x tanh^2", EwFn::mul,
                                          {x, ew("tanh^2", EwFn::mul, {t, t})})})})}),
              cols, dtype);
        }
        break;
      }
      case Fusion::residual_add: {
        out("y", ew("x + r", EwFn::add, {in("x", cols, dtype), in("r", cols, dtype)}), cols, dtype);
        break;
      }
      case Fusion::causal_conv:
      case Fusion::causal_conv_bwd: {
        // Depthwise kernel 4 along the sequence: four shifted multiply-adds per element, then SiLU.
        const ValueId x = in("x", cols, dtype), w = in("conv w", cols, f32);
        ValueId acc = ew("w0 x", EwFn::mul, {x, w});
        for (int t = 1; t < 4; ++t)
          acc =
              ew(fmt::format("+ w{} x[-{}]", t, t), EwFn::add, {acc, ew("w x", EwFn::mul, {x, w})});
        if (f == Fusion::causal_conv_bwd) {
          const ValueId dy = in("dy", cols, dtype);
          acc = ew("dy conv^T", EwFn::mul, {dy, acc});
          out("dw partial", kb.reduce("sum over tokens", acc, {0}), cols, f32);
        }
        out("y", ew("silu", EwFn::mul, {acc, kb.elementwise("sigmoid", EwFn::logistic, {acc}, -1)}),
            cols, dtype);
        break;
      }
      case Fusion::gdn_gates: {
        const ValueId ab = in("a b", cols, dtype);
        out("beta", kb.elementwise("sigmoid(b)", EwFn::logistic, {ab}, -1), cols, dtype);
        out("g",
            kb.scale("-exp(A_log) softplus",
                     kb.elementwise("softplus(a + dt)", EwFn::softplus, {ab}, -1), -1.0),
            cols, f32);
        break;
      }
      case Fusion::cross_entropy: {
        const ValueId z = in("logits", cols, dtype);
        const ValueId zmax = kb.reduce_max("max", z, {1});
        const ValueId e =
            kb.elementwise("exp(z - max)", EwFn::exp, {ew("z - max", EwFn::sub, {z, zmax})}, -1);
        const ValueId sum = kb.reduce("sum", e, {1});
        out("dlogits", ew("softmax - onehot", EwFn::div, {e, sum}), cols, dtype);
        out("loss",
            ew("log sum + max", EwFn::add, {kb.elementwise("log sum", EwFn::log, {sum}, -1), zmax}),
            1, f32);
        break;
      }
      case Fusion::adamw: {
        const ValueId p = in("param", cols, f32), g = in("grad", cols, f32),
                      m = in("mu", cols, f32), v = in("nu", cols, f32);
        const ValueId m2 = ew("mu' = b1 mu + (1-b1) g", EwFn::add,
                              {kb.scale("b1 mu", m, 0.9), kb.scale("(1-b1) g", g, 0.1)});
        const ValueId v2 = ew("nu' = b2 nu + (1-b2) g^2", EwFn::add,
                              {kb.scale("b2 nu", v, 0.95),
                               kb.scale("(1-b2) g^2", ew("g^2", EwFn::mul, {g, g}), 0.05)});
        const ValueId step =
            ew("mu' / (sqrt(nu') + eps)", EwFn::mul,
               {m2, kb.elementwise("rsqrt nu'", EwFn::rsqrt,
                                   {kb.with_scalar("nu' + eps", EwFn::add, v2, 1e-8)}, -1)});
        out("param",
            ew("p - lr (step + wd p)", EwFn::sub,
               {p, kb.scale("lr", ew("step + wd p", EwFn::add, {step, kb.scale("wd p", p, 0.1)}),
                            1e-4)}),
            cols, f32);
        out("mu", m2, cols, f32);
        out("nu", v2, cols, f32);
        break;
      }
      case Fusion::quantize:
      case Fusion::quantize_stochastic: {
        const ValueId x = in("x", cols, dtype);
        const ValueId amax =
            kb.reduce_max("max |x|", ew("|x|", EwFn::max, {x, kb.scale("-x", x, -1.0)}), {1});
        const ValueId scale = ew("127 / max |x|", EwFn::div,
                                 {kb.fill("127", kb.temp("c", {1, 1}, f32), 127.0), amax});
        ValueId scaled = ew("x scale", EwFn::mul, {x, scale});
        if (f == Fusion::quantize_stochastic) {
          // One vector op per element for the generator's bits (its rate is not published; the
          // HLO import assumes the same for rng-bit-generator), one to add the noise.
          const ValueId noise =
              kb.fill("uniform noise (random bits)", kb.temp("u", {br, cols}, f32), 0.0);
          scaled = ew("+ noise", EwFn::add, {scaled, noise});
        }
        out("x int8", kb.cast("round to int8", scaled, DType::s8), cols, DType::s8);
        out("scale", scale, 1, f32);
        break;
      }
    }
    return kb.build();
  };
  if (rows < 1 || cols < 1) throw Error(fmt::format("fusion {}: [{}x{}]", name(f), rows, cols));
  for (int64_t br = 512; br >= 8; br /= 2)
    if (rows % br == 0) {
      auto k = make(br);
      if (vmem_usage(*k).total_bytes <= kXlaVmemBudget) return k;
    }
  // Rows too wide for even 8 of them (a vocabulary): XLA tiles the columns too. The same work is
  // modelled as [rows x t, w] for the smallest t whose lane-aligned tiles of w = cols / t columns
  // fit, rounded up to the 128-lane tile XLA pads a minor dimension to (its T(8,128) layouts) when
  // the columns are not a multiple of it (Llama 4's vocabulary of 202048; timing only: a row
  // reduction then spans t tiles).
  if (rows % kSublanes == 0)
    for (int64_t t = 2; t <= (cols + kLanes - 1) / kLanes; ++t) {
      const int64_t w = ((cols + t - 1) / t + kLanes - 1) / kLanes * kLanes;
      if (cols % kLanes == 0 && (cols / kLanes) % t != 0) continue;  // whole tiles when they can be
      auto k = xla_fusion(f, rows * t, w, dtype);
      if (vmem_usage(*k).total_bytes <= kXlaVmemBudget) return k;
    }
  return make(rows % kSublanes == 0 ? kSublanes : rows);
}

}  // namespace tpusim::kernels
