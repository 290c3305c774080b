#include "models/workload/layers.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include "kernels/gdn/layer.h"
#include "kernels/generic.h"
#include "kernels/transformer.h"
#include "models/parallel/collective_plan.h"
#include "models/workload/layer_program.h"

namespace tpusim {
namespace {

using kernels::Fusion;
using A = Activation;

// The width of a layer's residual stream on one chip: MaxText's rules shard the activations' embed
// dimension over the tensor axis ('activation_embed' -> tensor, 'norm' -> tensor; configs/base.yml
// logical_axis_rules), so the norms and residual adds touch 1/tensor of it.
int64_t embed_shard(const StepConfig& c) { return c.model.d_model / c.mesh.tensor; }

// Buffers every layer kind has (the rest are named where they are made).
const Buffers kMlpInput{"mlp input"}, kMlpNorm{"mlp norm"}, kMlpOut{"mlp out"},
    kOutGrad{"layer output grad"}, kMlpInputGrad{"mlp input grad"}, kInputGrad{"layer input grad"};

// Reads "mlp input" (the residual stream after the layer's mixer), writes the layer's output (the
// next layer's input, held elsewhere).
void mlp_forward(LayerProgram& lp, const StepConfig& c, const LocalSizes& l, Pass pass) {
  const int64_t M = l.tokens, E = c.model.d_model;
  const std::string phase = phase_name(pass);
  const RematPolicy keep = kept_by(pass, c);
  lp.fusion(phase + ": norms", Fusion::rmsnorm, M, embed_shard(c),
            {{"x", kMlpInput}, {"y", kMlpNorm}});
  const BufferMap residual{{"x", kMlpInput}, {"r", kMlpOut}, {"y", {}}};
  if (c.model.is_moe()) {
    moe_forward(lp, c, l, phase + ": moe", keep);
    lp.fusion(phase + ": norms", Fusion::residual_add, M, embed_shard(c),
              {{"x", kMlpInput}, {"r", {"mlp out", "shared out"}}, {"y", {}}});
    return;
  }
  // MaxText's wi_0 and wi_1 are two weights (one with fused_mlp).
  const int64_t wi_0 = keep.saved(A::mlpwi_0) ? 0 : l.mlp;
  const int64_t wi_1 = c.model.swiglu && !keep.saved(A::mlpwi_1) ? l.mlp : 0;
  const Buffers up = unless_saved(c, A::mlpwi_0, "mlp up"), act{"mlp act"};
  if (c.fused_mlp)
    lp.weight_dot(phase + ": mlp", M, E, {wi_0 + wi_1}, kMlpNorm, up);
  else
    lp.weight_dot(phase + ": mlp", M, E, {wi_0, wi_1}, kMlpNorm, up);
  // The activation's output is not a named checkpoint: the down projection's backward needs it.
  if (c.model.swiglu)
    lp.fusion(phase + ": mlp", Fusion::swiglu, M, l.mlp, {{"gate", up}, {"up", up}, {"h", act}});
  else
    lp.fusion(phase + ": mlp", Fusion::gelu, M, l.mlp, {{"x", up}, {"y", act}});
  // The down projection's output only makes the layer's output through the residual add, and the
  // backward reads neither, so the compiled recompute drops both (C3 #42's and C1 main's compiled
  // backward loops: the MLP's up projections are recomputed, its down projection is not).
  if (pass == Pass::recompute) return;
  lp.weight_dot(phase + ": mlp", M, l.mlp, {E}, act, kMlpOut);
  lp.fusion(phase + ": norms", Fusion::residual_add, M, embed_shard(c), residual);
}

// Reads "layer output grad", writes "mlp input grad".
void mlp_backward(LayerProgram& lp, const StepConfig& c, const LocalSizes& l) {
  const int64_t M = l.tokens, E = c.model.d_model;
  const BufferMap norm_bwd{{"x", kMlpInput}, {"dy", {"mlp norm grad"}}, {"dx", kMlpInputGrad}};
  if (c.model.is_moe()) {
    moe_backward(lp, c, l);
    lp.fusion("bwd: norms", Fusion::rmsnorm_bwd, M, embed_shard(c), norm_bwd);
    return;
  }
  const Buffers up = unless_saved(c, A::mlpwi_0, "mlp up"), act_grad{"mlp act grad"},
                up_grad = in_place_of(up, "mlp up grad");
  lp.dot_bwd("bwd: mlp", M, l.mlp, E, {"mlp act"}, kOutGrad, act_grad);
  if (c.model.swiglu)
    lp.fusion("bwd: mlp", Fusion::swiglu_bwd, M, l.mlp,
              {{"gate", up}, {"up", up}, {"dh", act_grad}, {"dup", up_grad}, {"dgate", up_grad}});
  else
    lp.fusion("bwd: mlp", Fusion::gelu_bwd, M, l.mlp,
              {{"x", up}, {"dy", act_grad}, {"dx", up_grad}});
  lp.dot_bwd("bwd: mlp", M, E, (c.model.swiglu ? 2 : 1) * l.mlp, kMlpNorm, up_grad,
             {"mlp norm grad"});
  lp.fusion("bwd: norms", Fusion::rmsnorm_bwd, M, embed_shard(c), norm_bwd);
}

// The projections' buffers: q and the keys and values (one buffer, "qkv", from one dot; MLA's q
// and kv from their own), none where the policy keeps them on device.
struct Projections {
  Buffers q, kv;
};

Projections projections(const StepConfig& c) {
  const RematPolicy remat = c.layer_remat();
  auto on_device = [&](Activation a) { return remat.saved(a) && remat[a] != Placement::offload; };
  const bool kv_saved = on_device(A::key_proj) && on_device(A::value_proj);
  if (c.model.is_mla())
    return {unless_saved(c, A::query_proj, "q"), kv_saved ? Buffers{} : Buffers{"kv"}};
  const Buffers qkv = on_device(A::query_proj) && kv_saved && !c.model.gated_attention()
                          ? Buffers{}
                          : Buffers{"qkv"};
  return {qkv, qkv};
}

const Buffers kAttnNorm{"attention norm"}, kAttnNormGrad{"attention norm grad"};

// RoPE of `x` in place.
void rope(LayerProgram& lp, const std::string& stage, int64_t rows, int64_t cols,
          const Buffers& x) {
  lp.fusion(stage, Fusion::rope, rows, cols, {{"x", x}, {"cos sin", {}}, {"y", x}});
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
  const Projections out = projections(c);
  if (!keep.saved(A::query_proj)) {
    if (a.q_lora_rank > 0) {
      lp.weight_dot(stage, M, E, {a.q_lora_rank}, kAttnNorm, {"q latent"});
      lp.fusion(stage, Fusion::rmsnorm, M, a.q_lora_rank,
                {{"x", {"q latent"}}, {"y", {"q latent norm"}}});
      lp.weight_dot(stage, M, a.q_lora_rank, {H * Dqk}, {"q latent norm"}, out.q);
    } else {
      lp.weight_dot(stage, M, E, {H * Dqk}, kAttnNorm, out.q);
    }
    rope(lp, stage, M, H * a.qk_rope_head_dim, out.q);
  }
  if (!keep.saved(A::key_proj) || !keep.saved(A::value_proj)) {
    lp.weight_dot(stage, M, E, {a.kv_lora_rank + a.qk_rope_head_dim}, kAttnNorm, {"kv latent"});
    lp.fusion(stage, Fusion::rmsnorm, M, a.kv_lora_rank,
              {{"x", {"kv latent"}}, {"y", {"kv latent norm"}}});
    lp.weight_dot(stage, M, a.kv_lora_rank, {H * (a.qk_nope_head_dim + a.v_head_dim)},
                  {"kv latent norm"}, out.kv);
    rope(lp, stage, M, a.qk_rope_head_dim, {"kv latent"});
  }
}

// Their backward: each dot's two products, the norms' and RoPEs' backward.
void mla_projections_backward(LayerProgram& lp, const StepConfig& c, const LocalSizes& l) {
  const MlaDims& a = c.model.mla;
  const int64_t M = l.tokens, E = c.model.d_model, H = l.q_heads, Dqk = c.model.qk_head_dim();
  const std::string stage = "bwd: attention proj";
  rope(lp, stage, M, H * a.qk_rope_head_dim, {"dq"});
  rope(lp, stage, M, a.qk_rope_head_dim, {"dk"});
  if (a.q_lora_rank > 0) {
    lp.dot_bwd(stage, M, a.q_lora_rank, H * Dqk, {"q latent norm"}, {"dq"}, {"q latent norm grad"});
    lp.fusion(stage, Fusion::rmsnorm_bwd, M, a.q_lora_rank,
              {{"x", {"q latent"}}, {"dy", {"q latent norm grad"}}, {"dx", {"q latent grad"}}});
    lp.dot_bwd(stage, M, E, a.q_lora_rank, kAttnNorm, {"q latent grad"}, kAttnNormGrad);
  } else {
    lp.dot_bwd(stage, M, E, H * Dqk, kAttnNorm, {"dq"}, kAttnNormGrad);
  }
  lp.dot_bwd(stage, M, a.kv_lora_rank, H * (a.qk_nope_head_dim + a.v_head_dim), {"kv latent norm"},
             {"dk", "dv"}, {"kv latent norm grad"});
  lp.fusion(stage, Fusion::rmsnorm_bwd, M, a.kv_lora_rank,
            {{"x", {"kv latent"}}, {"dy", {"kv latent norm grad"}}, {"dx", {"kv latent grad"}}});
  lp.dot_bwd(stage, M, E, a.kv_lora_rank + a.qk_rope_head_dim, kAttnNorm, {"kv latent grad"},
             kAttnNormGrad);
}

// The attention kernels' arrays as the layer's buffers. Under context parallelism the keys and
// values are gathered for the kernel's key length (attention_shape) and their gradients are f32
// of that length until they are reduce-scattered.
BufferMap attention_buffers(const StepConfig& c, bool backward) {
  const Projections in = projections(c);
  const Buffers kv = c.mesh.context > 1 ? Buffers{"gathered kv"} : in.kv;
  const Buffers context = unless_saved(c, A::context, "context");
  BufferMap m{{"q", in.q},
              {"k", kv},
              {"v", kv},
              {"o", context},
              {"lse", unless_saved(c, A::context, "lse")}};
  if (!backward) return m;
  m["do"] = {"context grad"};
  m["di"] = {};  // one f32 per query row
  m["dq"] = {"dq"};
  m["dk"] = {"dk"};
  m["dv"] = {"dv"};
  return m;
}

// The named q, k and v are taken after projection, norm and RoPE (xla_lowering.md 3), so a saved
// one skips its share of the projection and its RoPE; a saved context skips the attention kernel.
void attention_forward(LayerProgram& lp, const StepConfig& c, const LocalSizes& l, Pass pass) {
  const std::string phase = phase_name(pass);
  const RematPolicy keep = kept_by(pass, c);
  const int64_t M = l.tokens, E = c.model.d_model, Dh = c.model.head_dim;
  lp.fusion(phase + ": norms", Fusion::rmsnorm, M, embed_shard(c),
            {{"x", layer_input(c)}, {"y", kAttnNorm}});
  const Projections proj = projections(c);
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
      lp.weight_dot(phase + ": attention proj", M, E, {q + k + v}, kAttnNorm, proj.q);
    else
      lp.weight_dot(phase + ": attention proj", M, E, {q, k, v}, kAttnNorm, proj.q);
    if (!keep.saved(A::query_proj)) rope(lp, phase + ": attention proj", M, l.q_heads * Dh, proj.q);
    if (!keep.saved(A::key_proj)) rope(lp, phase + ": attention proj", M, l.kv_heads * Dh, proj.kv);
  }
  const Buffers context = unless_saved(c, A::context, "context"),
                out = unless_saved(c, A::out_proj, "attention out");
  if (!keep.saved(A::context))
    lp.kernel(phase + ": attention", kernels::attention_forward(attention_shape(c, l)),
              attention_buffers(c, false));
  const bool gated = c.model.gated_attention();
  if (gated && !keep.saved(A::out_proj))
    lp.fusion(phase + ": attention", Fusion::sigmoid_gate, M, l.q_heads * c.model.v_head_dim(),
              {{"o", context}, {"gate", proj.q}, {"y", {"gated context"}}});
  if (!keep.saved(A::out_proj))
    lp.weight_dot(phase + ": attention proj", M, l.q_heads * c.model.v_head_dim(), {E},
                  gated ? Buffers{"gated context"} : context, out);
  lp.fusion(phase + ": norms", Fusion::residual_add, M, embed_shard(c),
            {{"x", layer_input(c)}, {"r", out}, {"y", kMlpInput}});
  mlp_forward(lp, c, l, pass);
}

// The GDN layer's buffers around its core: the core reads the token-major "q tokens", "k tokens",
// "v tokens", "g tokens" and "beta tokens" and writes "o" (kernels/gdn/xla.cpp, scan.cpp); its
// backward reads "do" and writes "dq tokens", ... "dbeta tokens".
const Buffers kGdnNorm{"gdn norm"}, kGdnQkvz{"gdn qkvz"}, kGdnBa{"gdn ba"},
    kGdnNormed{"gdn normed"};

// `core`: the GDN core's items of this pass (its forward, or its recompute), where they run.
void gdn_forward(LayerProgram& lp, const StepConfig& c, const LocalSizes& l, Pass pass,
                 const Program& core) {
  const std::string phase = phase_name(pass);
  const int64_t M = l.tokens, E = c.model.d_model, D = c.model.gdn.head_dim;
  const int64_t K = l.gdn_key_heads * D, V = l.gdn_value_heads * D;
  lp.fusion(phase + ": norms", Fusion::rmsnorm, M, embed_shard(c),
            {{"x", layer_input(c)}, {"y", kGdnNorm}});
  // The GDN layer names no checkpoints (xla_lowering.md 3): its projections are recomputed under
  // every policy but "full" recomputes all of them anyway.
  lp.weight_dot(phase + ": gdn proj", M, E, {2 * K + 2 * V}, kGdnNorm, kGdnQkvz);
  lp.weight_dot(phase + ": gdn proj", M, E, {2 * l.gdn_value_heads}, kGdnNorm, kGdnBa);
  lp.fusion(phase + ": gdn conv + gates", Fusion::causal_conv, M, 2 * K + V,
            {{"x", kGdnQkvz}, {"conv w", {}}, {"y", {"gdn conv qk", "v tokens"}}});
  lp.fusion(phase + ": gdn conv + gates", Fusion::gdn_gates, M, 2 * l.gdn_value_heads,
            {{"a b", kGdnBa}, {"beta", {"beta tokens"}}, {"g", {"g tokens"}}});
  lp.fusion(phase + ": gdn conv + gates", Fusion::residual_add, M,
            2 * V,  // q, k repeated to the value heads
            {{"x", {"gdn conv qk"}}, {"r", {"gdn conv qk"}}, {"y", {"q tokens", "k tokens"}}});
  lp.p.append(core, "gdn core");
  lp.fusion(phase + ": gdn out", Fusion::gated_rmsnorm, M, V,
            {{"x", {"o"}}, {"z", kGdnQkvz}, {"y", kGdnNormed}});
  lp.weight_dot(phase + ": gdn out", M, V, {E}, kGdnNormed, {"gdn out"});
  lp.fusion(phase + ": norms", Fusion::residual_add, M, embed_shard(c),
            {{"x", layer_input(c)}, {"r", {"gdn out"}}, {"y", kMlpInput}});
  mlp_forward(lp, c, l, pass);
}

// The items of the GDN core's program of one pass ("fwd", "remat" or "bwd"): contiguous, and
// depending on nothing outside them.
Program core_pass(const Program& core, const std::string& pass) {
  Program out;
  std::map<int, int> index;
  for (int i = 0; i < static_cast<int>(core.items.size()); ++i) {
    ProgramItem item = core.items[i];
    if (item.stage.rfind(pass + ":", 0) != 0) continue;
    for (int& d : item.deps) {
      if (!index.count(d))
        throw std::logic_error("GDN core: a " + pass + " item depends on another pass's");
      d = index[d];
    }
    index[i] = static_cast<int>(out.items.size());
    out.items.push_back(std::move(item));
  }
  return out;
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
  const bool gated = c.model.gated_attention();
  const Buffers context = unless_saved(c, A::context, "context"), context_grad{"context grad"};
  lp.dot_bwd("bwd: attention proj", M, l.q_heads * Dv, E,
             gated ? Buffers{"gated context"} : context, kMlpInputGrad, context_grad);
  if (gated)
    lp.fusion("bwd: attention", Fusion::sigmoid_gate_bwd, M, l.q_heads * Dv,
              {{"o", context},
               {"gate", projections(c).q},
               {"dy", context_grad},
               {"do", context_grad},
               {"dgate", {"gate grad"}}});
  lp.fusion("bwd: attention", Fusion::residual_add, M, l.q_heads * Dv,  // di = rowsum(o do)
            {{"x", context}, {"r", context_grad}, {"y", {}}});
  lp.kernel("bwd: attention", kernels::attention_backward_dkv(attention_shape(c, l)),
            attention_buffers(c, true));
  lp.kernel("bwd: attention", kernels::attention_backward_dq(attention_shape(c, l)),
            attention_buffers(c, true));
  if (c.model.is_mla()) {
    mla_projections_backward(lp, c, l);
  } else {
    rope(lp, "bwd: attention proj", M, l.q_heads * Dh, {"dq"});
    rope(lp, "bwd: attention proj", M, l.kv_heads * Dh, {"dk"});
    lp.dot_bwd("bwd: attention proj", M, E,
               l.q_heads * c.model.query_projection_dim() + 2 * l.kv_heads * Dh, kAttnNorm,
               {"dq", "dk", "dv", "gate grad"}, kAttnNormGrad);
  }
  lp.fusion("bwd: norms", Fusion::rmsnorm_bwd, M, embed_shard(c),
            {{"x", layer_input(c)}, {"dy", kAttnNormGrad}, {"dx", kInputGrad}});
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
  gdn_forward(lp, c, l, Pass::forward, core_pass(core, "fwd"));
  gdn_forward(lp, c, l, Pass::recompute, core_pass(core, "remat"));
  mlp_backward(lp, c, l);
  lp.dot_bwd("bwd: gdn out", M, V, E, kGdnNormed, kMlpInputGrad, {"gdn normed grad"});
  lp.fusion("bwd: gdn out", Fusion::gated_rmsnorm_bwd, M, V,
            {{"x", {"o"}},
             {"z", kGdnQkvz},
             {"dy", {"gdn normed grad"}},
             {"dz", {"gdn z grad"}},
             {"dx", {"do"}}});
  lp.p.append(core_pass(core, "bwd"), "gdn core");
  lp.fusion("bwd: gdn conv + gates", Fusion::causal_conv_bwd, M, 2 * K + V,
            {{"x", kGdnQkvz},
             {"conv w", {}},
             {"dy", {"dq tokens", "dk tokens", "dv tokens"}},
             {"dw partial", {}},
             {"y", {"gdn qkv grad"}}});
  lp.fusion("bwd: gdn conv + gates", Fusion::gdn_gates, M, 2 * l.gdn_value_heads,
            {{"a b", {"gdn ba", "dg tokens", "dbeta tokens"}},
             {"beta", {"gdn ba grad"}},
             {"g", {"gdn ba grad"}}});
  lp.dot_bwd("bwd: gdn proj", M, E, 2 * K + 2 * V, kGdnNorm, {"gdn qkv grad", "gdn z grad"},
             {"gdn norm grad"});
  lp.dot_bwd("bwd: gdn proj", M, E, 2 * l.gdn_value_heads, kGdnNorm, {"gdn ba grad"},
             {"gdn norm grad"});
  lp.fusion("bwd: norms", Fusion::rmsnorm_bwd, M, embed_shard(c),
            {{"x", layer_input(c)}, {"dy", {"gdn norm grad"}}, {"dx", kInputGrad}});
  return {std::move(lp.p), std::move(lp.forward_weights)};
}

Program embedding_and_logits(const StepConfig& c, const LocalSizes& l) {
  LayerProgram lp(c, /*weights_int8=*/false);
  const int64_t M = l.tokens, E = c.model.d_model, Vv = c.model.vocab / c.mesh.tensor;
  const Buffers hidden{"final hidden"}, norm{"final norm"}, logits{"logits"};
  lp.fusion("fwd: embedding", Fusion::residual_add, M, E,  // the lookup: a gather of M rows
            {{"x", {}}, {"r", {}}, {"y", {"embeddings"}}});
  lp.fusion("fwd: logits", Fusion::rmsnorm, M, E, {{"x", hidden}, {"y", norm}});
  // With vocabulary tiling the logits, the loss and their backward run per tile of the tokens.
  const int64_t Mt = M / c.vocab_tiles;
  for (int64_t t = 0; t < c.vocab_tiles; ++t) {
    lp.dot("fwd: logits", Mt, E, Vv, norm, {}, logits);
    lp.fusion("fwd: logits", Fusion::cross_entropy, Mt, Vv,
              {{"logits", logits}, {"dlogits", {"logits grad"}}, {"loss", {}}});
  }
  for (int64_t t = 0; t < c.vocab_tiles; ++t)
    lp.dot_bwd("bwd: logits", Mt, E, Vv, norm, {"logits grad"}, {"final norm grad"});
  lp.fusion("bwd: logits", Fusion::rmsnorm_bwd, M, E,
            {{"x", hidden}, {"dy", {"final norm grad"}}, {"dx", {"final hidden grad"}}});
  lp.fusion("bwd: embedding", Fusion::residual_add, M, E,  // scatter-add of the gradient rows
            {{"x", {"embeddings grad"}}, {"r", {}}, {"y", {}}});
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
