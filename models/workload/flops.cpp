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
  // get_dense_moe_layers: the dense layers count the dense MLP (calculate_routed_and_shared_...).
  const double dense = static_cast<double>(m.moe.dense_layers);
  const double weights = ffn * (m.layers - dense) + mlp(m.mlp_dim) * dense + (qkv + proj) * La +
                         gdn_weights * Lg + embedding;
  return 3 * weights + 3 * (causal * La + gdn_core * Lg);
}

}  // namespace tpusim
