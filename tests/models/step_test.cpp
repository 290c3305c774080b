// The whole-step model's pieces against hand-computed values.
#include "models/workload/step.h"

#include <gtest/gtest.h>

#include <map>

#include "kernels/gdn/layer.h"
#include "models/chip_loader.h"
#include "models/parallel/collective_plan.h"
#include "models/workload/layers.h"
#include "sim/error.h"
#include "sim/timing/collectives.h"
#include "sim/timing/engine.h"

namespace tpusim {
namespace {

TEST(Flops, MaxTextCountForADenseModelMatchesTheClosedForm) {
  ModelConfig m;
  m.d_model = 1024, m.layers = 2, m.q_heads = 8, m.kv_heads = 2, m.head_dim = 128, m.mlp_dim = 4096,
  m.vocab = 1000;
  const double B = 2, S = 512, E = 1024;
  const double ffn = 2 * B * S * 4096 * E * 2 + 2 * B * S * 4096 * E;
  const double qkv = 2 * B * S * E * (8 + 4) * 128, proj = 2 * B * S * E * 8 * 128;
  const double attn = 4 * B * S * S * 8 * 128 / 2, emb = 2 * B * S * E * 1000;
  EXPECT_DOUBLE_EQ(maxtext_flops_per_device(m, 2, 512),
                   3 * (2 * (ffn + qkv + proj) + emb) + 3 * 2 * attn);
}

TEST(Flops, GdnLayersCountEightHvDkDvPerToken) {
  ModelConfig m = load_model("qwen3-next-dense-8b");
  EXPECT_EQ(m.attention_layers(), 9);
  EXPECT_EQ(m.gdn_layers(), 27);
  ModelConfig dense = m;
  dense.full_attention_interval = 0;
  // Replacing the 27 GDN layers by attention layers changes the count by exactly their difference.
  const double B = 1, S = 4096, E = 4096, K = 16 * 128, V = 32 * 128;
  const double gdn = 2 * B * S * E * (2 * K + 2 * V + 64) + 2 * B * S * E * V +
                     2 * B * S * 4 * (2 * K + V) + 8 * 32 * 128 * 128 * B * S;
  const double attn =
      2 * B * S * E * (32 + 16) * 128 + 2 * B * S * E * 32 * 128 + 4 * B * S * S * 32 * 128 / 2;
  EXPECT_NEAR(maxtext_flops_per_device(dense, 1, 4096) - maxtext_flops_per_device(m, 1, 4096),
              3 * 27 * (attn - gdn), 1e3);
}

TEST(Collectives, RingCostsByHand) {
  // The ring formulas at full link efficiency and 1 us per hop (the book's assumptions); the
  // calibrated values are checked by tests/app/calibration_test.cpp.
  ChipSpec v5e = load_chip("v5e");
  v5e.ici_efficiency = 1;
  v5e.ici_hop_latency_s = 1e-6;
  // Scaling book pop quiz: AllGather of 34 MB over a 4-chip axis without wraparound:
  // 3/4 x 34e6 / 4.5e10 = 566.7 us, plus 3 hops of 1 us.
  const MeshAxis line{"y", 4, false, 1, false};
  EXPECT_NEAR(collective_seconds(v5e, {CollectiveKind::all_gather, 34'000'000, line}),
              566.667e-6 + 3e-6, 1e-9);
  // With wraparound the ring sends both ways: half the time, and n/2 hops.
  const MeshAxis ring{"x", 16, true, 1, false};
  EXPECT_NEAR(collective_seconds(v5e, {CollectiveKind::reduce_scatter, 16'000'000, ring}),
              15.0 / 16 * 16e6 / 9e10 + 8e-6, 1e-9);
  // Over both dimensions of a 16 x 16 torus: four links, 2 x 8 hops.
  const MeshAxis torus{"fsdp", 256, true, 2, false};
  EXPECT_NEAR(collective_seconds(v5e, {CollectiveKind::all_gather, 1'000'000'000, torus}),
              255.0 / 256 * 1e9 / (4 * 4.5e10) + 16e-6, 1e-9);
  // All-reduce = reduce-scatter + all-gather; DCN uses the per-chip DCN bandwidth.
  EXPECT_NEAR(collective_seconds(v5e, {CollectiveKind::all_reduce, 34'000'000, line}),
              2 * (566.667e-6 + 3e-6), 1e-9);
  // The achieved link efficiency stretches the bandwidth term only; DCN does not use it.
  ChipSpec slow = v5e;
  slow.ici_efficiency = 0.5;
  EXPECT_NEAR(collective_seconds(slow, {CollectiveKind::all_gather, 34'000'000, line}),
              2 * 566.667e-6 + 3e-6, 1e-9);
  // All-to-all over a 4-chip ring: 3/4 of the bytes, each share crossing 16 / (4 x 3) = 4/3
  // links on average, both directions busy; 2 hops of latency.
  const MeshAxis ring4{"expert", 4, true, 1, false};
  EXPECT_NEAR(collective_seconds(v5e, {CollectiveKind::all_to_all, 9'000'000, ring4}),
              0.75 * 9e6 * 4.0 / 3 / 9e10 + 2e-6, 1e-12);
  // DCN: the per-chip DCN bandwidth, and the slices' latency once per step of a ring over the
  // 4 slices (6 for an all-reduce, 3 for a gather), which does not hold the links.
  const MeshAxis dcn{"data", 4, false, 1, true};
  const double slice_latency = v5e.dcn_slice_latency_s;
  ASSERT_GT(slice_latency, 0);
  EXPECT_NEAR(collective_seconds(v5e, {CollectiveKind::all_reduce, 1'000'000, dcn}),
              2 * 0.75 * 1e6 / 3.125e9 + 6 * slice_latency, 1e-12);
  EXPECT_NEAR(collective_latency_seconds(v5e, {CollectiveKind::all_reduce, 1'000'000, dcn}),
              6 * slice_latency, 1e-15);
  EXPECT_NEAR(collective_latency_seconds(v5e, {CollectiveKind::all_gather, 1'000'000, dcn}),
              3 * slice_latency, 1e-15);
  EXPECT_EQ(collective_latency_seconds(v5e, {CollectiveKind::all_gather, 1'000'000, line}), 0);
  // A copy to or from host memory: its bytes over the host link (v5e: ~1.5e10 B/s).
  EXPECT_NEAR(collective_seconds(v5e, {CollectiveKind::permute, 3'000'000, host_link()}),
              3e6 / 1.5e10, 1e-15);
  EXPECT_EQ(collective_seconds(slow, {CollectiveKind::all_reduce, 1'000'000, dcn}),
            collective_seconds(v5e, {CollectiveKind::all_reduce, 1'000'000, dcn}));
}

// A 4-layer model (d 1024, 8 heads of 128, MLP 4096, vocab 32768) on 8 v5e chips, FSDP, 2 x 1024
// tokens per chip, remat full.
StepConfig tiny_step(int64_t kv_heads) {
  StepConfig c;
  c.chip = load_chip("v5e");
  c.model.name = "tiny";
  c.model.d_model = 1024, c.model.layers = 4, c.model.q_heads = 8, c.model.kv_heads = kv_heads,
  c.model.head_dim = 128;
  c.model.mlp_dim = 4096, c.model.vocab = 32768;
  c.chips_per_slice = 8;
  c.mesh = {1, 8, 1};
  c.seq = 1024, c.batch_per_chip = 2;
  return c;
}

// Over 2 slices the gradients are all-reduced over DCN as the compiled multi-slice step does it:
// one layer's FSDP shard at a time in bf16 (1024 x 24 x 128 + 8 x 128 x 1024 + 3 x 1024 x 4096 +
// 2 x 1024 parameters over 8 chips), hidden behind the next layer's backward, the last layer's
// and the embedding's (2 x 32768 x 1024 + the final norm's 1024) after the loop, sent together so
// that the slices' latency is paid once there.
TEST(Step, TheDcnGradientAllReduceIsPipelinedPerLayer) {
  StepConfig c = tiny_step(8);
  c.mesh.data = 2;
  const MeshAxis slices{"data", 2, false, 1, true};
  const int64_t layer = 1024 * 24 * 128 + 8 * 128 * 1024 + 3 * 1024 * 4096 + 2 * 1024;
  const Collective per_layer{CollectiveKind::all_reduce, 2 * layer / 8, slices};
  const Collective embedding{CollectiveKind::all_reduce, 2 * (2 * 32768 * 1024 + 1024) / 8, slices};
  auto dcn_part = [](const StepPrediction& p) {
    const StepPart& dcn = p.parts.at(p.parts.size() - 2);
    EXPECT_EQ(dcn.name, "data-parallel gradient all-reduce (DCN)");
    return dcn;
  };
  // Without the slices' latency each layer's reduction (its bytes over the DCN bandwidth) hides.
  c.chip.dcn_slice_latency_s = 0;
  const StepPrediction hidden = predict_step(c);
  const double layer_links = 2 * 0.5 * (2 * layer / 8) / c.chip.dcn_bytes_per_s_per_chip;
  const double embedding_links = 2 * 0.5 * embedding.bytes / c.chip.dcn_bytes_per_s_per_chip;
  ASSERT_GT(hidden.parts.at(0).backward_s, layer_links);
  EXPECT_NEAR(dcn_part(hidden).collective_s, 4 * layer_links + embedding_links, 1e-12);
  EXPECT_NEAR(dcn_part(hidden).exposed_s, layer_links + embedding_links, 1e-12);
  // With a latency longer than a layer's backward, 2 ring steps of it per reduction: each of the
  // first 3 layers' reductions shows what its layer's backward does not hide.
  c.chip.dcn_slice_latency_s = 0.05;
  const StepPrediction slow = predict_step(c);
  const double layer_backward = slow.parts.at(0).backward_s;
  const double per_layer_s = layer_links + 2 * 0.05;
  ASSERT_GT(per_layer_s, layer_backward);
  EXPECT_NEAR(collective_seconds(c.chip, per_layer), per_layer_s, 1e-12);
  EXPECT_NEAR(collective_seconds(c.chip, embedding), embedding_links + 2 * 0.05, 1e-12);
  EXPECT_NEAR(dcn_part(slow).collective_s, 4 * per_layer_s + embedding_links, 1e-12);
  EXPECT_NEAR(dcn_part(slow).exposed_s,
              3 * (per_layer_s - layer_backward) + per_layer_s + embedding_links, 1e-12);
}

// The remat offload over the host link: an attention layer sends its offloaded q (2048 tokens x
// 8 heads x 128, bf16: 4 MiB) to host memory in the forward and reads it back in the backward,
// each hidden behind that pass's compute; a GDN layer names no q. The layer input, offloaded, is
// 2048 x 1024 bf16 more for either kind.
TEST(Step, TheRematOffloadHidesBehindEachPassOverTheHostLink) {
  StepConfig c = tiny_step(8);
  c.remat.set(Activation::query_proj, "offload");
  c.chip.host_link_bytes_per_s = 1e9;
  const double q = 2048.0 * 8 * 128 * 2 / 1e9;
  CollectiveTime t = host_offload(c, PartKind::attention_layer, 1.0, 1.0);
  EXPECT_NEAR(t.total_s, 2 * q, 1e-15);
  EXPECT_EQ(t.exposed_s, 0);
  t = host_offload(c, PartKind::attention_layer, 0.001, 0.003);
  EXPECT_NEAR(t.exposed_s, (q - 0.001) + (q - 0.003), 1e-15);
  EXPECT_EQ(host_offload(c, PartKind::gdn_layer, 0.001, 0.003).total_s, 0);
  c.remat.set(Activation::decoder_layer_input, "offload");
  const double input = 2048.0 * 1024 * 2 / 1e9;
  EXPECT_NEAR(host_offload(c, PartKind::gdn_layer, 1, 1).total_s, 2 * input, 1e-15);
  EXPECT_NEAR(host_offload(c, PartKind::attention_layer, 1, 1).total_s, 2 * (q + input), 1e-15);
  // In the step: the attention layer's exposed time grows by what its passes do not hide.
  c.chip.host_link_bytes_per_s = 1e6;  // slow enough to show
  const StepPart slow = predict_step(c).parts.at(0);
  c.remat.set(Activation::query_proj, "remat");
  c.remat.set(Activation::decoder_layer_input, "device");
  const StepPart none = predict_step(c).parts.at(0);
  const double each = (2048.0 * 8 * 128 * 2 + 2048.0 * 1024 * 2) / 1e6;
  EXPECT_NEAR(slow.exposed_s - none.exposed_s, (each - slow.forward_s) + (each - slow.backward_s),
              1e-9);
}

// On a pure-FSDP mesh the compiled step all-reduces each layer's bf16 gradient synchronously in
// the backward loop (C3 #41, C5 #14 compiled with their runs' flags): exposed whatever compute
// surrounds it, while the weight gathers hide behind a second of compute. With tensor
// parallelism the gradient reduction hides as before.
TEST(Step, APureFsdpStepExposesItsGradientAllReduce) {
  StepConfig c = tiny_step(8);
  const int64_t layer = 1024 * 24 * 128 + 8 * 128 * 1024 + 3 * 1024 * 4096 + 2 * 1024;
  const MeshAxis fsdp = c.axis("fsdp", 8, false);
  MeshAxis ring = fsdp;  // asynchronous gathers go round one ring
  ring.torus_dims = 1;
  const double ar = collective_seconds(c.chip, {CollectiveKind::all_reduce, 2 * layer, fsdp});
  const double ag = collective_seconds(c.chip, {CollectiveKind::all_gather, 2 * layer, ring});
  ASSERT_TRUE(synchronous_gradient_reduction(c));
  const CollectiveTime t = layer_collectives(c, layer, PartKind::attention_layer, 1, 1, true);
  EXPECT_DOUBLE_EQ(t.exposed_s, ar);
  EXPECT_DOUBLE_EQ(t.total_s, 2 * ag + ar);
  c.mesh = {1, 4, 2};
  ASSERT_FALSE(synchronous_gradient_reduction(c));
  const CollectiveTime tp = layer_collectives(c, layer, PartKind::attention_layer, 1, 1, true);
  const double tp_all_reduce = collective_seconds(
      c.chip, {CollectiveKind::all_reduce, c.local().tokens * 1024 * 2, c.axis("tensor", 2, true)});
  // The gradient hides; the activations' all-reduces: 2 in the forward, 2 in the backward, 1 in
  // the recompute (the attention's output projection; the MLP's down projection is not rerun).
  EXPECT_NEAR(tp.exposed_s, 5 * tp_all_reduce, 1e-15);
  c.remat.set(Activation::out_proj, "device");
  const CollectiveTime saved = layer_collectives(c, layer, PartKind::attention_layer, 1, 1, true);
  EXPECT_NEAR(saved.exposed_s, 4 * tp_all_reduce, 1e-15);
}

// The forward's FSDP gathers run one at a time, scheduled bottom-up as in the compiled layer
// bodies: the last weight's gather ends at its read, each earlier one by its own read or the start
// of the next. Asynchronous gathers go round one ring; in an attention layer the first (with the
// parameters no op reads as a weight), and any the chain pushes wholly above the body's top, are
// synchronous, which v5e routes over both torus dimensions. A GDN layer's chain may reach back
// into the layer before it by the compute after its last read.
TEST(Step, TheForwardGathersAreScheduledBottomUp) {
  StepConfig c = tiny_step(8);
  ASSERT_TRUE(c.chip.routed_weight_gathers);  // v5e
  const int64_t q = 1024 * 1024, k = 1024 * 1024, mlp = 1024 * 2 * 4096, norms = 2 * 1024;
  const int64_t params = q + k + mlp + norms;
  const MeshAxis fsdp = c.axis("fsdp", 8, false);
  MeshAxis ring = fsdp;
  ring.torus_dims = 1;
  auto gather = [&](int64_t elements, const MeshAxis& axis) {
    return collective_seconds(c.chip, {CollectiveKind::all_gather, 2 * elements, axis});
  };
  ASSERT_GT(gather(q, ring), gather(q, fsdp));  // the ring is the slower
  const double ar = collective_seconds(c.chip, {CollectiveKind::all_reduce, 2 * params, fsdp});
  const double g_q = gather(q + norms, ring), g_k = gather(k, ring), g_mlp = gather(mlp, ring);
  auto exposed = [&](PartKind kind, const std::vector<ForwardWeight>& weights) {
    return layer_collectives(c, params, kind, 10, 10, true, weights).exposed_s - ar;
  };
  // The MLP's gather needs twice the key's stretch: it starts g_mlp / 2 before the key's read and
  // the key's gather ends there; both still fit below the query's read, whose synchronous gather
  // is all that shows (top-down, the MLP's gather would show half).
  EXPECT_NEAR(exposed(PartKind::attention_layer, {{q, 1.0}, {k, g_mlp / 2}, {mlp, 1.0}}),
              gather(q + norms, fsdp), 1e-15);
  // With the query's stretch g_k / 2, the key's gather is pushed wholly above the top: the query
  // and the key go synchronously, the MLP's start sticks out by g_mlp / 2 - g_k / 2.
  const std::vector<ForwardWeight> tight = {{q, g_k / 2}, {k, g_mlp / 2}, {mlp, g_q / 2}};
  EXPECT_NEAR(exposed(PartKind::attention_layer, tight),
              gather(q + norms, fsdp) + gather(k, fsdp) + g_mlp / 2 - g_k / 2, 1e-15);
  // A GDN layer's chain is all asynchronous and reaches g_q / 2 into the layer before.
  EXPECT_NEAR(exposed(PartKind::gdn_layer, tight), g_q / 2 + g_k / 2 + g_mlp / 2, 1e-15);
  EXPECT_DOUBLE_EQ(exposed(PartKind::gdn_layer, {{q, 1.0}, {k, g_mlp / 2}, {mlp, 1.0}}), 0);
  // Without the reads (the embedding's part) the gathers hide behind the whole forward.
  EXPECT_DOUBLE_EQ(layer_collectives(c, params, PartKind::attention_layer, 10, 10, true).exposed_s,
                   ar);
}

// Every weight a layer's forward reads is one the chain gathers: the reads cover the layer's
// parameters on this chip's tensor shard but its norm scales, conv kernel and gate constants
// (within 1%), for models of every kind the workloads define, and name q, k and v (or the fused
// qkv) first.
TEST(Layers, TheForwardsWeightReadsCoverTheLayersParameters) {
  for (const char* name : {"llama2-70b", "gpt3-175b", "qwen3-next-dense-8b", "mixtral-8x7b",
                           "deepseek3-671b", "llama4-maverick-17b-128e", "maxtext-128b"}) {
    SCOPED_TRACE(name);
    StepConfig c = tiny_step(8);
    c.model = load_model(name);
    c.mesh = {1, 4, 2};
    c.chips_per_slice = 8;
    const LocalSizes l = c.local();
    auto covered = [&](const LayerPrograms& p, int64_t params) {
      int64_t read = 0;
      for (const WeightRead& r : p.forward_weights) {
        EXPECT_TRUE(is_forward_stage(p.program.items.at(r.item).stage));
        read += r.elements;
      }
      // (An MoE router's weight is not split over the tensor axis: read whole, a little over.)
      EXPECT_NEAR(static_cast<double>(read), static_cast<double>(params / c.mesh.tensor),
                  0.01 * params / c.mesh.tensor);
    };
    if (c.model.attention_layers() > c.model.moe.dense_layers)
      covered(attention_layer(c, l), c.model.attention_layer_params());
    if (c.model.gdn_layers() > 0) covered(gdn_layer(c, l), c.model.gdn_layer_params());
    c.fused_qkv = c.fused_mlp = true;
    if (!c.model.is_mla() && c.model.attention_layers() > 0) {
      const LayerPrograms fused = attention_layer(c, l);
      EXPECT_EQ(fused.forward_weights.front().elements,
                c.model.d_model * (l.q_heads * c.model.query_projection_dim() +
                                   2 * l.kv_heads * c.model.head_dim));
    }
  }
}

// A hybrid model's full attention is MaxText's qwen3_next attention: one projection gives each
// query head a query and a gate (2 x 32 x 128 columns for C1's model), the attention output is
// multiplied by sigmoid(gate) in the forward and the recompute, its backward runs once. (MaxText's
// FLOP count leaves the gate out: Flops.GdnLayersCountEightHvDkDvPerToken counts 32 + 16 heads.)
TEST(Layers, AHybridModelsAttentionGatesItsOutput) {
  StepConfig c = tiny_step(8);
  c.model = load_model("qwen3-next-dense-8b");
  const int64_t E = 4096, H = 32, KV = 8, D = 128;
  ASSERT_TRUE(c.model.gated_attention());
  EXPECT_EQ(c.model.attention_params(), E * 2 * H * D + E * 2 * KV * D + H * D * E);
  const LayerPrograms p = attention_layer(c, c.local());
  EXPECT_EQ(p.forward_weights.front().elements, E * 2 * H * D);
  int forward = 0, recompute = 0, backward = 0;
  for (const ProgramItem& item : p.program.items) {
    if (item.name.find("sigmoid gate bwd") != std::string::npos)
      ++backward;
    else if (item.name.find("sigmoid gate") != std::string::npos)
      ++(is_forward_stage(item.stage) ? forward : recompute);
  }
  EXPECT_EQ(forward, 1);
  EXPECT_EQ(recompute, 1);
  EXPECT_EQ(backward, 1);
}

// The embedding and logits as the compiled FSDP steps run them: the lookup and its gradient's
// scatter-add are all-to-alls of the chip's token rows (2 x 1024 tokens x 1024 x 2 B), the output
// projection (32768 x 1024 bf16) is gathered once and its gradient all-reduced on a pure-FSDP
// mesh; the embedding table is neither gathered nor reduced. All of it exposed, the gather round
// one ring.
TEST(Step, TheEmbeddingIsLookedUpByAllToAll) {
  const StepConfig c = tiny_step(8);
  const MeshAxis fsdp = c.axis("fsdp", 8, false);
  MeshAxis ring = fsdp;  // the projection's gather has a 1-D emitter in every compiled step
  ring.torus_dims = 1;
  const int64_t rows = 2 * 1024 * 1024 * 2, projection = 32768 * 1024 * 2;
  const double expected =
      2 * collective_seconds(c.chip, {CollectiveKind::all_to_all, rows, fsdp}) +
      collective_seconds(c.chip, {CollectiveKind::all_gather, projection, ring}) +
      collective_seconds(c.chip, {CollectiveKind::all_reduce, projection, fsdp});
  const CollectiveTime t =
      layer_collectives(c, c.model.embedding_params(), PartKind::embedding, 1, 1, true);
  EXPECT_DOUBLE_EQ(t.total_s, expected);
  EXPECT_DOUBLE_EQ(t.exposed_s, expected);
}

// A backward that cannot hold the next layer's prefetched weights (but can hold the running
// layer's) gathers synchronously, as the compiled C5 #14 step does over HBM: the peak loses one
// layer of bf16 weights, and each backward gather is exposed. On a chip whose synchronous gathers
// go round one ring (v6e's, v5p's 1-D emitters), as the asynchronous ones everywhere: 7/8 of the
// bytes over one link (8 chips form a line, no wraparound), 7 hops; v5e routes them over both
// torus dimensions. A chip too small for either keeps the prefetch and does not fit.
TEST(Step, ABackwardWithoutRoomToPrefetchGathersSynchronously) {
  StepConfig c = tiny_step(8);
  c.vocab_tiles = 16;  // so a layer's backward, not the logits, is the peak
  const int64_t layer = 1024 * 24 * 128 + 8 * 128 * 1024 + 3 * 1024 * 4096 + 2 * 1024;
  const StepPrediction roomy = predict_memory(c);
  ASSERT_TRUE(roomy.backward_gathers_prefetched);
  c.chip.hbm_bytes = roomy.peak_hbm_bytes - 1;
  const StepPrediction tight = predict_memory(c);
  EXPECT_FALSE(tight.backward_gathers_prefetched);
  EXPECT_EQ(tight.peak_hbm_bytes, roomy.peak_hbm_bytes - 2 * layer);
  EXPECT_TRUE(tight.fits_hbm);
  EXPECT_NE(tight.memory.back().what.find("gathers synchronous"), std::string::npos);

  const MeshAxis fsdp = c.axis("fsdp", 8, false);
  ASSERT_FALSE(fsdp.wraparound);
  const double ring_ag =
      7.0 / 8 * 2 * layer / (c.chip.ici_efficiency * c.chip.ici_link_bytes_per_s) +
      7 * c.chip.ici_hop_latency_s;
  const double ar = collective_seconds(c.chip, {CollectiveKind::all_reduce, 2 * layer, fsdp});
  const double routed_ag =
      collective_seconds(c.chip, {CollectiveKind::all_gather, 2 * layer, fsdp});
  ASSERT_LT(routed_ag, ring_ag);
  const CollectiveTime routed = layer_collectives(c, layer, PartKind::attention_layer, 1, 1, false);
  EXPECT_NEAR(routed.exposed_s, ar + routed_ag, 1e-12);  // the forward's gather still hides
  EXPECT_NEAR(routed.total_s, ring_ag + routed_ag + ar, 1e-12);
  StepConfig ring = c;
  ring.chip.routed_weight_gathers = false;
  const CollectiveTime t = layer_collectives(ring, layer, PartKind::attention_layer, 1, 1, false);
  EXPECT_NEAR(t.exposed_s, ar + ring_ag, 1e-12);
  EXPECT_NEAR(t.total_s, 2 * ring_ag + ar, 1e-12);

  c.chip.hbm_bytes = tight.peak_hbm_bytes - 1;
  const StepPrediction too_small = predict_memory(c);
  EXPECT_TRUE(too_small.backward_gathers_prefetched);
  EXPECT_FALSE(too_small.fits_hbm);
}

TEST(Memory, SmallModelByHand) {
  StepConfig c = tiny_step(8);
  const StepPrediction p = predict_step(c);
  const int64_t layer = 1024 * 24 * 128 + 8 * 128 * 1024 + 3 * 1024 * 4096 + 2 * 1024;
  const int64_t P = 4 * layer + 2 * 32768 * 1024 + 1024;
  ASSERT_GE(p.memory.size(), 5u);
  EXPECT_EQ(p.memory[0].bytes, 4 * P / 8);            // f32 parameters
  EXPECT_EQ(p.memory[1].bytes, 8 * P / 8);            // AdamW moments
  EXPECT_EQ(p.memory[2].bytes, 2 * P / 8);            // the weights' bf16 copy
  EXPECT_EQ(p.memory[3].bytes, 4 * 2048 * 1024 * 2);  // layer inputs, bf16
  // The logits (bf16 and their f32 copy) and the gathered output projection (bf16) dominate; the
  // gradients are not live beside them.
  EXPECT_EQ(p.memory.back().bytes, 2048LL * 32768 * (2 + 4) + 1024LL * 32768 * 2);
  int64_t sum = 0;
  for (const MemoryItem& m : p.memory) sum += m.bytes;
  EXPECT_EQ(p.peak_hbm_bytes, sum);
  EXPECT_TRUE(p.fits_hbm);
  // Offloading the layer inputs to pinned host memory takes them out of the peak, not the list.
  c.remat.set(Activation::decoder_layer_input, "offload");
  const StepPrediction off = predict_step(c);
  EXPECT_FALSE(off.memory[3].on_device);
  EXPECT_EQ(off.memory[3].bytes, 4 * 2048 * 1024 * 2);
  EXPECT_EQ(off.peak_hbm_bytes, p.peak_hbm_bytes - off.memory[3].bytes);
  EXPECT_DOUBLE_EQ(off.step_time_s, p.step_time_s);  // the transfers are not modelled
  // Held on the host through the step, against what a chip may pin: one byte less does not fit.
  EXPECT_EQ(off.host_offload_bytes, off.memory[3].bytes);
  EXPECT_EQ(off.host_capacity_bytes, c.chip.pinned_host_bytes);
  EXPECT_TRUE(off.fits_host && off.fits());
  StepConfig pinned = c;
  pinned.chip.pinned_host_bytes = off.memory[3].bytes - 1;
  const StepPrediction over = predict_memory(pinned);
  EXPECT_TRUE(over.fits_hbm);
  EXPECT_FALSE(over.fits_host);
  EXPECT_FALSE(over.fits());
  // bf16 weights: parameters, gradients and moments at 2 bytes, no bf16 copy; vocabulary tiling
  // 4: the logits and their gradient for a quarter of the tokens at a time.
  StepConfig small = c;
  small.weight_dtype = DType::bf16;
  small.vocab_tiles = 4;
  const StepPrediction s = predict_step(small);
  EXPECT_EQ(s.memory[0].bytes, 2 * P / 8);
  EXPECT_EQ(s.memory[1].bytes, 4 * P / 8);
  EXPECT_EQ(s.memory[2].what.rfind("saved layer inputs", 0), 0u);
  // A quarter of the logits (67 MB) is now below a layer's backward: the buffers it holds live at
  // its peak, the recompute's SwiGLU (2048 tokens, bf16, MiB): the layer's input 4 (offloaded
  // above, so brought back from host), the attention norm 4, qkv 12, the context 4 and its f32
  // log-sum-exp ([2, 8, 1024]: 64 KiB), the MLP's input 4 and norm 4, its up projections 32 and
  // activation 16, and the layer's output gradient 4 (the backward's input); then the gradients
  // (bf16, sharded) and two layers of bf16 weights.
  EXPECT_EQ(s.memory.back().what,
            "peak: an attention layer's backward (its live buffers, the largest mlp up 0.03 GiB, "
            "mlp act 0.02 GiB, qkv 0.01 GiB) + the gradients + gathered weights");
  EXPECT_EQ(s.memory.back().bytes, (84 << 20) + 2 * 8 * 1024 * 4 + 2 * P / 8 + 4 * layer);
  small.vocab_tiles = 3;  // 2048 tokens do not split in three
  EXPECT_THROW(predict_step(small), Error);
  // Tensor parallelism 2: each group of two chips works on 2 x 2 sequences, and the residual
  // stream is sharded over the pair, so a chip's saved layer inputs are [4096, 512].
  c.remat.set(Activation::decoder_layer_input, "device");
  c.mesh = {1, 4, 2};
  const StepPrediction tp = predict_step(c);
  EXPECT_EQ(tp.memory[3].bytes, 4 * 4096 * 512 * 2);
  // Its logits hold half the vocabulary for 4096 tokens, as bf16, f32 and the bf16 gradient the
  // tensor-parallel loss stores (B5 #35's compiled step), beside half the output projection.
  EXPECT_EQ(tp.memory.back().what,
            "peak: logits (bf16 and f32, and their bf16 gradient) + the output projection's "
            "gathered weight");
  EXPECT_EQ(tp.memory.back().bytes, 4096LL * 16384 * (2 + 4 + 2) + 1024LL * 16384 * 2);
}

// The remat policy's named tensors by hand: what each placement costs in HBM, and which recompute
// work it removes (a saved context drops the attention kernel, a saved q its projection and RoPE).
TEST(Memory, RematPlacementPerNamedTensor) {
  StepConfig c = tiny_step(2);
  c.remat = RematPolicy::named("custom");
  c.remat.set(Activation::query_proj, "device");
  c.remat.set(Activation::context, "offload");
  c.remat.set(Activation::mlpwo, "offload");
  const StepPrediction p = predict_step(c);
  const int64_t M = 2048;
  std::map<std::string, std::pair<int64_t, bool>> items;
  for (const MemoryItem& m : p.memory)
    if (m.what == "activations saved by the remat policy")
      items[m.on_device ? "device" : "host"] = {m.bytes, m.on_device};
  EXPECT_EQ(items["device"].first, 4 * M * 8 * 128 * 2);  // q, bf16, 4 layers
  // The context (output bf16 + log-sum-exp f32 per head), offloaded; the MLP output is asked to
  // be but stores nothing: the backward never reads it (the compiler offloads 0 bytes for it).
  EXPECT_EQ(items["host"].first, 4 * (M * 8 * 128 * 2 + M * 8 * 4));
  EXPECT_EQ(p.host_offload_bytes, items["host"].first);
  EXPECT_TRUE(p.fits_host);

  auto recompute = [&](const StepConfig& cfg) {
    std::map<std::string, int> n;
    for (const ProgramItem& item : one_of_each_part(cfg).items)
      if (item.stage.find("attention layer / remat") == 0) ++n[item.stage];
    return n;
  };
  StepConfig full = c;
  full.remat = RematPolicy::named("full");
  auto all = recompute(full), some = recompute(c);
  EXPECT_EQ(all["attention layer / remat: attention"], 1);
  EXPECT_EQ(some.count("attention layer / remat: attention"), 0u);
  // Projections (qkv, out) and their RoPEs: with q saved the k/v RoPE and one dot of each remain.
  EXPECT_EQ(all["attention layer / remat: attention proj"], 4);
  EXPECT_EQ(some["attention layer / remat: attention proj"], 3);
  // The MLP's recompute is its up projection and activation whatever the policy says of mlpwo:
  // the backward never reads the down projection's output (C3 #42's compiled backward loop).
  EXPECT_EQ(all["attention layer / remat: mlp"], 2);
  EXPECT_EQ(some["attention layer / remat: mlp"], 2);
  EXPECT_LT(predict_step(c).step_time_s, predict_step(full).step_time_s);
}

// MaxText's fused_qkv and fused_mlp name the fused projections qkv_proj and mlpwi
// (attentions.py L785, linears.py L808), and its presets list those names beside the separate
// ones, except qkv_proj_offloaded (nnx_decoders.py L1345-1352), which then offloads nothing: the
// compiled small step with fused_qkv holds no host buffer (docs/step_model.md).
TEST(Memory, FusedProjectionsTakeTheirOwnCheckpointNames) {
  using A = Activation;
  const RematPolicy offloaded = RematPolicy::named("qkv_proj_offloaded");
  EXPECT_EQ(offloaded.fused(false, false)[A::query_proj], Placement::offload);
  for (A a : {A::query_proj, A::key_proj, A::value_proj})
    EXPECT_EQ(offloaded.fused(true, false)[a], Placement::remat) << name(a);
  for (const char* policy : {"minimal", "save_qkv_proj", "save_dot_except_mlp"})
    EXPECT_EQ(RematPolicy::named(policy).fused(true, true)[A::key_proj], Placement::device)
        << policy;
  const RematPolicy minimal_off = RematPolicy::named("minimal_offloaded").fused(true, true);
  EXPECT_EQ(minimal_off[A::value_proj], Placement::offload);
  EXPECT_EQ(minimal_off[A::mlpwi_1], Placement::offload);
  EXPECT_EQ(RematPolicy::named("save_dot_except_mlpwi").fused(true, true)[A::mlpwi_0],
            Placement::remat);
  RematPolicy custom = RematPolicy::named("custom");
  custom.set(A::qkv_proj, "device");
  custom.set(A::mlpwi_0, "offload");
  EXPECT_EQ(custom.fused(true, true)[A::query_proj], Placement::device);
  EXPECT_EQ(custom.fused(true, true)[A::mlpwi_0], Placement::remat);  // mlpwi is recomputed
  EXPECT_EQ(custom.fused(false, false)[A::query_proj], Placement::remat);

  // In a step: q, k and v offloaded unfused; fused, nothing offloaded and the qkv projection
  // recomputed, so the step is slower.
  StepConfig c = tiny_step(2);
  c.remat = offloaded;
  const StepPrediction apart = predict_step(c);
  c.fused_qkv = c.fused_mlp = true;
  const StepPrediction fused = predict_step(c);
  auto offloaded_bytes = [](const StepPrediction& p) {
    int64_t b = 0;
    for (const MemoryItem& m : p.memory)
      if (!m.on_device) b += m.bytes;
    return b;
  };
  EXPECT_EQ(offloaded_bytes(apart), 4 * 2048 * (8 + 2 + 2) * 128 * 2);  // q, k, v, 4 layers
  EXPECT_EQ(offloaded_bytes(fused), 0);
  EXPECT_GT(fused.step_time_s, apart.step_time_s);
}

// A slice of `chips` chips of `chip` all on the FSDP axis.
StepConfig fsdp_step(const char* chip, const char* model, int64_t chips, int64_t seq,
                     int64_t batch_per_chip) {
  StepConfig c;
  c.chip = load_chip(chip);
  c.model = load_model(model);
  c.chips_per_slice = chips;
  c.mesh = {.data = 1, .fsdp = chips};
  c.seq = seq, c.batch_per_chip = batch_per_chip;
  return c;
}

// Qwen3-Next's backward recomputes a block of four layers (three GDN layers and an attention
// layer) before their backwards, so the peak holds the first layers' recomputed activations while
// the last layer's MLP runs: the largest live buffers are the four layers' MLP up projections, the
// earliest layer's first. At a sixteenth of the vocabulary per tile the loss is not the peak.
TEST(Memory, Qwen3NextHoldsAWholeBlocksRecompute) {
  StepConfig c = fsdp_step("v5e", "qwen3-next-dense-8b", 256, 4096, 1);
  c.vocab_tiles = 16;
  const StepPrediction p = predict_memory(c);
  EXPECT_EQ(p.memory.back().what.rfind("peak: a block's (3 GDN layers and an attention layer, "
                                       "recomputed together) backward (its live buffers, the "
                                       "largest layer 0 mlp up",
                                       0),
            0u)
      << p.memory.back().what;
  // Each [4096 tokens, 2 x 12288] bf16: 192 MiB.
  EXPECT_NE(p.memory.back().what.find("layer 0 mlp up 0.19 GiB, layer 1 mlp up 0.19 GiB, layer 2 "
                                      "mlp up 0.19 GiB"),
            std::string::npos)
      << p.memory.back().what;
}

// A gather advances only while an XLA dot fusion carries it. The tiny layer projects q, k and v
// in one dot (three reads of one op, a third each), then runs RoPE (XLA, no dot) and the
// attention kernel (Pallas) before the output projection: the value's window is the last third
// of the qkv dot, not the compute up to the output projection's read. The windows together are
// the forward's XLA dot time after the first read.
TEST(Step, TheGathersAdvanceOnlyWhileADotFusionCarriesThem) {
  const StepConfig c = tiny_step(8);
  const LayerPrograms p = attention_layer(c, c.local());
  const RunResult r = simulate(c.chip, p.program);
  const int qkv = p.forward_weights[0].item, o = p.forward_weights[3].item;
  ASSERT_EQ(p.forward_weights[2].item, qkv);
  ASSERT_EQ(p.forward_weights[1].item, qkv);
  int64_t forward = 0, forward_dots = 0, between = 0;
  for (size_t i = 0; i < r.items.size(); ++i) {
    if (!is_forward_stage(r.items[i].stage)) continue;
    forward += r.items[i].cycles;
    const auto* call = std::get_if<KernelCall>(&p.program.items[i].what);
    const bool dot = call && call->kernel->origin == Origin::xla &&
                     std::ranges::any_of(call->kernel->body,
                                         [](const Op& op) { return op.kind == OpKind::dot; });
    if (dot && static_cast<int>(i) >= qkv) forward_dots += r.items[i].cycles;
    if (static_cast<int>(i) >= qkv && static_cast<int>(i) < o) between += r.items[i].cycles;
  }
  const double s_per_cycle = 1 / c.chip.clock_hz;
  const GatherWindows w = gather_windows(p.program, r, p.forward_weights, forward * s_per_cycle, 1);
  EXPECT_NEAR(w.forward[2].compute_s, r.items[qkv].cycles / 3.0 * s_per_cycle, 1e-15);
  EXPECT_LT(r.items[qkv].cycles / 3.0, between - r.items[qkv].cycles * 2.0 / 3);
  double windows = 0;
  for (const ForwardWeight& f : w.forward) windows += f.compute_s;
  EXPECT_NEAR(windows, forward_dots * s_per_cycle, 1e-12);
  EXPECT_GT(w.backward_s, 0);
  EXPECT_LT(w.backward_s, 1);  // the backward's Pallas kernels carry nothing
}

// On an FSDP mesh every dot of a layer's XLA kernels carries the layer's gathers (C1 main's
// compiled step: its carriers are its dot fusions, one dot each) and first runs the chip's setup
// loop over the FSDP axis's devices: a GDN main layer of v5e-256 (whose lax.scan loops repeat
// their chunk products 32 times each) takes 27 cycles x 256 devices per such dot call more than
// with no setup loop.
TEST(Step, EveryXlaDotOfAnFsdpLayerCarriesItsGathers) {
  StepConfig c = fsdp_step("v5e", "qwen3-next-dense-8b", 256, 4096, 1);
  c.gdn.build = kernels::gdn::Build::main;
  StepConfig none = c;
  none.chip.async_collective_setup_cycles_per_device = 0;
  const Program p = gdn_layer(c, c.local()).program;
  int64_t calls = 0;
  auto xla_dots = [](const std::shared_ptr<const Kernel>& k) -> int64_t {
    if (k->origin != Origin::xla) return 0;
    return std::ranges::count_if(k->body, [](const Op& op) { return op.kind == OpKind::dot; });
  };
  for (const ProgramItem& item : p.items) {
    if (const auto* call = std::get_if<KernelCall>(&item.what)) calls += xla_dots(call->kernel);
    if (const auto* loop = std::get_if<Loop>(&item.what))
      for (const auto& k : loop->body) calls += loop->trips * xla_dots(k);
  }
  ASSERT_GT(calls, 21 * 32);  // the scan loops' 5 + 5 + 11 dots a trip, 32 trips, and the rest
  auto layer_s = [](const StepPrediction& s) {
    for (const StepPart& part : s.parts)
      if (part.name == "gdn layer") return part.compute_s;
    return 0.0;
  };
  EXPECT_NEAR(layer_s(predict_step(c)) - layer_s(predict_step(none)),
              calls * 27 * 256 / c.chip.clock_hz, 1e-9);
}

TEST(Step, ThroughputIdentitiesHold) {
  const StepPrediction p = predict_step(fsdp_step("v5e", "maxtext-16b", 256, 2048, 6));
  EXPECT_NEAR(p.step_time_s * p.tokens_per_s_per_chip, 6 * 2048, 1e-6);
  EXPECT_NEAR(p.tflops_per_s_per_chip * 1e12 * p.step_time_s, p.model_flops_per_chip, 1e3);
  EXPECT_NEAR(p.mfu, p.tflops_per_s_per_chip * 1e12 / 197e12, 1e-12);
  double parts = 0;
  for (const StepPart& part : p.parts) parts += part.count * (part.compute_s + part.exposed_s);
  EXPECT_DOUBLE_EQ(parts, p.step_time_s);
}

// The AdamW pass reads the parameters, gradients and both moments (f32) and writes all but the
// gradients, and runs no dot. The tiny model's local parameters make 16392 rows of 1024, which
// only blocks of 8 rows divide: 2049 grid steps of 7 transfers of 32 KiB, each holding the HBM
// pipe for 32768 / 436.8 cycles at v5e's 436.8 B/cycle (0.80 of 819 GB/s) (the timeline rounds the
// ends of each busy stretch to whole cycles: within a cycle per grid step). No unit of any part is
// busy for longer than the part takes.
TEST(Step, UnitBusyTimeByHand) {
  const StepConfig c = tiny_step(8);
  const StepPrediction p = predict_step(c);
  const int64_t local = c.model.params() / 8;
  ASSERT_EQ(std::max<int64_t>(8, (local / 1024 + 7) / 8 * 8), 16392);  // step.cpp optimizer()
  ASSERT_EQ(static_cast<int64_t>(c.chip.hbm_bytes_per_cycle()), 436);
  for (const StepPart& part : p.parts) {
    for (const auto& [group, busy] : part.unit_busy_s)
      EXPECT_LE(busy, part.compute_s * (1 + 1e-12)) << part.name << " " << group;
    if (part.name == "optimizer") {
      EXPECT_NEAR(part.unit_busy_s.at("hbm"), c.chip.cycles_to_s(2049 * 7 * 32768 / 436.8),
                  c.chip.cycles_to_s(2049));
      EXPECT_EQ(part.unit_busy_s.at("mxu"), 0);
    }
    if (part.name == "attention layer") {
      EXPECT_GT(part.unit_busy_s.at("mxu"), 0);
    }
  }
}

TEST(Step, Int8MatmulsQuantizeTheirOperandsAndRunFaster) {
  StepConfig c = fsdp_step("v6e", "gpt3-175b", 256, 2048, 3);
  const StepPrediction bf16 = predict_step(c);
  c.int8_matmuls = true;
  const StepPrediction int8 = predict_step(c);
  // The weight matmuls dominate GPT-3's layer; at twice the MXU rate, less the quantize fusions
  // and the unquantized attention, its compute is between 1.1x and 2x faster.
  const StepPart &layer_bf16 = bf16.parts.at(0), &layer_int8 = int8.parts.at(0);
  ASSERT_EQ(layer_int8.name, "attention layer");
  EXPECT_LT(layer_int8.compute_s, layer_bf16.compute_s / 1.1);
  EXPECT_GT(layer_int8.compute_s, layer_bf16.compute_s / 2);
  EXPECT_LT(int8.step_time_s, bf16.step_time_s);
  EXPECT_EQ(int8.model_flops_per_chip, bf16.model_flops_per_chip);  // MaxText counts the same
  // Both peak in the MLP's recompute and backward; under int8 the down projection's dW quantizes
  // its input, the activation [6144 tokens, 49152] (the weights' quantized copies are what FSDP
  // gathers, counted with them), and that copy is live beside what the bf16 peak holds.
  EXPECT_EQ(int8.peak_hbm_bytes - bf16.peak_hbm_bytes, 6144LL * 49152);
}

// Under int8 the compiled steps gather a layer's weights quantized (the s8 all-gathers of
// tests/data/compiled/small_int8 and of B5 #15's compiled step), one byte per weight, and reduce
// the gradient in two stages when AQT's local shards split the FSDP axis (B5 #15: over groups of
// 32 chips, then over the 8 shards). The embedding and logits stay bf16.
TEST(Step, Int8GathersQuantizedWeightsAndReducesGradientsPerLocalShard) {
  StepConfig c = tiny_step(8);
  c.int8_matmuls = true;
  c.chip.chips_per_host = 4;  // two local shards of the 8-chip FSDP axis
  const int64_t layer = 1024 * 24 * 128 + 8 * 128 * 1024 + 3 * 1024 * 4096 + 2 * 1024;
  MeshAxis ring = c.axis("fsdp", 8, false);  // the gathers go round one ring
  ring.torus_dims = 1;
  const double ag = collective_seconds(c.chip, {CollectiveKind::all_gather, layer, ring});
  const double ar =
      collective_seconds(c.chip,
                         {CollectiveKind::all_reduce, 2 * layer, c.axis("fsdp", 2, false)}) +
      collective_seconds(c.chip, {CollectiveKind::all_reduce, 2 * layer, c.axis("fsdp", 4, false)});
  const CollectiveTime t = layer_collectives(c, layer, PartKind::attention_layer, 1, 1, true);
  EXPECT_DOUBLE_EQ(t.total_s, 2 * ag + ar);
  EXPECT_DOUBLE_EQ(t.exposed_s, ar);
  // The embedding's and the logits' collectives stay bf16: as without int8.
  StepConfig bf16 = c;
  bf16.int8_matmuls = false;
  const int64_t embedding = c.model.embedding_params();
  EXPECT_DOUBLE_EQ(layer_collectives(c, embedding, PartKind::embedding, 1, 1, true).total_s,
                   layer_collectives(bf16, embedding, PartKind::embedding, 1, 1, true).total_s);
}

StepConfig context_parallel(int64_t context) {
  StepConfig c = fsdp_step("v5p", "b1-dense-gdn", 16, 65536, 1);
  c.mesh = {.data = 1, .fsdp = 16 / context, .tensor = 1, .context = context};
  c.gdn.build = kernels::gdn::Build::main;
  return c;
}

TEST(ContextParallel, GdnCoreFoldsTheLocalChunksAndTakesThePrefixAcrossDevices) {
  namespace g = kernels::gdn;
  const g::GdnShape local{.batch = 1, .seq = 4096, .heads = 32, .dk = 128, .dv = 128, .chunk = 128};
  g::LayerOptions o{.build = g::Build::main};
  o.context = MeshAxis{"context", 16, true, 3, false};
  const Program p = g::layer_core(local, o);
  std::map<std::string, int> permutes, loop_trips;
  for (const ProgramItem& item : p.items) {
    if (const auto* c = std::get_if<Collective>(&item.what)) {
      EXPECT_EQ(c->kind, CollectiveKind::permute);
      EXPECT_EQ(c->bytes, 32LL * (128 * 128 + 128 * 128) * 4);  // (A, B) of every head, f32
      ++permutes[item.stage];
    }
    if (const auto* l = std::get_if<Loop>(&item.what);
        l && item.stage.find("cp") != std::string::npos)
      loop_trips[item.stage] += static_cast<int>(l->trips);
  }
  // Hillis-Steele over 16 devices: 4 rounds and the shift to the exclusive prefix, per pass.
  EXPECT_EQ(permutes["fwd: cp prefix"], 5);
  EXPECT_EQ(permutes["remat: cp prefix"], 5);
  EXPECT_EQ(permutes["bwd: cp prefix"], 5);
  // The fold runs over the 32 local chunks in the forward, the recompute and the backward.
  EXPECT_EQ(loop_trips["fwd: cp compose"], 32);
  EXPECT_EQ(loop_trips["remat: cp compose"], 32);
  EXPECT_EQ(loop_trips["bwd: cp compose"], 32);
}

TEST(ContextParallel, OnlyTheLaxScanBuildComposesTheState) {
  namespace g = kernels::gdn;
  const g::GdnShape local{.batch = 1, .seq = 4096, .heads = 32, .dk = 128, .dv = 128, .chunk = 128};
  g::LayerOptions o{.build = g::Build::ladder};
  o.context = MeshAxis{"context", 16, true, 3, false};
  try {
    g::layer_core(local, o);
    FAIL() << "the kernel builds do not compose the state across context shards";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("use build main"), std::string::npos) << e.what();
  }
  StepConfig c = context_parallel(16);
  c.gdn.build = g::Build::ladder;
  EXPECT_THROW(predict_step(c), Error);
}

// The attention kernel's keys per chip: MaxText's load-balanced causal order gives a dense model's
// chips half the sequence each; a GDN model runs without it (configs/types.py L5375-5383), so the
// last chip's 4096 queries meet the 61440 keys before them and half of their own 4096.
TEST(ContextParallel, AttentionWithoutTheLoadBalancedOrderWaitsForTheLastChip) {
  const StepConfig gdn = context_parallel(16);
  EXPECT_EQ(attention_shape(gdn, gdn.local()).kv_seq, 65536 - 4096 / 2);
  StepConfig dense = fsdp_step("v5p", "llama3.1-8b", 16, 65536, 1);
  dense.mesh = {.data = 1, .fsdp = 1, .tensor = 1, .context = 16};
  EXPECT_EQ(attention_shape(dense, dense.local()).kv_seq, 65536 / 2);
  dense.mesh = {.data = 1, .fsdp = 16, .tensor = 1, .context = 1};
  EXPECT_EQ(attention_shape(dense, dense.local()).kv_seq, 0);  // no context axis: causal, own keys
}

TEST(ContextParallel, ShardsTheSequenceAndCountsFlopsPerDevice) {
  const StepPrediction one = predict_step(context_parallel(1));
  const StepPrediction cp = predict_step(context_parallel(16));
  // Each chip holds 65536 / 16 tokens of one sequence; MaxText's per-device batch is 1/16.
  EXPECT_NEAR(cp.tokens_per_s_per_chip * cp.step_time_s, 65536.0 / 16, 1e-6);
  EXPECT_NEAR(cp.model_flops_per_chip, one.model_flops_per_chip / 16,
              1e-3 * cp.model_flops_per_chip);
  // The attention layers all-gather the keys and values over the context axis, exposed.
  double exposed = 0;
  for (const StepPart& part : cp.parts)
    if (part.name == "attention layer") exposed = part.exposed_s;
  EXPECT_GT(exposed, 0);
  // Sharding the sequence cuts the per-chip work by more than it adds in prefix and gathers.
  EXPECT_LT(cp.step_time_s, one.step_time_s / 4);
}

}  // namespace
}  // namespace tpusim
