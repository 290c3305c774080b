#include "models/workload/layers.h"

#include <algorithm>

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
int64_t mlp_in_columns(const StepConfig& c, const LocalSizes& l, const RematPolicy& keep) {
  return (keep.saved(A::mlpwi_0) ? 0 : l.mlp) +
         (c.model.swiglu && !keep.saved(A::mlpwi_1) ? l.mlp : 0);
}

void mlp_forward(LayerProgram& lp, const StepConfig& c, const LocalSizes& l,
                 const std::string& phase, const RematPolicy& keep) {
  const int64_t M = l.tokens, E = c.model.d_model;
  lp.fusion(phase + ": norms", Fusion::rmsnorm, M, E);
  if (const int64_t n = mlp_in_columns(c, l, keep)) lp.dot(phase + ": mlp", M, E, n);
  // The activation's output is not a named checkpoint: the down projection's backward needs it.
  lp.fusion(phase + ": mlp", c.model.swiglu ? Fusion::swiglu : Fusion::gelu, M, l.mlp);
  if (!keep.saved(A::mlpwo)) lp.dot(phase + ": mlp", M, l.mlp, E);
  lp.fusion(phase + ": norms", Fusion::residual_add, M, E);
}

void mlp_backward(LayerProgram& lp, const StepConfig& c, const LocalSizes& l) {
  const int64_t M = l.tokens, E = c.model.d_model;
  lp.dot_bwd("bwd: mlp", M, l.mlp, E);
  lp.fusion("bwd: mlp", c.model.swiglu ? Fusion::swiglu_bwd : Fusion::gelu_bwd, M, l.mlp);
  lp.dot_bwd("bwd: mlp", M, E, (c.model.swiglu ? 2 : 1) * l.mlp);
  lp.fusion("bwd: norms", Fusion::rmsnorm_bwd, M, E);
}

kernels::AttentionShape attention_shape(const StepConfig& c, const LocalSizes& l) {
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
void attention_forward(LayerProgram& lp, const StepConfig& c, const LocalSizes& l,
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

void gdn_forward(LayerProgram& lp, const StepConfig& c, const LocalSizes& l,
                 const std::string& phase, const RematPolicy& keep) {
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

}  // namespace

kernels::gdn::GdnShape gdn_shape(const StepConfig& c, const LocalSizes& l) {
  return {l.batch,     l.seq,      l.gdn_value_heads, c.model.gdn.head_dim, c.model.gdn.head_dim,
          c.gdn_chunk, DType::bf16};
}

Program attention_layer(const StepConfig& c, const LocalSizes& l) {
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

Program gdn_layer(const StepConfig& c, const LocalSizes& l) {
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
  if (c.mesh.context > 1) core.context = context_axis(c);
  lp.p.append(kernels::gdn::layer_core(gdn_shape(c, l), core), "gdn core");
  return lp.p;
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
