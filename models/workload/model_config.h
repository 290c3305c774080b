// Model configurations (models/workloads/<name>.yaml): a transformer, optionally hybrid with
// Gated Delta Net layers (full attention in every `full_attention_interval`-th layer), whose MLP
// may be a mixture of experts. Unknown keys are errors naming file:line:column.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tpusim {

struct GdnDims {
  int64_t key_heads = 16, value_heads = 32, head_dim = 128, conv_kernel = 4;
};

// A mixture of experts in place of a layer's MLP (MaxText's num_experts, num_experts_per_tok,
// base_moe_mlp_dim, shared_experts): a router over `experts` SwiGLU experts of width `mlp_dim`,
// `top_k` of them per token, and `shared` experts every token passes through. experts 0: dense.
// `dense_layers` of the layers keep the dense MLP of the model's mlp_dim instead (MaxText's
// get_dense_moe_layers: DeepSeek's first_num_dense_layers; Llama4's layers - layers /
// interleave_moe_layer_step); which ones does not matter to a step of identical layers.
struct MoeDims {
  int64_t experts = 0, top_k = 0, mlp_dim = 0, shared = 0, dense_layers = 0;
};

// DeepSeek's multi-head latent attention (MaxText attention_type mla, layers/attention_mla.py):
// q from a low-rank latent of q_lora_rank (0: directly from the embedding), keys and values from
// a shared latent of kv_lora_rank plus one RoPE key of qk_rope_head_dim; per head, queries and keys
// of qk_nope_head_dim + qk_rope_head_dim, values of v_head_dim. kv_lora_rank 0: not MLA.
struct MlaDims {
  int64_t q_lora_rank = 0, kv_lora_rank = 0, qk_nope_head_dim = 0, qk_rope_head_dim = 0,
          v_head_dim = 0;
};

struct ModelConfig {
  std::string name, source, file;
  int64_t d_model = 0, layers = 0, q_heads = 0, kv_heads = 0, head_dim = 0, mlp_dim = 0, vocab = 0;
  bool swiglu = true;                   // false: GELU (one up projection)
  int64_t full_attention_interval = 0;  // 0: every layer is full attention
  GdnDims gdn;
  MoeDims moe;
  MlaDims mla;

  bool is_moe() const { return moe.experts > 0; }
  // A hybrid model runs MaxText's qwen3_next decoder, whose full-attention layers gate their
  // output: the query projection is twice as wide, a query and a gate per head, and the attention
  // output is multiplied by sigmoid(gate) before the output projection (MaxText 0.2.5
  // layers/attentions.py L680-681, L1266-1271, L1363). MaxText's FLOP count leaves the gate out.
  bool gated_attention() const { return full_attention_interval > 0; }
  // Columns of the query projection per query head: the query, and the gate if any.
  int64_t query_projection_dim() const { return qk_head_dim() * (gated_attention() ? 2 : 1); }
  bool is_mla() const { return mla.kv_lora_rank > 0; }
  // Per head: the queries' and keys' width, the values' (head_dim both unless MLA).
  int64_t qk_head_dim() const {
    return is_mla() ? mla.qk_nope_head_dim + mla.qk_rope_head_dim : head_dim;
  }
  int64_t v_head_dim() const { return is_mla() ? mla.v_head_dim : head_dim; }
  int64_t attention_params() const;  // the q, k, v and output projections (and MLA's norms)
  int64_t attention_layers() const;
  int64_t gdn_layers() const { return layers - attention_layers(); }
  // Trips of MaxText's scanned layer loop: one per layer, or per cycle of a hybrid decoder (each
  // cycle ends in its one full-attention layer).
  int64_t scanned_iterations() const {
    return attention_layers() > 0 ? attention_layers() : layers;
  }
  // Layers with experts (every layer but moe.dense_layers), 0 for a dense model.
  int64_t moe_layers() const { return is_moe() ? layers - moe.dense_layers : 0; }
  // The same model with a dense MLP in every layer: what its dense layers are.
  ModelConfig without_experts() const {
    ModelConfig m = *this;
    m.moe = {};
    return m;
  }
  int64_t attention_layer_params() const;  // attention + MLP (the experts' if any) + norms
  int64_t gdn_layer_params() const;        // GDN projections, conv, norms + MLP
  int64_t mlp_params() const;  // the dense MLP, or the router, every expert and the shared ones
  int64_t embedding_params() const;  // input embedding and output projection (untied)
  int64_t params() const;
};

std::vector<std::string> known_models();
// `name_or_path`: a model name in models/workloads/ or a YAML path.
ModelConfig load_model(const std::string& name_or_path);

}  // namespace tpusim
