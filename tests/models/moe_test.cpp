// Mixtures of experts and the attention DeepSeek uses: MaxText's FLOP count and parameters by
// hand (Mixtral, Llama4 Maverick's dense layers, DeepSeek2's multi-head latent attention), and
// the expert-parallel collectives of each MoE path.
#include <gtest/gtest.h>

#include <map>

#include "models/chip_loader.h"
#include "models/memory/memory_model.h"
#include "models/parallel/collective_plan.h"
#include "models/workload/flops.h"
#include "models/workload/layers.h"
#include "models/workload/step.h"
#include "sim/timing/collectives.h"

namespace tpusim {
namespace {

// Mixtral-8x7B as MaxText counts it (maxtext_utils.py calculate_routed_and_shared_ffn_tflops_per
// _device): per layer at batch 1 x 4096 the router's gate 2 x 4096 x 4096 x 8 = 268,435,456 and
// two SwiGLU experts of 14336, 2 x 3 x 2 x 4096 x 14336 x 4096 = 2,886,218,022,912; the step
// (x 3, 32 layers, attention and logits as for a dense model) 326,503,413,841,920 FLOPs.
TEST(Moe, MaxTextCountsTheGateAndTopKExperts) {
  const ModelConfig m = load_model("mixtral-8x7b");
  ASSERT_TRUE(m.is_moe());
  EXPECT_EQ(m.mlp_params(), 4096 * 8 + 8 * 3 * int64_t{4096} * 14336);
  EXPECT_DOUBLE_EQ(maxtext_flops_per_device(m, 1, 4096), 326503413841920.0);
}

// `m` on a v5p slice of `chips` with `mesh`, one sequence of `seq` per chip.
StepConfig v5p_step(const ModelConfig& m, int64_t chips, Mesh mesh, int64_t seq) {
  StepConfig c;
  c.chip = load_chip("v5p");
  c.model = m;
  c.chips_per_slice = chips;
  c.mesh = mesh;
  c.seq = seq, c.batch_per_chip = 1;
  return c;
}

// Llama4 Maverick (MaxText's llama4-17b-128e.yml): every 2nd of its 48 layers has 128 experts of
// 8192 and a shared one, the other 24 the dense MLP of 16384 (get_dense_moe_layers). By hand: an
// MoE layer 5120 x 56 x 128 + 40 x 128 x 5120 + 5120 x 128 + 129 x 3 x 5120 x 8192 + 2 x 5120 =
// 16,295,536,640 parameters, a dense one 314,583,040, the model 400,711,848,960 with the
// embeddings; MaxText's count at 1 x 8192 tokens (calculate_routed_and_shared_ffn_tflops_per_device
// for the MLPs, Llama4's attention at a window of the whole sequence: causal)
// 892,746,533,437,440 FLOPs. The step runs both kinds of layer, 24 of each.
TEST(Moe, DenseLayersOfAMixtureOfExperts) {
  const ModelConfig m = load_model("llama4-maverick-17b-128e");
  EXPECT_EQ(m.moe_layers(), 24);
  EXPECT_EQ(m.attention_layer_params(), 16'295'536'640);
  EXPECT_EQ(m.without_experts().attention_layer_params(), 314'583'040);
  EXPECT_EQ(m.params(), 400'711'848'960);
  EXPECT_DOUBLE_EQ(maxtext_flops_per_device(m, 1, 8192), 892746533437440.0);

  const StepPrediction p = predict_step(v5p_step(m, 128, {1, 32, 4}, 8192));
  std::map<std::string, int64_t> count;
  for (const StepPart& part : p.parts) count[part.name] = part.count;
  EXPECT_EQ(count["attention layer"], 24);
  EXPECT_EQ(count["attention layer (dense MLP)"], 24);
}

// DeepSeek2-16B (MaxText's deepseek2-16b.yml): multi-head latent attention without a q latent
// (q_lora_rank 0): per layer wq 2048 x 16 x 192, wkv_a 2048 x (512 + 64), its norm 512, wkv_b
// 512 x 16 x (128 + 128), out 16 x 128 x 2048 = 13,763,072 parameters; with 64 experts of 1408
// and 2 shared (and the router) an MoE layer has 584,847,872, the first (dense, 10944) 81,007,104;
// the model 15,706,484,224. MaxText's count at 1 x 2048 tokens (calculate_mla_tflops_per_device:
// attention 2 x S^2 x H x (192 + 128) / 2 per layer) 31,861,141,143,552 FLOPs.
TEST(Moe, LatentAttentionAsMaxTextCountsIt) {
  const ModelConfig m = load_model("deepseek2-16b");
  ASSERT_TRUE(m.is_mla());
  EXPECT_EQ(m.qk_head_dim(), 192);
  EXPECT_EQ(m.v_head_dim(), 128);
  EXPECT_EQ(m.attention_params(), 13'763'072);
  EXPECT_EQ(m.attention_layer_params(), 584'847'872);
  EXPECT_EQ(m.without_experts().attention_layer_params(), 81'007'104);
  EXPECT_EQ(m.params(), 15'706'484'224);
  EXPECT_DOUBLE_EQ(maxtext_flops_per_device(m, 1, 2048), 31861141143552.0);
  // The step's attention kernel has 192-wide queries and keys and 128-wide values.
  const StepConfig c = v5p_step(m, 4, {1, 4, 1}, 2048);
  const kernels::AttentionShape a = attention_shape(c, c.local());
  EXPECT_EQ(a.head_dim, 192);
  EXPECT_EQ(a.v_dim(), 128);
  EXPECT_EQ(a.kv_heads, 16);
  EXPECT_GT(predict_step(c).step_time_s, 0);
}

// Offloaded queries and keys of 192 lanes take 256 in HBM and on the host, as XLA tiles them (B5
// #33's compiled step: bf16[58,6,128,8192,192] in a 186,831,077,376-byte buffer). DeepSeek2-16B on
// 4 v5p chips (fsdp 4), 2048 tokens a chip, q and k offloaded: 2048 x 16 heads x 256 x 2 bytes
// each, 33,554,432 bytes a layer (unpadded it would be 25,165,824).
TEST(Moe, OffloadedLatentQueriesAndKeysArePaddedToWholeLanes) {
  StepConfig c = v5p_step(load_model("deepseek2-16b"), 4, {1, 4, 1}, 2048);
  c.remat = RematPolicy::named("full");
  c.remat.set(Activation::query_proj, "offload");
  c.remat.set(Activation::key_proj, "offload");
  ASSERT_EQ(c.remat[Activation::decoder_layer_input], Placement::device);  // not offloaded
  EXPECT_EQ(offloaded_bytes_per_layer(c, c.local(), true), 2 * 2048 * 16 * 256 * 2);
}

// Mixtral-8x7B on 16 v6e chips, 1 x 4096 tokens per chip, fsdp 4 x expert 4.
StepConfig mixtral_ep(bool sparse_matmul, int64_t expert) {
  StepConfig c;
  c.chip = load_chip("v6e");
  c.model = load_model("mixtral-8x7b");
  c.chips_per_slice = 16;
  c.mesh.fsdp = 16 / expert, c.mesh.expert = expert;
  c.seq = 4096, c.batch_per_chip = 1;
  c.moe_sparse_matmul = sparse_matmul;
  c.capacity_factor = sparse_matmul ? -1 : 1.25;
  return c;
}

// On megablox's path the token copies go to their experts and back by all-to-all in the forward,
// the recompute and the backward: 4096 tokens x top-2 x 4096 x 2 bytes = 67,108,864 bytes each,
// exposed; the layer's weight collectives hide behind a second of compute. The dense einsum path
// moves no tokens (the compiled step: no all-to-all in its layer loop) and gathers the experts'
// weights like fsdp over the same 16 chips.
TEST(Moe, ExpertParallelCollectivesByPath) {
  const int64_t params = load_model("mixtral-8x7b").mlp_params();
  const StepConfig sparse = mixtral_ep(true, 4);
  const double a2a = collective_seconds(
      sparse.chip, {CollectiveKind::all_to_all, 67'108'864, sparse.axis("expert", 4, false)});
  const CollectiveTime s = layer_collectives(sparse, params, PartKind::attention_layer, 1, 1, true);
  EXPECT_DOUBLE_EQ(s.exposed_s, 6 * a2a);
  const CollectiveTime dense =
      layer_collectives(mixtral_ep(false, 4), params, PartKind::attention_layer, 1, 1, true);
  const CollectiveTime fsdp =
      layer_collectives(mixtral_ep(false, 1), params, PartKind::attention_layer, 1, 1, true);
  EXPECT_EQ(dense.exposed_s, 0);
  // The same collectives as plain fsdp over 16 chips, but for how the gradient is reduced (a
  // pure-FSDP mesh all-reduces it in bf16, this one reduce-scatters it in f32).
  const StepConfig plain = mixtral_ep(false, 1);
  const MeshAxis sixteen = plain.axis("fsdp", 16, false);
  const double grad_rs =
      collective_seconds(plain.chip, {CollectiveKind::reduce_scatter, params * 4, sixteen});
  const double grad_ar =
      collective_seconds(plain.chip, {CollectiveKind::all_reduce, params * 2, sixteen});
  EXPECT_NEAR(dense.total_s, fsdp.total_s - grad_ar + grad_rs, 1e-12);
  EXPECT_GT(dense.total_s, s.total_s - 6 * a2a);  // every expert gathered, not a quarter of them
}

// With tensor parallelism over 2 chips the pair's two sequences of 4096 tokens run together. On
// megablox's path the down projection reduce-scatters the token copies (8192 tokens x top-2 rows,
// moe.py L3218-3223, as the compiled step does) and its backward all-gathers their gradient,
// while the MLP's input is gathered on the 8192 token rows: each MLP pair costs (1 + 2) / 2
// all-reduces of [8192, 4096] bf16 = 67,108,864 bytes. Under remat full the layer runs 2 + 1
// attention pairs (forward, backward, the recomputed output projection) and 2 + 1 MLP pairs:
// 3 + 3 x 1.5 = 7.5 all-reduces, exposed; the dense einsum path 6.
TEST(Moe, TensorParallelMegabloxReduceScattersTheTokenCopies) {
  auto tensor_parallel = [](bool sparse_matmul) {
    StepConfig c = mixtral_ep(sparse_matmul, 1);
    c.mesh.fsdp = 8, c.mesh.tensor = 2;
    return c;
  };
  const StepConfig sparse = tensor_parallel(true);
  const double ar = collective_seconds(
      sparse.chip, {CollectiveKind::all_reduce, 67'108'864, sparse.axis("tensor", 2, true)});
  const int64_t params = load_model("mixtral-8x7b").mlp_params();
  // Compute long enough to hide the FSDP weight collectives: what is exposed is the tensor axis'.
  const double compute_s = 10;
  const CollectiveTime s =
      layer_collectives(sparse, params, PartKind::attention_layer, compute_s, compute_s, true);
  const CollectiveTime d = layer_collectives(tensor_parallel(false), params,
                                             PartKind::attention_layer, compute_s, compute_s, true);
  EXPECT_NEAR(s.exposed_s, 7.5 * ar, 1e-12);
  EXPECT_NEAR(d.exposed_s, 6 * ar, 1e-12);
}

}  // namespace
}  // namespace tpusim
