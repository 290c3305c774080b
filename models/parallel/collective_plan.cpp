#include "models/parallel/collective_plan.h"

#include <algorithm>
#include <limits>

#include "models/memory/memory_model.h"
#include "sim/timing/collectives.h"

namespace tpusim {

// Per layer: the FSDP all-gathers of its weights run one at a time through the forward, placed
// bottom-up behind the compute before each weight's use (chained_forward_gathers), the second
// all-gather behind the recompute + backward, and so does the gradient reduce-scatter except on a
// pure-FSDP mesh, where the compiled step all-reduces the gradient synchronously; tensor-parallel
// all-reduces of the activations sit on the critical path (2 in the forward, 2 in the backward,
// and those of the projections the recompute runs). Under context parallelism an attention layer
// all-gathers the keys and values over the context axis before its attention kernel (forward and
// recompute) and reduce-scatters their gradients after it: on the critical path.
bool synchronous_gradient_reduction(const StepConfig& c) {
  // With tensor parallelism (C5 #24, #44) the compiled backward loop holds no gradient
  // all-reduce; nothing was compiled with the expert or context axes and the runs' flags.
  return c.mesh.tensor == 1 && c.mesh.expert == 1 && c.mesh.context == 1;
}

namespace {

// A weight gradient's all-reduce over the FSDP axis. Under int8 AQT finds the gradient's range
// per local shard of the tokens it contracts, and the compiled step (B5 #15: 8 shards over 256
// chips) reduces it in two: over the chips of each shard ([8,32]<=[256] groups of 32), then over
// the shards after rescaling (an all-reduce over 'axis_0'=8).
double gradient_all_reduce(const StepConfig& c, int64_t bytes, const MeshAxis& fsdp, bool int8) {
  const int64_t shards = c.int8_local_shards();
  if (!int8 || shards <= 1 || fsdp.size % shards != 0 || shards >= fsdp.size)
    return collective_seconds(c.chip, {CollectiveKind::all_reduce, bytes, fsdp});
  return collective_seconds(c.chip, {CollectiveKind::all_reduce, bytes,
                                     c.axis("fsdp", fsdp.size / shards, false)}) +
         collective_seconds(c.chip,
                            {CollectiveKind::all_reduce, bytes, c.axis("fsdp", shards, false)});
}

// The axis as one ring, both ways round.
MeshAxis one_ring(MeshAxis axis) {
  axis.torus_dims = 1;
  return axis;
}

// How XLA moves a weight's FSDP gather. An asynchronous one (an async collective fusion's)
// forwards shards around one ring both ways on every chip: the final bundles of a scan of weights
// sharded over 256 chips (v5e and v6e) receive two shards per step inside the carrying fusion. A
// synchronous one goes the same way, or over every torus dimension where the chip's compiler
// routes it (synchronous_weight_gather: v5e's AllGatherWithNetRouterEmitter sends each shard in
// all four link directions; tests/jax/weight_gathers.sh).
MeshAxis async_gather_axis(const MeshAxis& fsdp) { return one_ring(fsdp); }
MeshAxis sync_gather_axis(const StepConfig& c, const MeshAxis& fsdp) {
  return c.chip.routed_weight_gathers ? fsdp : one_ring(fsdp);
}

// The forward's FSDP gathers as XLA's latency-hiding scheduler places them in every compiled layer
// loop body (C1 main, C3 #41, #42, C5 #11, #14, #24, #44 and the 2-slice #41; docs/step_model.md).
// It schedules bottom-up with one gather in flight: the last weight's gather ends at its read and
// starts as late as its time allows; each earlier one ends by its own read or by the start of the
// one after, whichever comes first. What that chain needs beyond the compute before the body's
// top is exposed. In an attention layer nothing comes before the top (its query projection or
// fused qkv gather is synchronous in all eight bodies), and a gather the chain pushes wholly above
// the top is synchronous too: #11's query, key/value and output projection gathers all sit
// synchronous at the top of its body, while the MLP's up projection gather hides behind the whole
// attention block. A GDN layer's chain may reach into the layer before it (C1: its first gather
// is asynchronous), as far as the compute after that layer's last read. The parameters no op
// reads as a weight (norm scales, the conv kernel) are gathered with the first.
double chained_forward_gathers(const StepConfig& c, const std::vector<ForwardWeight>& weights,
                               int64_t shard_elements, int64_t bytes_per_element,
                               const MeshAxis& fsdp, bool first_synchronous) {
  int64_t read = 0;
  for (const ForwardWeight& w : weights) read += w.elements;
  std::vector<double> read_at(weights.size(), 0.0);  // in forward seconds from the body's top
  for (size_t i = 1; i < weights.size(); ++i)
    read_at[i] = read_at[i - 1] + weights[i - 1].compute_s;
  double start = std::numeric_limits<double>::infinity();  // of the gather after
  for (size_t i = weights.size(); i-- > 0;) {
    int64_t elements = weights[i].elements;
    if (i == 0) elements += std::max<int64_t>(0, shard_elements - read);
    const double end = std::min(read_at[i], start);
    const bool synchronous = first_synchronous && end <= 0;
    start = end - collective_seconds(
                      c.chip, {CollectiveKind::all_gather, elements * bytes_per_element,
                               synchronous ? sync_gather_axis(c, fsdp) : async_gather_axis(fsdp)});
  }
  const double before_top = first_synchronous ? 0.0 : weights.back().compute_s;
  return std::max(0.0, -start - before_top);
}

// The embedding and the logits as every compiled FSDP step runs them (C1 main, C3 #41, #42, C5
// #11, #14, #24, the 2-slice #41; docs/step_model.md): the lookup is an all-to-all of the tokens'
// rows (each chip holds every token's share of the embedding's columns) and its gradient's
// scatter-add another, without a gather or a reduction of the table; the output projection is
// gathered once and kept for the backward, and its gradient all-reduced (pure FSDP) or
// reduce-scattered. Nothing hides them.
CollectiveTime embedding_fsdp_collectives(const StepConfig& c, const MeshAxis& fsdp) {
  constexpr int64_t kBf16 = byte_size(DType::bf16);
  const int64_t rows = c.local().tokens * (c.model.d_model / c.mesh.tensor) * kBf16;
  const int64_t projection = c.model.vocab * c.model.d_model / c.mesh.tensor;
  const double lookup = collective_seconds(c.chip, {CollectiveKind::all_to_all, rows, fsdp});
  // A synchronous gather with a 1-D emitter in every compiled step (1DAllGatherNonMajorDim...).
  const double gather =
      collective_seconds(c.chip, {CollectiveKind::all_gather, projection * kBf16, one_ring(fsdp)});
  const double gradient =
      synchronous_gradient_reduction(c)
          ? collective_seconds(c.chip, {CollectiveKind::all_reduce, projection * kBf16, fsdp})
          : collective_seconds(c.chip, {CollectiveKind::reduce_scatter,
                                        projection * byte_size(c.weight_dtype), fsdp});
  const double all = 2 * lookup + gather + gradient;
  return {all, all};
}

}  // namespace

CollectiveTime layer_collectives(const StepConfig& c, int64_t params, PartKind kind,
                                 double forward_s, double backward_s,
                                 bool backward_gathers_prefetched,
                                 const std::vector<ForwardWeight>& forward_weights) {
  const bool moe_layer = c.model.is_moe() && kind != PartKind::embedding;
  constexpr int64_t kBf16 = byte_size(DType::bf16);
  const LocalSizes l = c.local();
  double exposed = 0, total = 0;
  const int64_t fsdp_size = c.mesh.fsdp * c.mesh.context * c.mesh.expert;
  if (fsdp_size > 1 && kind == PartKind::embedding) {
    const CollectiveTime t = embedding_fsdp_collectives(c, c.axis("fsdp", fsdp_size, false));
    exposed += t.exposed_s;
    total += t.total_s;
  } else if (fsdp_size > 1) {
    // On megablox's path an MoE layer's experts are split over the expert axis: each chip
    // gathers its own experts' weights only (over the rest of the FSDP axes; taken as over the
    // whole one). On the dense einsum path the compiled step gathers every expert's weights over
    // fsdp x expert like any other weight (docs/compiler_import.md, "Expert parallelism").
    if (moe_layer && c.moe_sparse_matmul) {
      const int64_t routed = c.model.moe.experts * 3 * c.model.d_model * c.model.moe.mlp_dim;
      params -= routed - routed / c.mesh.expert;
    }
    const MeshAxis fsdp = c.axis("fsdp", fsdp_size, false);
    const int64_t bytes_bf16 = params / c.mesh.tensor * kBf16,
                  bytes_grad = params / c.mesh.tensor * byte_size(c.weight_dtype);
    // Under int8 the compiled steps gather a layer's weights already quantized, one byte each
    // (each shard quantized with the scales reduced first: s8 all-gathers in the forward and
    // backward loops of tests/data/compiled/small_int8 and of B5 #15's compiled step).
    const bool int8_weights = c.int8_matmuls;
    const int64_t gathered = int8_weights ? params / c.mesh.tensor : bytes_bf16;
    const double ag =
        collective_seconds(c.chip, {CollectiveKind::all_gather, gathered, async_gather_axis(fsdp)});
    const double forward_exposed =
        forward_weights.empty()
            ? std::max(0.0, ag - forward_s)
            : chained_forward_gathers(c, forward_weights, params / c.mesh.tensor,
                                      int8_weights ? 1 : kBf16, fsdp,
                                      kind == PartKind::attention_layer);
    // A backward whose gathers are not prefetched (memory_model.h) waits for each of them.
    const double backward_ag =
        backward_gathers_prefetched
            ? ag
            : collective_seconds(c.chip,
                                 {CollectiveKind::all_gather, gathered, sync_gather_axis(c, fsdp)});
    if (synchronous_gradient_reduction(c)) {
      // The compiled pure-FSDP steps (C1 main, C3 #41, #42, C5 #14 with their flags) all-reduce
      // each weight's gradient in bf16 and keep their slice, synchronously in the backward loop's
      // body (docs/compiler_import.md, "Whole compiled steps, simulated"): on the critical path.
      const double ar = gradient_all_reduce(c, bytes_bf16, fsdp, int8_weights);
      exposed += forward_exposed + ar +
                 (backward_gathers_prefetched ? std::max(0.0, ag - backward_s) : backward_ag);
      total += ag + backward_ag + ar;
    } else {
      const double rs =
          collective_seconds(c.chip, {CollectiveKind::reduce_scatter, bytes_grad, fsdp});
      exposed += forward_exposed + (backward_gathers_prefetched
                                        ? std::max(0.0, ag + rs - backward_s)
                                        : backward_ag + std::max(0.0, rs - backward_s));
      total += ag + backward_ag + rs;
    }
  }
  if (c.mesh.tensor > 1) {
    const MeshAxis tp = c.axis("tensor", c.mesh.tensor, true);
    const double ar = collective_seconds(
        c.chip, {CollectiveKind::all_reduce, l.tokens * c.model.d_model * kBf16, tp});
    // The recompute all-reduces what it recomputes of the two: the attention's output projection
    // unless saved, and never a dense MLP's down projection (layers.cpp drops it; C5 #44's compiled
    // backward loop holds 11 windowed collective matmuls: the 8 of the backward, the forward's 4
    // less that one).
    const RematPolicy keep = c.layer_remat();
    const bool out_recomputed =
        kind != PartKind::attention_layer || !keep.saved(Activation::out_proj);
    // (The embedding and logits part keeps the six it always had: no compiled program says.)
    const bool down_recomputed =
        kind == PartKind::embedding || (moe_layer && !keep.saved(Activation::mlpwo));
    // On megablox's path an MoE layer's down projection reduce-scatters its token copies, tokens
    // x top_k rows, before they are summed back per token (moe.py L3218-3223; the compiled
    // step's reduce-scatter, docs/compiler_import.md), and its backward all-gathers their
    // gradient: the MLP's pairs (the input's gather on token rows, the down projection's
    // reduce-scatter) cost (1 + top_k) / 2 all-reduces, not one.
    const double mlp_pair = moe_layer && c.moe_sparse_matmul ? (1 + c.model.moe.top_k) / 2.0 : 1.0;
    const double all_reduces = 2 + out_recomputed + (2 + down_recomputed) * mlp_pair;
    exposed += all_reduces * ar;
    total += all_reduces * ar;
  }
  if (moe_layer && c.moe_sparse_matmul && c.mesh.expert > 1) {
    // The token copies to their experts and back, by ragged all-to-all over the expert axis
    // (moe.py L2739), in the forward, the recompute and the backward: on the critical path (not
    // overlapped). The dense einsum path moves no tokens: its dispatched activations keep the
    // batch sharded over the expert axis (moe_step.py's reading of the logical rules).
    const MeshAxis ep = c.axis("expert", c.mesh.expert, false);
    const double a2a = collective_seconds(
        c.chip,
        {CollectiveKind::all_to_all, l.tokens * c.model.moe.top_k * c.model.d_model * kBf16, ep});
    exposed += 6 * a2a;
    total += 6 * a2a;
  }
  if (kind == PartKind::attention_layer && c.mesh.context > 1) {
    const MeshAxis cp = context_axis(c);
    const int64_t kv =  // k and v
        l.batch * c.seq * l.kv_heads * (c.model.qk_head_dim() + c.model.v_head_dim()) * kBf16;
    const double ag = collective_seconds(c.chip, {CollectiveKind::all_gather, kv, cp});
    const double rs = collective_seconds(c.chip, {CollectiveKind::reduce_scatter, kv, cp});
    exposed += 2 * ag + rs;
    total += 2 * ag + rs;
  }
  return {total, exposed};
}

CollectiveTime host_offload(const StepConfig& c, PartKind kind, double forward_s,
                            double backward_s) {
  const int64_t bytes = offloaded_bytes_per_layer(c, c.local(), kind == PartKind::attention_layer);
  const double each_way = collective_seconds(c.chip, {CollectiveKind::permute, bytes, host_link()});
  return {2 * each_way, std::max(0.0, each_way - forward_s) + std::max(0.0, each_way - backward_s)};
}

CollectiveTime dcn_gradient_all_reduce(const StepConfig& c, double layers_backward_s) {
  const ModelConfig& m = c.model;
  const MeshAxis axis{"data", c.mesh.data, false, 1, true};
  auto all_reduce = [&](int64_t params) -> Collective {
    return {CollectiveKind::all_reduce, byte_size(DType::bf16) * params / c.mesh.weight_shards(),
            axis};
  };
  // The compiled multi-slice step (docs/compiler_import.md, "Data parallelism over DCN"): each
  // scanned iteration's gradient shard is all-reduced over the slices in bf16, its sends issued
  // at the start of the next iteration of the backward loop and received at its end, so it hides
  // behind that iteration's backward; the last iteration's and the embedding's and logits' are
  // sent together after the loop, paying the slices' latency once.
  const int64_t trips = m.scanned_iterations();
  const Collective layer = all_reduce((m.params() - m.embedding_params() - m.d_model) / trips);
  const Collective embedding = all_reduce(m.embedding_params() + m.d_model);
  const double per_iteration = collective_seconds(c.chip, layer);
  const double embedding_links = collective_link_seconds(c.chip, embedding);
  const double hidden_behind = layers_backward_s / trips;
  return {
      trips * per_iteration + embedding_links,
      (trips - 1) * std::max(0.0, per_iteration - hidden_behind) + per_iteration + embedding_links};
}

MeshAxis context_axis(const StepConfig& c) { return c.axis("context", c.mesh.context, false); }

}  // namespace tpusim
