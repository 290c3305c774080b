#include "models/workload/layers.h"

#include <algorithm>
#include <cmath>

#include "kernels/gdn/layer.h"
#include "kernels/generic.h"
#include "kernels/transformer.h"
#include "models/parallel/collective_plan.h"

namespace tpusim {
namespace {

using kernels::Fusion;

// Builds one layer's program in phases, recording which ops the remat policy recomputes.
class LayerProgram {
 public:
  // `weights_int8`: the program's dots are weight matmuls that AQT quantizes (not the logits).
  LayerProgram(const StepConfig& c, bool weights_int8 = true)
      : c_(c), int8_(weights_int8 && c.int8_matmuls) {}
  Program p;

  // Which operand of an int8 dot is a gradient, rounded stochastically (AQT's "jax.uniform"
  // noise on the gradient side of both backward products, MaxText's config_v3).
  enum class Gradient { none, lhs, rhs };
  // x [m, k] times y [k, n]; with int8 matmuls both operands are quantized first.
  void dot(const std::string& stage, int64_t m, int64_t k, int64_t n, Gradient g = Gradient::none) {
    if (int8_) {
      fusion(stage, g == Gradient::lhs ? Fusion::quantize_stochastic : Fusion::quantize, m, k);
      fusion(stage, g == Gradient::rhs ? Fusion::quantize_stochastic : Fusion::quantize, k, n);
    }
    p.add_kernel(kernels::xla_dot(c_.chip, m, k, n, int8_ ? DType::s8 : DType::bf16), {}, stage);
  }
  // y = x W (x [M, K], W [K, N]): the forward dot, and in the backward dX = dY W^T and
  // dW = x^T dY.
  void dot_bwd(const std::string& stage, int64_t m, int64_t k, int64_t n) {
    dot(stage, m, n, k, Gradient::lhs);
    dot(stage, k, m, n, Gradient::rhs);
  }
  // x [m, k] times the weights [k, n_i] side by side (q, k and v; an MLP's two up projections):
  // one dot, which in the forward pass reads each weight.
  void weight_dot(const std::string& stage, int64_t m, int64_t k,
                  std::initializer_list<int64_t> columns) {
    int64_t n = 0;
    for (int64_t each : columns) {
      reads(stage, k * each);
      n += each;
    }
    if (n > 0) dot(stage, m, k, n);
  }
  // The next op reads a weight of `elements` (recorded in the forward pass only: the weights'
  // gathers the step model chains, collective_plan.h).
  void reads(const std::string& stage, int64_t elements) {
    if (elements > 0 && is_forward_stage(stage))
      forward_weights.push_back({static_cast<int>(p.items.size()), elements});
  }
  std::vector<WeightRead> forward_weights;

  void fusion(const std::string& stage, Fusion f, int64_t rows, int64_t cols) {
    p.add_kernel(kernels::xla_fusion(f, rows, cols), {}, stage);
  }
  void kernel(const std::string& stage, std::shared_ptr<const Kernel> k) {
    p.add_kernel(std::move(k), {}, stage);
  }
  void grouped_matmul(const std::string& stage, int64_t m, int64_t k, int64_t n) {
    p.add_kernel(kernels::grouped_matmul(m, k, n), {}, stage);
  }

 private:
  const StepConfig& c_;
  bool int8_;
};

using A = Activation;

// The width of a layer's residual stream on one chip: MaxText's rules shard the activations' embed
// dimension over the tensor axis ('activation_embed' -> tensor, 'norm' -> tensor; configs/base.yml
// logical_axis_rules), so the norms and residual adds touch 1/tensor of it.
int64_t embed_shard(const StepConfig& c) { return c.model.d_model / c.mesh.tensor; }

// A layer's forward runs twice: the forward pass computes everything; its recompute in the
// backward skips what the policy saved, and what the backward never reads.
enum class Pass { forward, recompute };

std::string phase_name(Pass pass) { return pass == Pass::forward ? "fwd" : "remat"; }

RematPolicy kept_by(Pass pass, const StepConfig& c) {
  static const RematPolicy compute_all = RematPolicy::named("full");
  return pass == Pass::forward ? compute_all : c.layer_remat();
}

// An MoE block's per-chip sizes (MaxText layers/moe.py). Routing is taken as balanced: each local
// expert gets tokens x top_k / experts rows (with expert parallelism on megablox's path the
// all-to-all brings each chip the rows of its experts from the whole expert axis: the same count;
// the dense einsum path runs every expert on the chip's own batch).
struct MoeSizes {
  int64_t experts = 0;   // on this chip (experts / mesh.expert)
  int64_t rows = 0;      // per local expert, padded to megablox's 512-row tile
  int64_t width = 0;     // an expert's MLP width on this chip (/ tensor)
  int64_t capacity = 0;  // per sequence and expert when tokens are dropped (0: none)
};

MoeSizes moe_sizes(const StepConfig& c, const LocalSizes& l) {
  const MoeDims& e = c.model.moe;
  MoeSizes s;
  s.experts = e.experts / c.mesh.expert;
  s.rows = kernels::megablox_rows((l.tokens * e.top_k + e.experts - 1) / e.experts);
  s.width = e.mlp_dim / c.mesh.tensor;
  // moe.py generate_masks (L3783-3796): int(max(ceil(S top_k / E) x cf, cf)) per sequence.
  if (c.capacity_factor > 0)
    s.capacity = static_cast<int64_t>(
        std::max(std::ceil(static_cast<double>(l.seq * e.top_k) / e.experts) * c.capacity_factor,
                 c.capacity_factor));
  return s;
}

// The routed experts, forward (or its recompute without what the policy saved), on the path
// MaxText takes (moe.py __call__ L4689-4727): sparse_matmul sorts the token copies by expert and
// runs megablox's grouped matmuls; otherwise dense_matmul, with a capacity factor dispatching
// into [experts, batch, capacity] slots by one-hot einsums (dropping what overflows), without one
// running every token through every expert.
void moe_experts_forward(LayerProgram& lp, const StepConfig& c, const LocalSizes& l,
                         const std::string& stage, const RematPolicy& keep) {
  const int64_t M = l.tokens, E = c.model.d_model;
  const MoeSizes s = moe_sizes(c, l);
  const bool up = !(keep.saved(A::mlpwi_0) && keep.saved(A::mlpwi_1)), down = !keep.saved(A::mlpwo);
  if (c.moe_sparse_matmul) {
    const int64_t R = s.experts * s.rows;
    lp.fusion(stage, Fusion::residual_add, R, E);  // permute: gather the token copies by expert
    if (up) {
      lp.reads(stage, s.experts * E * 2 * s.width);
      lp.grouped_matmul(stage, R, E, 2 * s.width);
    }
    lp.fusion(stage, Fusion::swiglu, R, s.width);
    if (down) {
      lp.reads(stage, s.experts * s.width * E);
      lp.grouped_matmul(stage, R, s.width, E);
    }
    lp.fusion(stage, Fusion::residual_add, R, E);  // unpermute and the routing-weighted sum
  } else if (s.capacity > 0) {
    const int64_t slots = l.batch * c.model.moe.experts * s.capacity;
    lp.fusion(stage, Fusion::residual_add, M, c.model.moe.experts * s.capacity);  // the masks
    lp.dot(stage, slots, l.seq, E);  // dispatch "BSM,BSEC -> EBCM" (per sequence, over S)
    if (up) {
      lp.reads(stage, s.experts * E * 2 * s.width);
      lp.dot(stage, slots, E, 2 * s.width);
    }
    lp.fusion(stage, Fusion::swiglu, slots, s.width);
    if (down) {
      lp.reads(stage, s.experts * s.width * E);
      lp.dot(stage, slots, s.width, E);
    }
    lp.dot(stage, M, c.model.moe.experts * s.capacity, E);  // combine "EBCM,BSEC -> BSM"
  } else {
    if (up) lp.weight_dot(stage, M, E, {2 * s.experts * s.width});  // "BSM,EMH -> BSEH"
    lp.fusion(stage, Fusion::swiglu, M * s.experts, s.width);
    if (down) {
      lp.reads(stage, s.experts * s.width * E);
      lp.dot(stage, M * s.experts, s.width, E);
    }
    lp.fusion(stage, Fusion::residual_add, M * s.experts, E);  // the weighted sum
  }
}

void moe_experts_backward(LayerProgram& lp, const StepConfig& c, const LocalSizes& l) {
  const int64_t M = l.tokens, E = c.model.d_model;
  const MoeSizes s = moe_sizes(c, l);
  const std::string stage = "bwd: moe";
  if (c.moe_sparse_matmul) {
    const int64_t R = s.experts * s.rows;
    lp.fusion(stage, Fusion::residual_add, R, E);
    lp.grouped_matmul(stage, R, E, s.width);                   // dX of the down projection
    lp.grouped_matmul(stage, s.experts * s.width, s.rows, E);  // its dW (tgmm)
    lp.fusion(stage, Fusion::swiglu_bwd, R, s.width);
    lp.grouped_matmul(stage, R, 2 * s.width, E);
    lp.grouped_matmul(stage, s.experts * E, s.rows, 2 * s.width);
    lp.fusion(stage, Fusion::residual_add, R, E);
  } else if (s.capacity > 0) {
    const int64_t slots = l.batch * c.model.moe.experts * s.capacity;
    lp.dot_bwd(stage, M, c.model.moe.experts * s.capacity, E);
    lp.dot_bwd(stage, slots, s.width, E);
    lp.fusion(stage, Fusion::swiglu_bwd, slots, s.width);
    lp.dot_bwd(stage, slots, E, 2 * s.width);
    lp.dot_bwd(stage, slots, l.seq, E);
  } else {
    lp.fusion(stage, Fusion::residual_add, M * s.experts, E);
    lp.dot_bwd(stage, M * s.experts, s.width, E);
    lp.fusion(stage, Fusion::swiglu_bwd, M * s.experts, s.width);
    lp.dot_bwd(stage, M, E, 2 * s.experts * s.width);
  }
}

// The router (a dot to the experts' logits, their softmax and top-k), the shared experts (one
// dense SwiGLU MLP of shared x the expert width) and the routed experts.
void moe_forward(LayerProgram& lp, const StepConfig& c, const LocalSizes& l,
                 const std::string& stage, const RematPolicy& keep) {
  const int64_t M = l.tokens, E = c.model.d_model, experts = c.model.moe.experts;
  lp.weight_dot(stage, M, E, {experts});
  lp.fusion(stage, Fusion::cross_entropy, M, experts);  // softmax over the experts, top-k
  if (const int64_t w = c.model.moe.shared * moe_sizes(c, l).width) {
    if (!(keep.saved(A::mlpwi_0) && keep.saved(A::mlpwi_1))) lp.weight_dot(stage, M, E, {w, w});
    lp.fusion(stage, Fusion::swiglu, M, w);
    if (!keep.saved(A::mlpwo)) lp.weight_dot(stage, M, w, {E});
  }
  moe_experts_forward(lp, c, l, stage, keep);
}

void moe_backward(LayerProgram& lp, const StepConfig& c, const LocalSizes& l) {
  const int64_t M = l.tokens, E = c.model.d_model;
  moe_experts_backward(lp, c, l);
  if (const int64_t w = c.model.moe.shared * moe_sizes(c, l).width) {
    lp.dot_bwd("bwd: moe", M, w, E);
    lp.fusion("bwd: moe", Fusion::swiglu_bwd, M, w);
    lp.dot_bwd("bwd: moe", M, E, 2 * w);
  }
  lp.dot_bwd("bwd: moe", M, E, c.model.moe.experts);
}

void mlp_forward(LayerProgram& lp, const StepConfig& c, const LocalSizes& l, Pass pass) {
  const int64_t M = l.tokens, E = c.model.d_model;
  const std::string phase = phase_name(pass);
  const RematPolicy keep = kept_by(pass, c);
  lp.fusion(phase + ": norms", Fusion::rmsnorm, M, embed_shard(c));
  if (c.model.is_moe()) {
    moe_forward(lp, c, l, phase + ": moe", keep);
    lp.fusion(phase + ": norms", Fusion::residual_add, M, embed_shard(c));
    return;
  }
  // MaxText's wi_0 and wi_1 are two weights (one with fused_mlp).
  const int64_t wi_0 = keep.saved(A::mlpwi_0) ? 0 : l.mlp;
  const int64_t wi_1 = c.model.swiglu && !keep.saved(A::mlpwi_1) ? l.mlp : 0;
  if (c.fused_mlp)
    lp.weight_dot(phase + ": mlp", M, E, {wi_0 + wi_1});
  else
    lp.weight_dot(phase + ": mlp", M, E, {wi_0, wi_1});
  // The activation's output is not a named checkpoint: the down projection's backward needs it.
  lp.fusion(phase + ": mlp", c.model.swiglu ? Fusion::swiglu : Fusion::gelu, M, l.mlp);
  // The down projection's output only makes the layer's output through the residual add, and the
  // backward reads neither, so the compiled recompute drops both (C3 #42's and C1 main's compiled
  // backward loops: the MLP's up projections are recomputed, its down projection is not).
  if (pass == Pass::recompute) return;
  lp.weight_dot(phase + ": mlp", M, l.mlp, {E});
  lp.fusion(phase + ": norms", Fusion::residual_add, M, embed_shard(c));
}

void mlp_backward(LayerProgram& lp, const StepConfig& c, const LocalSizes& l) {
  const int64_t M = l.tokens, E = c.model.d_model;
  if (c.model.is_moe()) {
    moe_backward(lp, c, l);
    lp.fusion("bwd: norms", Fusion::rmsnorm_bwd, M, embed_shard(c));
    return;
  }
  lp.dot_bwd("bwd: mlp", M, l.mlp, E);
  lp.fusion("bwd: mlp", c.model.swiglu ? Fusion::swiglu_bwd : Fusion::gelu_bwd, M, l.mlp);
  lp.dot_bwd("bwd: mlp", M, E, (c.model.swiglu ? 2 : 1) * l.mlp);
  lp.fusion("bwd: norms", Fusion::rmsnorm_bwd, M, embed_shard(c));
}

// Multi-head latent attention's projections (attention_mla.py mla_query_projection L811-,
// mla_kv_projection L1003-): q through its latent (a dot down, its RMSNorm, a dot up to the
// heads) or directly; keys and values from one dot down to the kv latent and the RoPE key, the
// latent's RMSNorm and one dot up to every head's key and value; RoPE on q's and the key's rope
// parts. The latents are not split over the tensor axis (their weights' axes q_lora, kv_lora
// are not), so every chip of a tensor group computes them. Saved q, k and v skip their parts.
void mla_projections(LayerProgram& lp, const StepConfig& c, const LocalSizes& l,
                     const std::string& stage, const RematPolicy& keep) {
  const MlaDims& a = c.model.mla;
  const int64_t M = l.tokens, E = c.model.d_model, H = l.q_heads, Dqk = c.model.qk_head_dim();
  if (!keep.saved(A::query_proj)) {
    if (a.q_lora_rank > 0) {
      lp.weight_dot(stage, M, E, {a.q_lora_rank});
      lp.fusion(stage, Fusion::rmsnorm, M, a.q_lora_rank);
      lp.weight_dot(stage, M, a.q_lora_rank, {H * Dqk});
    } else {
      lp.weight_dot(stage, M, E, {H * Dqk});
    }
    lp.fusion(stage, Fusion::rope, M, H * a.qk_rope_head_dim);
  }
  if (!keep.saved(A::key_proj) || !keep.saved(A::value_proj)) {
    lp.weight_dot(stage, M, E, {a.kv_lora_rank + a.qk_rope_head_dim});
    lp.fusion(stage, Fusion::rmsnorm, M, a.kv_lora_rank);
    lp.weight_dot(stage, M, a.kv_lora_rank, {H * (a.qk_nope_head_dim + a.v_head_dim)});
    lp.fusion(stage, Fusion::rope, M, a.qk_rope_head_dim);
  }
}

// Their backward: each dot's two products, the norms' and RoPEs' backward.
void mla_projections_backward(LayerProgram& lp, const StepConfig& c, const LocalSizes& l) {
  const MlaDims& a = c.model.mla;
  const int64_t M = l.tokens, E = c.model.d_model, H = l.q_heads, Dqk = c.model.qk_head_dim();
  const std::string stage = "bwd: attention proj";
  lp.fusion(stage, Fusion::rope, M, H * a.qk_rope_head_dim);
  lp.fusion(stage, Fusion::rope, M, a.qk_rope_head_dim);
  if (a.q_lora_rank > 0) {
    lp.dot_bwd(stage, M, a.q_lora_rank, H * Dqk);
    lp.fusion(stage, Fusion::rmsnorm_bwd, M, a.q_lora_rank);
    lp.dot_bwd(stage, M, E, a.q_lora_rank);
  } else {
    lp.dot_bwd(stage, M, E, H * Dqk);
  }
  lp.dot_bwd(stage, M, a.kv_lora_rank, H * (a.qk_nope_head_dim + a.v_head_dim));
  lp.fusion(stage, Fusion::rmsnorm_bwd, M, a.kv_lora_rank);
  lp.dot_bwd(stage, M, E, a.kv_lora_rank + a.qk_rope_head_dim);
}

// The named q, k and v are taken after projection, norm and RoPE (xla_lowering.md 3), so a saved
// one skips its share of the projection and its RoPE; a saved context skips the attention kernel.
void attention_forward(LayerProgram& lp, const StepConfig& c, const LocalSizes& l, Pass pass) {
  const std::string phase = phase_name(pass);
  const RematPolicy keep = kept_by(pass, c);
  const int64_t M = l.tokens, E = c.model.d_model, Dh = c.model.head_dim;
  lp.fusion(phase + ": norms", Fusion::rmsnorm, M, embed_shard(c));
  if (c.model.is_mla()) {
    mla_projections(lp, c, l, phase + ": attention proj", keep);
  } else {
    // A gated attention's gate is not a named checkpoint (MaxText names the query after the split,
    // attentions.py L1324): its half of the query projection is recomputed whatever is saved.
    const int64_t gate = c.model.gated_attention() ? l.q_heads * Dh : 0;
    const int64_t q = (keep.saved(A::query_proj) ? 0 : l.q_heads * Dh) + gate,
                  k = keep.saved(A::key_proj) ? 0 : l.kv_heads * Dh,
                  v = keep.saved(A::value_proj) ? 0 : l.kv_heads * Dh;
    // MaxText's query, key and value are three weights (one with fused_qkv).
    if (c.fused_qkv)
      lp.weight_dot(phase + ": attention proj", M, E, {q + k + v});
    else
      lp.weight_dot(phase + ": attention proj", M, E, {q, k, v});
    if (!keep.saved(A::query_proj))
      lp.fusion(phase + ": attention proj", Fusion::rope, M, l.q_heads * Dh);
    if (!keep.saved(A::key_proj))
      lp.fusion(phase + ": attention proj", Fusion::rope, M, l.kv_heads * Dh);
  }
  if (!keep.saved(A::context))
    lp.kernel(phase + ": attention", kernels::attention_forward(attention_shape(c, l)));
  if (c.model.gated_attention() && !keep.saved(A::out_proj))
    lp.fusion(phase + ": attention", Fusion::sigmoid_gate, M, l.q_heads * c.model.v_head_dim());
  if (!keep.saved(A::out_proj))
    lp.weight_dot(phase + ": attention proj", M, l.q_heads * c.model.v_head_dim(), {E});
  lp.fusion(phase + ": norms", Fusion::residual_add, M, embed_shard(c));
  mlp_forward(lp, c, l, pass);
}

// `core`: the GDN core's program (forward, recompute and backward), placed in the forward pass
// where its forward runs, so that the forward's ops stay in the order they run.
void gdn_forward(LayerProgram& lp, const StepConfig& c, const LocalSizes& l, Pass pass,
                 const Program* core = nullptr) {
  const std::string phase = phase_name(pass);
  const RematPolicy keep = kept_by(pass, c);
  const int64_t M = l.tokens, E = c.model.d_model, D = c.model.gdn.head_dim;
  const int64_t K = l.gdn_key_heads * D, V = l.gdn_value_heads * D;
  lp.fusion(phase + ": norms", Fusion::rmsnorm, M, embed_shard(c));
  // The GDN layer names no checkpoints (xla_lowering.md 3): its projections are recomputed under
  // every policy but "full" recomputes all of them anyway.
  lp.weight_dot(phase + ": gdn proj", M, E, {2 * K + 2 * V});
  lp.weight_dot(phase + ": gdn proj", M, E, {2 * l.gdn_value_heads});
  lp.fusion(phase + ": gdn conv + gates", Fusion::causal_conv, M, 2 * K + V);
  lp.fusion(phase + ": gdn conv + gates", Fusion::gdn_gates, M, 2 * l.gdn_value_heads);
  lp.fusion(phase + ": gdn conv + gates", Fusion::residual_add, M,
            2 * V);  // q, k repeated to the value heads
  if (core) lp.p.append(*core, "gdn core");
  lp.fusion(phase + ": gdn out", Fusion::gated_rmsnorm, M, V);
  lp.weight_dot(phase + ": gdn out", M, V, {E});
  lp.fusion(phase + ": norms", Fusion::residual_add, M, embed_shard(c));
  mlp_forward(lp, c, l, pass);
}

}  // namespace

kernels::AttentionShape attention_shape(const StepConfig& c, const LocalSizes& l) {
  const int64_t block = std::min(c.attention_block, l.seq);
  // Context parallelism (MaxText's all-gathered keys and values), taken as a full block grid
  // without the mask. In MaxText's load-balanced causal order (its default) the local queries
  // meet on average half of the sequence's keys: seq / 2. A model with GDN layers runs without
  // it (configs/types.py L5375-5383 refuses it: the recurrence needs device order to be sequence
  // order), so the last chip's queries meet every earlier key and half of their own shard's, and
  // the layer's collectives make every chip wait for that one: seq - local seq / 2.
  const bool cp = c.mesh.context > 1;
  const int64_t kv_seq = c.model.gdn_layers() > 0 ? c.seq - l.seq / 2 : c.seq / 2;
  return {.batch = l.batch,
          .seq = l.seq,
          .q_heads = l.q_heads,
          .kv_heads = l.kv_heads,
          .head_dim = c.model.qk_head_dim(),
          .block = block,
          .block_compute = std::min<int64_t>(512, block),
          .causal = !cp,
          .dtype = DType::bf16,
          .kv_seq = cp ? kv_seq : 0,
          .head_dim_v = c.model.v_head_dim()};
}

kernels::gdn::GdnShape gdn_shape(const StepConfig& c, const LocalSizes& l) {
  return {l.batch,     l.seq,      l.gdn_value_heads, c.model.gdn.head_dim, c.model.gdn.head_dim,
          c.gdn_chunk, DType::bf16};
}

LayerPrograms attention_layer(const StepConfig& c, const LocalSizes& l) {
  LayerProgram lp(c);
  const int64_t M = l.tokens, E = c.model.d_model, Dh = c.model.head_dim, Dv = c.model.v_head_dim();
  attention_forward(lp, c, l, Pass::forward);
  attention_forward(lp, c, l, Pass::recompute);
  mlp_backward(lp, c, l);
  lp.dot_bwd("bwd: attention proj", M, l.q_heads * Dv, E);
  if (c.model.gated_attention())
    lp.fusion("bwd: attention", Fusion::sigmoid_gate_bwd, M, l.q_heads * Dv);
  lp.fusion("bwd: attention", Fusion::residual_add, M, l.q_heads * Dv);  // di = rowsum(o do)
  lp.kernel("bwd: attention", kernels::attention_backward_dkv(attention_shape(c, l)));
  lp.kernel("bwd: attention", kernels::attention_backward_dq(attention_shape(c, l)));
  if (c.model.is_mla()) {
    mla_projections_backward(lp, c, l);
  } else {
    lp.fusion("bwd: attention proj", Fusion::rope, M, l.q_heads * Dh);
    lp.fusion("bwd: attention proj", Fusion::rope, M, l.kv_heads * Dh);
    lp.dot_bwd("bwd: attention proj", M, E,
               l.q_heads * c.model.query_projection_dim() + 2 * l.kv_heads * Dh);
  }
  lp.fusion("bwd: norms", Fusion::rmsnorm_bwd, M, embed_shard(c));
  return {std::move(lp.p), std::move(lp.forward_weights)};
}

LayerPrograms gdn_layer(const StepConfig& c, const LocalSizes& l) {
  LayerProgram lp(c);
  const int64_t M = l.tokens, E = c.model.d_model, D = c.model.gdn.head_dim;
  const int64_t K = l.gdn_key_heads * D, V = l.gdn_value_heads * D;
  // The core: forward, its recompute and its backward (kernels/gdn/layer.cpp), by build.
  kernels::gdn::LayerOptions options = c.gdn;
  if (c.mesh.context > 1) options.context = context_axis(c);
  const Program core = kernels::gdn::layer_core(gdn_shape(c, l), options);
  gdn_forward(lp, c, l, Pass::forward, &core);
  gdn_forward(lp, c, l, Pass::recompute);
  mlp_backward(lp, c, l);
  lp.dot_bwd("bwd: gdn out", M, V, E);
  lp.fusion("bwd: gdn out", Fusion::gated_rmsnorm_bwd, M, V);
  lp.fusion("bwd: gdn conv + gates", Fusion::causal_conv_bwd, M, 2 * K + V);
  lp.fusion("bwd: gdn conv + gates", Fusion::gdn_gates, M, 2 * l.gdn_value_heads);
  lp.dot_bwd("bwd: gdn proj", M, E, 2 * K + 2 * V);
  lp.dot_bwd("bwd: gdn proj", M, E, 2 * l.gdn_value_heads);
  lp.fusion("bwd: norms", Fusion::rmsnorm_bwd, M, embed_shard(c));
  return {std::move(lp.p), std::move(lp.forward_weights)};
}

Program embedding_and_logits(const StepConfig& c, const LocalSizes& l) {
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

}  // namespace tpusim
