#include "models/workload/step.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kernels/gdn/layer.h"
#include "kernels/generic.h"
#include "kernels/transformer.h"
#include "sim/error.h"
#include "sim/timing/collectives.h"
#include "sim/timing/engine.h"

namespace tpusim {
namespace {

using kernels::Fusion;

// Local (per-device) sizes after tensor and context parallelism.
struct Local {
  int64_t tokens, batch, seq, q_heads, kv_heads, mlp, gdn_value_heads, gdn_key_heads;
};

Local local(const StepConfig& c) {
  const int64_t tp = c.mesh.tensor;
  const ModelConfig& m = c.model;
  // MaxText's global batch is per_device_batch x devices, sharded over the data and fsdp axes:
  // each tensor-parallel group works on tp x per-device batch sequences with 1/tp of the heads.
  // Under context parallelism each chip holds 1/context of every sequence.
  const int64_t batch = c.batch_per_chip * tp, seq = c.seq / c.mesh.context;
  return {batch * seq,
          batch,
          seq,
          m.q_heads / tp,
          std::max<int64_t>(1, m.kv_heads / tp),
          m.mlp_dim / tp,
          m.gdn.value_heads / tp,
          std::max<int64_t>(1, m.gdn.key_heads / tp)};
}

// The ICI axes of a slice: v5e / v6e slices are 2D (wraparound on the full 16 x 16 pod), v5p
// slices 3D (wraparound once the slice holds whole 4 x 4 x 4 cubes).
MeshAxis slice_axis(const StepConfig& c, const std::string& name, int64_t size, bool tensor_axis) {
  MeshAxis a{name, size, false, 1, false};
  const int dims = c.chip.ici_dims == 3 ? (c.chips_per_slice >= 8 ? 3 : 2) : 2;
  a.wraparound = c.chip.ici_dims == 3 ? c.chips_per_slice >= 64 : c.chips_per_slice >= 256;
  a.torus_dims = tensor_axis ? 1 : std::max(1, dims - (c.mesh.tensor > 1 ? 1 : 0));
  return a;
}

// Builds one layer's program in phases, recording which ops the remat policy recomputes.
class LayerProgram {
 public:
  // `weights_int8`: the program's dots are weight matmuls that AQT quantizes (not the logits).
  LayerProgram(const StepConfig& c, bool weights_int8 = true)
      : c_(c), int8_(weights_int8 && c.int8_matmuls) {}
  Program p;

  // x [m, k] times y [k, n]; with int8 matmuls both operands are quantized first.
  void dot(const std::string& stage, int64_t m, int64_t k, int64_t n) {
    if (int8_) {
      fusion(stage, Fusion::quantize, m, k);
      fusion(stage, Fusion::quantize, k, n);
    }
    p.add_kernel(kernels::xla_dot(c_.chip, m, k, n, int8_ ? DType::s8 : DType::bf16), {}, stage);
  }
  // y = x W (x [M, K], W [K, N]): the forward dot, and in the backward dX and dW.
  void dot_bwd(const std::string& stage, int64_t m, int64_t k, int64_t n) {
    dot(stage, m, n, k);
    dot(stage, k, m, n);
  }
  void fusion(const std::string& stage, Fusion f, int64_t rows, int64_t cols) {
    p.add_kernel(kernels::xla_fusion(f, rows, cols), {}, stage);
  }
  void kernel(const std::string& stage, std::shared_ptr<const Kernel> k) {
    p.add_kernel(std::move(k), {}, stage);
  }

 private:
  const StepConfig& c_;
  bool int8_;
};

using A = Activation;

// The forward pass computes everything; its recompute in the backward skips what the policy saved.
const RematPolicy& compute_all() {
  static const RematPolicy full = RematPolicy::named("full");
  return full;
}

// Columns of the up projection's output the pass computes (one per GELU, two per SwiGLU MLP).
int64_t mlp_in_columns(const StepConfig& c, const Local& l, const RematPolicy& keep) {
  return (keep.saved(A::mlpwi_0) ? 0 : l.mlp) +
         (c.model.swiglu && !keep.saved(A::mlpwi_1) ? l.mlp : 0);
}

void mlp_forward(LayerProgram& lp, const StepConfig& c, const Local& l, const std::string& phase,
                 const RematPolicy& keep) {
  const int64_t M = l.tokens, E = c.model.d_model;
  lp.fusion(phase + ": norms", Fusion::rmsnorm, M, E);
  if (const int64_t n = mlp_in_columns(c, l, keep)) lp.dot(phase + ": mlp", M, E, n);
  // The activation's output is not a named checkpoint: the down projection's backward needs it.
  lp.fusion(phase + ": mlp", c.model.swiglu ? Fusion::swiglu : Fusion::gelu, M, l.mlp);
  if (!keep.saved(A::mlpwo)) lp.dot(phase + ": mlp", M, l.mlp, E);
  lp.fusion(phase + ": norms", Fusion::residual_add, M, E);
}

void mlp_backward(LayerProgram& lp, const StepConfig& c, const Local& l) {
  const int64_t M = l.tokens, E = c.model.d_model;
  lp.dot_bwd("bwd: mlp", M, l.mlp, E);
  lp.fusion("bwd: mlp", c.model.swiglu ? Fusion::swiglu_bwd : Fusion::gelu_bwd, M, l.mlp);
  lp.dot_bwd("bwd: mlp", M, E, (c.model.swiglu ? 2 : 1) * l.mlp);
  lp.fusion("bwd: norms", Fusion::rmsnorm_bwd, M, E);
}

kernels::AttentionShape attention_shape(const StepConfig& c, const Local& l) {
  const int64_t block = std::min(c.attention_block, l.seq);
  // Context parallelism (MaxText's all-gathered keys and values, load-balanced causal order):
  // the local queries meet on average half of the sequence's keys, taken as a full block grid
  // over seq / 2 keys without the mask.
  const bool cp = c.mesh.context > 1;
  return {.batch = l.batch,
          .seq = l.seq,
          .q_heads = l.q_heads,
          .kv_heads = l.kv_heads,
          .head_dim = c.model.head_dim,
          .block = block,
          .block_compute = std::min<int64_t>(512, block),
          .causal = !cp,
          .dtype = DType::bf16,
          .kv_seq = cp ? c.seq / 2 : 0};
}

// The named q, k and v are taken after projection, norm and RoPE (xla_lowering.md 3), so a saved
// one skips its share of the projection and its RoPE; a saved context skips the attention kernel.
void attention_forward(LayerProgram& lp, const StepConfig& c, const Local& l,
                       const std::string& phase, const RematPolicy& keep) {
  const int64_t M = l.tokens, E = c.model.d_model, Dh = c.model.head_dim;
  lp.fusion(phase + ": norms", Fusion::rmsnorm, M, E);
  const int64_t qkv_columns = (keep.saved(A::query_proj) ? 0 : l.q_heads * Dh) +
                              (keep.saved(A::key_proj) ? 0 : l.kv_heads * Dh) +
                              (keep.saved(A::value_proj) ? 0 : l.kv_heads * Dh);
  if (qkv_columns > 0) lp.dot(phase + ": attention proj", M, E, qkv_columns);
  if (!keep.saved(A::query_proj))
    lp.fusion(phase + ": attention proj", Fusion::rope, M, l.q_heads * Dh);
  if (!keep.saved(A::key_proj))
    lp.fusion(phase + ": attention proj", Fusion::rope, M, l.kv_heads * Dh);
  if (!keep.saved(A::context))
    lp.kernel(phase + ": attention", kernels::attention_forward(attention_shape(c, l)));
  if (!keep.saved(A::out_proj)) lp.dot(phase + ": attention proj", M, l.q_heads * Dh, E);
  lp.fusion(phase + ": norms", Fusion::residual_add, M, E);
  mlp_forward(lp, c, l, phase, keep);
}

Program attention_layer(const StepConfig& c, const Local& l) {
  LayerProgram lp(c);
  const int64_t M = l.tokens, E = c.model.d_model, Dh = c.model.head_dim;
  attention_forward(lp, c, l, "fwd", compute_all());
  attention_forward(lp, c, l, "remat", c.remat);
  mlp_backward(lp, c, l);
  lp.dot_bwd("bwd: attention proj", M, l.q_heads * Dh, E);
  lp.fusion("bwd: attention", Fusion::residual_add, M, l.q_heads * Dh);  // di = rowsum(o do)
  lp.kernel("bwd: attention", kernels::attention_backward_dkv(attention_shape(c, l)));
  lp.kernel("bwd: attention", kernels::attention_backward_dq(attention_shape(c, l)));
  lp.fusion("bwd: attention proj", Fusion::rope, M, l.q_heads * Dh);
  lp.fusion("bwd: attention proj", Fusion::rope, M, l.kv_heads * Dh);
  lp.dot_bwd("bwd: attention proj", M, E, (l.q_heads + 2 * l.kv_heads) * Dh);
  lp.fusion("bwd: norms", Fusion::rmsnorm_bwd, M, E);
  return lp.p;
}

kernels::gdn::GdnShape gdn_shape(const StepConfig& c, const Local& l) {
  return {l.batch,     l.seq,      l.gdn_value_heads, c.model.gdn.head_dim, c.model.gdn.head_dim,
          c.gdn_chunk, DType::bf16};
}

void gdn_forward(LayerProgram& lp, const StepConfig& c, const Local& l, const std::string& phase,
                 const RematPolicy& keep) {
  const int64_t M = l.tokens, E = c.model.d_model, D = c.model.gdn.head_dim;
  const int64_t K = l.gdn_key_heads * D, V = l.gdn_value_heads * D;
  lp.fusion(phase + ": norms", Fusion::rmsnorm, M, E);
  // The GDN layer names no checkpoints (xla_lowering.md 3): its projections are recomputed under
  // every policy but "full" recomputes all of them anyway.
  lp.dot(phase + ": gdn proj", M, E, 2 * K + 2 * V);
  lp.dot(phase + ": gdn proj", M, E, 2 * l.gdn_value_heads);
  lp.fusion(phase + ": gdn conv + gates", Fusion::causal_conv, M, 2 * K + V);
  lp.fusion(phase + ": gdn conv + gates", Fusion::gdn_gates, M, 2 * l.gdn_value_heads);
  lp.fusion(phase + ": gdn conv + gates", Fusion::residual_add, M,
            2 * V);  // q, k repeated to the value heads
  lp.fusion(phase + ": gdn out", Fusion::gated_rmsnorm, M, V);
  lp.dot(phase + ": gdn out", M, V, E);
  lp.fusion(phase + ": norms", Fusion::residual_add, M, E);
  mlp_forward(lp, c, l, phase, keep);
}

Program gdn_layer(const StepConfig& c, const Local& l) {
  LayerProgram lp(c);
  const int64_t M = l.tokens, E = c.model.d_model, D = c.model.gdn.head_dim;
  const int64_t K = l.gdn_key_heads * D, V = l.gdn_value_heads * D;
  gdn_forward(lp, c, l, "fwd", compute_all());
  gdn_forward(lp, c, l, "remat", c.remat);
  mlp_backward(lp, c, l);
  lp.dot_bwd("bwd: gdn out", M, V, E);
  lp.fusion("bwd: gdn out", Fusion::gated_rmsnorm_bwd, M, V);
  lp.fusion("bwd: gdn conv + gates", Fusion::causal_conv_bwd, M, 2 * K + V);
  lp.fusion("bwd: gdn conv + gates", Fusion::gdn_gates, M, 2 * l.gdn_value_heads);
  lp.dot_bwd("bwd: gdn proj", M, E, 2 * K + 2 * V);
  lp.dot_bwd("bwd: gdn proj", M, E, 2 * l.gdn_value_heads);
  lp.fusion("bwd: norms", Fusion::rmsnorm_bwd, M, E);
  // The core: forward, its recompute and its backward (kernels/gdn/layer.cpp), by build.
  kernels::gdn::LayerOptions core = c.gdn;
  if (c.mesh.context > 1) core.context = slice_axis(c, "context", c.mesh.context, false);
  lp.p.append(kernels::gdn::layer_core(gdn_shape(c, l), core), "gdn core");
  return lp.p;
}

Program embedding_and_logits(const StepConfig& c, const Local& l) {
  LayerProgram lp(c, /*weights_int8=*/false);
  const int64_t M = l.tokens, E = c.model.d_model, Vv = c.model.vocab / c.mesh.tensor;
  lp.fusion("fwd: embedding", Fusion::residual_add, M, E);  // the lookup: a gather of M rows
  lp.fusion("fwd: logits", Fusion::rmsnorm, M, E);
  // With vocabulary tiling the logits, the loss and their backward run per tile of the tokens.
  const int64_t Mt = M / c.vocab_tiles;
  for (int64_t t = 0; t < c.vocab_tiles; ++t) {
    lp.dot("fwd: logits", Mt, E, Vv);
    lp.fusion("fwd: logits", Fusion::cross_entropy, Mt, Vv);
  }
  for (int64_t t = 0; t < c.vocab_tiles; ++t) lp.dot_bwd("bwd: logits", Mt, E, Vv);
  lp.fusion("bwd: logits", Fusion::rmsnorm_bwd, M, E);
  lp.fusion("bwd: embedding", Fusion::residual_add, M, E);  // scatter-add of the gradient rows
  return lp.p;
}

Program optimizer(const StepConfig& c) {
  const int64_t local = c.model.params() / c.mesh.weight_shards();
  const int64_t rows = std::max<int64_t>(8, (local / 1024 + 7) / 8 * 8);
  Program p;
  p.add_kernel(kernels::xla_fusion(Fusion::adamw, rows, 1024, c.weight_dtype), {}, "optimizer");
  return p;
}

// `in_backward`: whether the part's items other than those of a "fwd" stage run in the backward
// pass (layers, logits) or after it (the optimizer).
StepPart simulate_part(const StepConfig& c, const std::string& name, int64_t count,
                       const Program& p, bool in_backward) {
  ChipSpec chip = c.chip;
  chip.host_dispatch_s = 0;  // one dispatch per step, added once
  const RunResult r = simulate(chip, p);
  int64_t fwd = 0, all = 0;
  for (size_t i = 0; i < r.item_cycles.size(); ++i) {
    all += r.item_cycles[i];
    if (r.item_stages[i].rfind("fwd", 0) == 0) fwd += r.item_cycles[i];
  }
  const double forward_share = all > 0 ? static_cast<double>(fwd) / all : 0;
  StepPart part;
  part.name = name;
  part.count = count;
  part.compute_s = r.time_s;
  part.flops = static_cast<double>(r.flops);
  for (int i = 0; i < kNumCauses; ++i) part.time_s[i] = chip.cycles_to_s(r.time[i]);
  std::map<std::string, int> units;
  for (size_t u = 0; u < r.units.size(); ++u) {
    const UnitInfo& unit = r.units[u];
    if (unit.kind == UnitKind::ici) continue;  // the step's collectives are costed analytically
    // "tc1.mxu3" -> "mxu": one group per kind of unit, over cores and indices.
    std::string group = unit.name.substr(unit.name.find('.') + 1);
    group.erase(group.find_last_not_of("0123456789") + 1);
    part.unit_busy_s[group] += chip.cycles_to_s(r.unit_busy[u]);
    ++units[group];
  }
  for (auto& [group, busy] : part.unit_busy_s) busy /= units[group];
  part.forward_s = r.time_s * forward_share;
  part.backward_s = in_backward ? r.time_s - part.forward_s : 0;
  return part;
}

// Per layer: the FSDP all-gather of its weights hides behind the forward, the second all-gather
// and the gradient reduce-scatter behind the recompute + backward; tensor-parallel all-reduces
// of the activations sit on the critical path (2 in the forward, 2 in the recompute, 2 in the
// backward).
// `attention`: under context parallelism the layer all-gathers the keys and values over the
// context axis before its attention kernel (forward and recompute) and reduce-scatters their
// gradients after it: on the critical path.
void add_layer_collectives(const StepConfig& c, StepPart& part, int64_t layer_params,
                           bool attention) {
  const Local l = local(c);
  double exposed = 0, total = 0;
  if (c.mesh.fsdp * c.mesh.context > 1) {
    const MeshAxis fsdp = slice_axis(c, "fsdp", c.mesh.fsdp * c.mesh.context, false);
    const int64_t bytes_bf16 = layer_params / c.mesh.tensor * 2,
                  bytes_grad = layer_params / c.mesh.tensor * byte_size(c.weight_dtype);
    const double ag = collective_seconds(c.chip, {CollectiveKind::all_gather, bytes_bf16, fsdp});
    const double rs =
        collective_seconds(c.chip, {CollectiveKind::reduce_scatter, bytes_grad, fsdp});
    exposed += std::max(0.0, ag - part.forward_s) + std::max(0.0, ag + rs - part.backward_s);
    total += 2 * ag + rs;
  }
  if (c.mesh.tensor > 1) {
    const MeshAxis tp = slice_axis(c, "tensor", c.mesh.tensor, true);
    const double ar = collective_seconds(
        c.chip, {CollectiveKind::all_reduce, l.tokens * c.model.d_model * 2, tp});
    exposed += 6 * ar;
    total += 6 * ar;
  }
  if (attention && c.mesh.context > 1) {
    const MeshAxis cp = slice_axis(c, "context", c.mesh.context, false);
    const int64_t kv = l.batch * c.seq * l.kv_heads * c.model.head_dim * 2 * 2;  // k and v, bf16
    const double ag = collective_seconds(c.chip, {CollectiveKind::all_gather, kv, cp});
    const double rs = collective_seconds(c.chip, {CollectiveKind::reduce_scatter, kv, cp});
    exposed += 2 * ag + rs;
    total += 2 * ag + rs;
  }
  part.collective_s = total;
  part.exposed_s = exposed;
}

std::vector<MemoryItem> memory_model(const StepConfig& c, const Local& l) {
  const ModelConfig& m = c.model;
  const int64_t shards = c.mesh.weight_shards(), P = m.params();
  const int64_t M = l.tokens, E = m.d_model;
  // Residual-stream activations [M, E] are sharded over the tensor axis (assumed: MaxText's
  // activation_embed sharding; replicated copies would not let C3 #22's tensor-parallel run fit
  // its 95 GiB), so each chip holds E / tensor columns of them.
  const int64_t Et = E / c.mesh.tensor;
  std::vector<MemoryItem> items;
  const std::string wt(name(c.weight_dtype));
  const int64_t wb = byte_size(c.weight_dtype);
  items.push_back({fmt::format("parameters ({}, sharded)", wt), wb * P / shards});
  items.push_back({fmt::format("gradients ({}, sharded)", wt), wb * P / shards});
  items.push_back({fmt::format("AdamW moments (2 x {}, sharded)", wt), 2 * wb * P / shards});
  const RematPolicy& keep = c.remat;
  items.push_back({fmt::format("saved layer inputs ({} x [{}, {}] bf16)", m.layers, M, Et),
                   m.layers * M * Et * 2, keep[A::decoder_layer_input] != Placement::offload});
  // The policy's named tensors, bf16, per layer kind (the GDN layer names only its MLP's).
  const int64_t Dh = m.head_dim;
  auto bytes_of = [&](Activation a) -> int64_t {
    switch (a) {
      case A::query_proj:
      case A::context:  // the attention output, and its f32 log-sum-exp per head
        return M * l.q_heads * Dh * 2 + (a == A::context ? M * l.q_heads * 4 : 0);
      case A::key_proj:
      case A::value_proj:
        return M * l.kv_heads * Dh * 2;
      case A::out_proj:
      case A::mlpwo:
        return M * Et * 2;
      case A::mlpwi_0:
        return M * l.mlp * 2;
      case A::mlpwi_1:
        return m.swiglu ? M * l.mlp * 2 : 0;
      case A::decoder_layer_input:
        return 0;  // listed above
    }
    return 0;
  };
  int64_t saved[2] = {0, 0};  // on device, offloaded
  for (int i = 1; i < kNumActivations; ++i) {
    const auto a = static_cast<Activation>(i);
    if (!keep.saved(a)) continue;
    const bool mlp = a == A::mlpwi_0 || a == A::mlpwi_1 || a == A::mlpwo;
    const int64_t layers = mlp ? m.layers : m.attention_layers();
    saved[keep[a] == Placement::offload] += layers * bytes_of(a);
  }
  if (saved[0] > 0) items.push_back({"activations saved by the remat policy", saved[0]});
  if (saved[1] > 0)
    items.push_back({"activations saved by the remat policy", saved[1], /*on_device=*/false});
  // The backward working set of one layer: its recomputed activations and kernel residuals.
  // Under context parallelism the attention backward also holds the gathered keys and values
  // (bf16) and their gradients (f32) for the whole sequence.
  const int64_t gathered_kv =
      c.mesh.context > 1 ? l.batch * c.seq * l.kv_heads * Dh * 2 * (2 + 4) : 0;
  const int64_t dense_ws =
      M * 2 * (4 * Et + 3 * (l.q_heads + 2 * l.kv_heads) * Dh + 3 * (m.swiglu ? 2 : 1) * l.mlp) +
      (m.attention_layers() > 0 ? gathered_kv : 0);
  int64_t gdn_ws = 0;
  if (m.gdn_layers() > 0) {
    const kernels::gdn::GdnShape g = gdn_shape(c, l);
    const int64_t B = g.batch, N = g.chunks(), H = g.heads, C = g.chunk, D = g.dk;
    const int64_t chunk_arrays =
        B * N * H * C * D * 2 * 5 + B * N * H * C * C * 4 * 2;  // w u q k v, S and A
    const int64_t residuals =
        c.gdn.build == kernels::gdn::Build::main
            ? N * B * H * 4 * (D * D + 3 * C * D + D * C + 2 * C * C)  // lax.scan stacks
            : B * N * H * D * D * 4;                                   // h_saved
    // Context parallelism: the local fold's carries (A, B) stacked per chunk for its backward.
    const int64_t cp_carries = c.mesh.context > 1 ? N * B * H * (D * D + D * g.dv) * 4 : 0;
    gdn_ws = dense_ws - (m.attention_layers() > 0 ? gathered_kv : 0) + chunk_arrays + residuals +
             cp_carries;
  }
  const int64_t gathered =
      2 * std::max(m.attention_layer_params(), m.gdn_layers() ? m.gdn_layer_params() : 0) /
      c.mesh.tensor * 2;
  // The logits dot writes bf16 (its cross-entropy fusion upcasts on the fly) and the gradient
  // comes back bf16: f32 copies of both would not fit the measured C3 #1 and #7 runs in 32 GiB.
  const int64_t logits = M / c.vocab_tiles * (m.vocab / c.mesh.tensor) * 2 * 2;
  const int64_t layer_ws = std::max(dense_ws, gdn_ws) + gathered;
  if (layer_ws >= logits) {
    items.push_back(
        {m.gdn_layers() > 0 && gdn_ws >= dense_ws
             ? fmt::format(
                   "peak: a GDN layer's backward (activations, chunk arrays, {}) + gathered "
                   "weights",
                   c.gdn.build == kernels::gdn::Build::main ? "lax.scan residuals" : "h_saved")
             : "peak: a layer's backward (activations) + gathered weights",
         layer_ws});
  } else {
    items.push_back({c.vocab_tiles > 1
                         ? fmt::format("peak: logits and their gradient (bf16), 1/{} of the tokens",
                                       c.vocab_tiles)
                         : "peak: logits and their gradient (bf16)",
                     logits});
  }
  return items;
}

// The configuration's own consistency: mesh product, divisibility, build and parallelism.
void check_config(const StepConfig& c) {
  const ModelConfig& m = c.model;
  const Mesh& x = c.mesh;
  if (x.fsdp * x.tensor * x.context != c.chips_per_slice)
    throw ConfigError("mesh", fmt::format("fsdp {} x tensor {} x context {} = {} is not the {} "
                                          "chips of the slice",
                                          x.fsdp, x.tensor, x.context,
                                          x.fsdp * x.tensor * x.context, c.chips_per_slice));
  if (x.tensor > 1 && (m.q_heads % x.tensor != 0 || m.mlp_dim % x.tensor != 0))
    throw ConfigError("mesh.tensor",
                      fmt::format("tensor parallelism {} does not divide {} heads and MLP {}",
                                  x.tensor, m.q_heads, m.mlp_dim));
  if (c.seq < 1 || c.batch_per_chip < 1)
    throw ConfigError("seq", fmt::format("seq {} and batch per chip {} must be positive", c.seq,
                                         c.batch_per_chip));
  if (c.seq % x.context != 0)
    throw ConfigError("mesh.context",
                      fmt::format("seq {} does not split over context {}", c.seq, x.context));
  const Local l = local(c);
  if (c.vocab_tiles < 1 || l.tokens % c.vocab_tiles != 0)
    throw ConfigError("vocab_tiling",
                      fmt::format("vocab tiling {} does not split the {} tokens of a chip",
                                  c.vocab_tiles, l.tokens));
  if (m.gdn_layers() > 0 && l.seq % c.gdn_chunk != 0)
    throw ConfigError("gdn.chunk",
                      fmt::format("the local sequence {} (seq {} / context {}) is not a multiple "
                                  "of the GDN chunk {}",
                                  l.seq, c.seq, x.context, c.gdn_chunk));
  if (x.context > 1 && m.gdn_layers() > 0 && c.gdn.build != kernels::gdn::Build::main)
    throw ConfigError(
        "gdn.build",
        fmt::format("context parallelism runs the GDN only in MaxText's lax.scan path (PR "
                    "#4968): build '{}' (PR #4348's kernels) does not compose the state across "
                    "context shards; use build main",
                    kernels::gdn::name(c.gdn.build)));
}

// Builds one part's program and runs the engine's static checks on it; a failure names `key`.
template <typename Build>
Program checked_part(const StepConfig& c, const std::string& key, const std::string& part,
                     Build build) {
  try {
    Program p = build();
    validate(c.chip, p);
    return p;
  } catch (const VmemError& e) {
    throw ConfigError(key, fmt::format("the {}: {}", part, e.what()), /*over_vmem=*/true);
  } catch (const Error& e) {
    throw ConfigError(key, fmt::format("the {}: {}", part, e.what()));
  }
}

// The parts are built here exactly as predict_step builds them, so what loads also runs.
Program attention_part(const StepConfig& c, const Local& l) {
  return checked_part(c, "attention", "attention layer", [&] { return attention_layer(c, l); });
}
Program gdn_part(const StepConfig& c, const Local& l) {
  return checked_part(c, "gdn", "GDN layer", [&] { return gdn_layer(c, l); });
}
Program logits_part(const StepConfig& c, const Local& l) {
  return checked_part(c, "vocab_tiling", "embedding and logits",
                      [&] { return embedding_and_logits(c, l); });
}
Program optimizer_part(const StepConfig& c) {
  return checked_part(c, "", "optimizer update", [&] { return optimizer(c); });
}

}  // namespace

void check(const StepConfig& c) {
  check_config(c);
  const Local l = local(c);
  if (c.model.attention_layers() > 0) attention_part(c, l);
  if (c.model.gdn_layers() > 0) gdn_part(c, l);
  logits_part(c, l);
  optimizer_part(c);
}

double maxtext_flops_per_device(const ModelConfig& m, int64_t b, int64_t s, AttentionCount count) {
  const double B = static_cast<double>(b), S = static_cast<double>(s),
               E = static_cast<double>(m.d_model);
  const double ffn = 2 * B * S * m.mlp_dim * E * (m.swiglu ? 2 : 1) + 2 * B * S * m.mlp_dim * E;
  const double qkv = 2 * B * S * E * (m.q_heads + 2 * m.kv_heads) * m.head_dim;
  const double proj = 2 * B * S * E * m.q_heads * m.head_dim;
  const double causal =
      4 * B * S * S * m.q_heads * m.head_dim / (count == AttentionCount::causal ? 2 : 1);
  const double embedding = 2 * B * S * E * m.vocab;
  const double K = static_cast<double>(m.gdn.key_heads * m.gdn.head_dim),
               V = static_cast<double>(m.gdn.value_heads * m.gdn.head_dim);
  const double gdn_weights = 2 * B * S * E * (2 * K + 2 * V + 2 * m.gdn.value_heads) +
                             2 * B * S * E * V + 2 * B * S * m.gdn.conv_kernel * (2 * K + V);
  const double gdn_core = 8.0 * m.gdn.value_heads * m.gdn.head_dim * m.gdn.head_dim * B * S;
  const double La = static_cast<double>(m.attention_layers()),
               Lg = static_cast<double>(m.gdn_layers());
  const double weights = ffn * m.layers + (qkv + proj) * La + gdn_weights * Lg + embedding;
  return 3 * weights + 3 * (causal * La + gdn_core * Lg);
}

Program one_of_each_part(const StepConfig& c) {
  check(c);
  const Local l = local(c);
  Program p;
  p.name = "one layer of each kind, embedding and logits";
  auto add = [&](const std::string& part, Program q) {  // stages become "part / stage"
    for (ProgramItem& item : q.items)
      item.stage = part + " / " + (item.stage.empty() ? item.name : item.stage);
    p.append(q);
  };
  if (c.model.attention_layers() > 0) add("attention layer", attention_layer(c, l));
  if (c.model.gdn_layers() > 0) add("gdn layer", gdn_layer(c, l));
  add("embedding + logits", embedding_and_logits(c, l));
  return p;
}

StepPrediction predict_step(const StepConfig& c) {
  check_config(c);  // the parts are checked as they are built
  const Local l = local(c);
  const ModelConfig& m = c.model;
  StepPrediction out;
  auto layer = [&](const std::string& name, int64_t count, const Program& p, int64_t params,
                   bool attention) {
    StepPart part = simulate_part(c, name, count, p, /*in_backward=*/true);
    add_layer_collectives(c, part, params, attention);
    out.parts.push_back(part);
  };
  if (m.attention_layers() > 0)
    layer("attention layer", m.attention_layers(), attention_part(c, l), m.attention_layer_params(),
          true);
  if (m.gdn_layers() > 0)
    layer("gdn layer", m.gdn_layers(), gdn_part(c, l), m.gdn_layer_params(), false);
  StepPart emb = simulate_part(c, "embedding + logits", 1, logits_part(c, l), /*in_backward=*/true);
  // Nothing hides the embedding's first gather and last scatter: all of it is exposed.
  add_layer_collectives(c, emb, m.embedding_params(), false);
  emb.exposed_s = emb.collective_s;
  out.parts.push_back(emb);
  out.parts.push_back(simulate_part(c, "optimizer", 1, optimizer_part(c), /*in_backward=*/false));
  if (c.mesh.data > 1) {
    StepPart dcn;
    dcn.name = "data-parallel gradient all-reduce (DCN)";
    const MeshAxis axis{"data", c.mesh.data, false, 1, true};
    dcn.collective_s = collective_seconds(
        c.chip, {CollectiveKind::all_reduce, 4 * m.params() / c.mesh.weight_shards(), axis});
    // XLA's data-parallel all-reduce pipelining overlaps it with the backward pass only.
    double backward = 0;
    for (const StepPart& p : out.parts) backward += p.backward_s * p.count;
    dcn.exposed_s = std::max(0.0, dcn.collective_s - backward);
    out.parts.push_back(dcn);
  }
  StepPart dispatch;
  dispatch.name = "host dispatch";
  dispatch.compute_s = c.chip.host_dispatch_s;
  dispatch.time_s[static_cast<int>(Cause::dispatch)] = c.chip.host_dispatch_s;
  out.parts.push_back(dispatch);

  for (const StepPart& p : out.parts) out.step_time_s += p.count * (p.compute_s + p.exposed_s);
  out.tokens_per_s_per_chip = l.tokens / c.mesh.tensor / out.step_time_s;
  // MaxText's per-device batch is fractional under context parallelism (1/context sequence).
  out.model_flops_per_chip =
      maxtext_flops_per_device(m, c.batch_per_chip, c.seq) / static_cast<double>(c.mesh.context);
  out.tflops_per_s_per_chip = out.model_flops_per_chip / out.step_time_s / 1e12;
  out.mfu = out.tflops_per_s_per_chip * 1e12 / c.chip.peak_bf16_flops;
  out.memory = memory_model(c, l);
  for (const MemoryItem& it : out.memory)
    if (it.on_device) out.peak_hbm_bytes += it.bytes;
  out.hbm_capacity_bytes = c.chip.hbm_bytes;
  out.fits_hbm = out.peak_hbm_bytes <= out.hbm_capacity_bytes;
  return out;
}

}  // namespace tpusim
