#include "models/workload/flops.h"

namespace tpusim {

double maxtext_flops_per_device(const ModelConfig& m, int64_t b, int64_t s, AttentionCount count) {
  const double B = static_cast<double>(b), S = static_cast<double>(s),
               E = static_cast<double>(m.d_model);
  // One SwiGLU/GELU MLP of width w; an MoE layer adds its router's gate and runs top_k routed
  // and every shared expert (maxtext_utils.py calculate_routed_and_shared_ffn_tflops_per_device).
  auto mlp = [&](double w) { return 2 * B * S * w * E * (m.swiglu ? 2 : 1) + 2 * B * S * w * E; };
  const double ffn =
      m.is_moe() ? 2 * B * S * E * m.moe.experts + mlp(m.moe.mlp_dim) * (m.moe.top_k + m.moe.shared)
                 : mlp(m.mlp_dim);
  // Multi-head latent attention as calculate_mla_tflops_per_device counts it (maxtext_utils.py
  // L656-706): the q down and up projections (or the one), the kv down and up projections.
  const MlaDims& a = m.mla;
  const double H = static_cast<double>(m.q_heads);
  const double qk = static_cast<double>(m.qk_head_dim()), v = static_cast<double>(m.v_head_dim());
  const double qkv =
      !m.is_mla()
          ? 2 * B * S * E * (m.q_heads + 2 * m.kv_heads) * m.head_dim
          : (a.q_lora_rank == 0 ? 2 * B * S * E * H * qk
                                : 2 * B * S * (E * a.q_lora_rank + a.q_lora_rank * H * qk)) +
                2 * B * S *
                    (E * (a.kv_lora_rank + a.qk_rope_head_dim) +
                     a.kv_lora_rank * H * (a.qk_nope_head_dim + a.v_head_dim));
  const double proj = 2 * B * S * E * H * v;
  const double causal = 2 * B * S * S * H * (qk + v) / (count == AttentionCount::causal ? 2 : 1);
  const double embedding = 2 * B * S * E * m.vocab;
  const double K = static_cast<double>(m.gdn.key_heads * m.gdn.head_dim),
               V = static_cast<double>(m.gdn.value_heads * m.gdn.head_dim);
  const double gdn_weights = 2 * B * S * E * (2 * K + 2 * V + 2 * m.gdn.value_heads) +
                             2 * B * S * E * V + 2 * B * S * m.gdn.conv_kernel * (2 * K + V);
  const double gdn_core = 8.0 * m.gdn.value_heads * m.gdn.head_dim * m.gdn.head_dim * B * S;
  const double La = static_cast<double>(m.attention_layers()),
               Lg = static_cast<double>(m.gdn_layers());
  // get_dense_moe_layers: the dense layers count the dense MLP (calculate_routed_and_shared_...).
  const double dense = static_cast<double>(m.moe.dense_layers);
  const double weights = ffn * (m.layers - dense) + mlp(m.mlp_dim) * dense + (qkv + proj) * La +
                         gdn_weights * Lg + embedding;
  return 3 * weights + 3 * (causal * La + gdn_core * Lg);
}

}  // namespace tpusim
