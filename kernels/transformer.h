// The non-GDN kernels of a training step, as schedules:
//  - flash attention as MaxText runs it on TPU (JAX's Pallas splash attention, xla_lowering.md
//    4.1): forward, and the backward's dkv and dq kernels; causal blocks above the diagonal are
//    skipped (their steps re-use the diagonal block's index, so they move no data and do no work),
//    and only diagonal blocks apply the mask. GQA: grid over kv heads, then the query heads of
//    each group.
//  - XLA fusions around the matmuls (the matmuls themselves are kernels::xla_dot): RMSNorm, RoPE,
//    SwiGLU / GELU, residual adds, the depthwise causal conv, softmax cross-entropy, AdamW.
// Token-major activations are [M, cols] with M = batch x sequence tokens per device.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "sim/ir/kernel.h"

namespace tpusim::kernels {

struct AttentionShape {
  // head_dim: of the queries and keys; head_dim_v: of the values and the output when they differ
  // (multi-head latent attention: 192 against 128; splash's head_dim_v), 0: head_dim.
  int64_t batch = 1, seq = 4096, q_heads = 32, kv_heads = 8, head_dim = 128;
  int64_t block = 512;          // block_q = block_kv (splash default 512, MaxText's sa_block_*)
  int64_t block_compute = 512;  // sa_block_kv_compute: the kv sub-block of each softmax update
  bool causal = true;
  DType dtype = DType::bf16;
  // Keys and values per sequence when they differ from the queries' (context parallelism: the
  // local queries against the gathered keys); 0: seq. Only without the causal mask.
  int64_t kv_seq = 0;
  int64_t head_dim_v = 0;
  int64_t kv_len() const { return kv_seq > 0 ? kv_seq : seq; }
  int64_t v_dim() const { return head_dim_v > 0 ? head_dim_v : head_dim; }
};

std::shared_ptr<const Kernel> attention_forward(const AttentionShape& s);
std::shared_ptr<const Kernel> attention_backward_dkv(const AttentionShape& s);
std::shared_ptr<const Kernel> attention_backward_dq(const AttentionShape& s);

// An XLA elementwise fusion over [rows, cols] token-major data, in blocks of rows.
enum class Fusion {
  rmsnorm,  // y = x * rsqrt(mean(x^2) + eps) * scale
  rmsnorm_bwd,
  rope,    // rotary embedding of q or k
  swiglu,  // silu(gate) * up, from a fused [rows, 2 cols] input
  swiglu_bwd,
  sigmoid_gate,  // out * sigmoid(gate): Qwen3-Next's gated attention output
  sigmoid_gate_bwd,
  gelu,
  gelu_bwd,
  residual_add,
  causal_conv,  // depthwise, kernel 4, then SiLU (GDN q, k, v)
  causal_conv_bwd,
  gdn_gates,      // beta = sigmoid(b), g = -exp(A_log) softplus(a + dt_bias)
  gated_rmsnorm,  // GDN output norm: rmsnorm(o) * silu(z)
  gated_rmsnorm_bwd,
  cross_entropy,  // softmax cross-entropy over the vocabulary, forward and its gradient
  adamw,          // one AdamW step on f32 parameters, gradients and moments
  quantize,       // AQT int8: per-row scale = 127 / max|x|, round, cast to int8 (and the scales)
  // The same with stochastic rounding (a gradient operand, AQT's "jax.uniform" noise): uniform
  // noise from the core's random-bit generator added before rounding. Functionally the noise is
  // zero (rounding to nearest); its timing is the generator's pass and the add.
  quantize_stochastic,
};
std::string name(Fusion f);

std::shared_ptr<const Kernel> xla_fusion(Fusion f, int64_t rows, int64_t cols,
                                         DType dtype = DType::bf16);

}  // namespace tpusim::kernels
