#include "models/memory/memory_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "kernels/gdn/layer.h"
#include "models/parallel/collective_plan.h"
#include "models/workload/layers.h"
#include "sim/ir/liveness.h"
#include "sim/ir/shape.h"

namespace tpusim {

using A = Activation;

namespace {

constexpr int64_t kBf16 = byte_size(DType::bf16), kF32 = byte_size(DType::f32);
// The FSDP all-gather holds the running layer's weights and the next layer's, prefetched.
constexpr int64_t kGatheredLayers = 2;

// The model's parameters in `t`, sharded as the weights are.
int64_t sharded_params_bytes(const StepConfig& c, DType t) {
  return byte_size(t) * c.model.params() / c.mesh.weight_shards();
}

// Parameters and AdamW moments (sharded), the weights' bf16 copy, and the saved layer inputs.
// The gradients are not among them: XLA allocates their accumulators for the backward layer loop,
// after the loss (memory_model below).
void persistent_items(const StepConfig& c, const LocalSizes& l, int64_t Et,
                      std::vector<MemoryItem>& items) {
  const ModelConfig& m = c.model;
  const std::string wt(name(c.weight_dtype));
  const int64_t weights = sharded_params_bytes(c, c.weight_dtype);
  items.push_back({fmt::format("parameters ({}, sharded)", wt), weights});
  items.push_back({fmt::format("AdamW moments (2 x {}, sharded)", wt), 2 * weights});
  // XLA casts the whole layer stack's weights to bf16 once, outside the layer loops, and keeps
  // the copy through both: at their peaks the compiled B1 v6e-8 main and B5 #9 steps hold 1.58
  // and 1.99 GiB of stacked bf16 weights ([8, 512, 12288], [80, 128, 28672], ...) for 1.58 and
  // 2.05 GiB of sharded weights in bf16 (docs/compiler_import.md, "What is live at the peak").
  if (c.weight_dtype != DType::bf16)
    items.push_back({"the weights' bf16 copy (sharded), cast outside the layer loops",
                     sharded_params_bytes(c, DType::bf16)});
  items.push_back({fmt::format("saved layer inputs ({} x [{}, {}] bf16)", m.layers, l.tokens, Et),
                   m.layers * l.tokens * Et * kBf16,
                   c.remat[A::decoder_layer_input] != Placement::offload});
}

// `heads` heads of `head_dim` for M tokens in bf16, laid out in HBM as XLA tiles them: heads
// outside the sequence, the head dimension minor and padded to 128 lanes. B5 #33's compiled step
// offloads its queries (128 heads of 192) as bf16[58,6,128,8192,192] [layers, batch, heads, seq,
// head] in a 186,831,077,376-byte buffer: 256 lanes a row.
int64_t heads_bytes(int64_t M, int64_t heads, int64_t head_dim) {
  return hbm_tiled_bytes({heads, M, head_dim}, DType::bf16);
}

// One layer's named tensor `a` in bytes (bf16; the context's log-sum-exp in f32). The layer input
// is a persistent item; a fused projection counts as the q, k, v and up projections it stands in
// for.
int64_t activation_bytes(const StepConfig& c, const LocalSizes& l, Activation a) {
  const ModelConfig& m = c.model;
  const int64_t M = l.tokens, Dqk = m.qk_head_dim(), Dv = m.v_head_dim();
  const int64_t Et = residual_columns(c);
  switch (a) {
    case A::query_proj:
      return heads_bytes(M, l.q_heads, Dqk);
    case A::context:  // the attention output, and its f32 log-sum-exp per head
      return heads_bytes(M, l.q_heads, Dv) + M * l.q_heads * kF32;
    case A::key_proj:
      return heads_bytes(M, l.kv_heads, Dqk);
    case A::value_proj:
      return heads_bytes(M, l.kv_heads, Dv);
    case A::out_proj:
      return M * Et * kBf16;
    case A::mlpwo:
      // A dense MLP's down projection only makes the layer's output through the residual add,
      // and the backward reads neither, so saving it stores nothing: the small compiled step
      // offloads 0 bytes with mlpwo=offload and 8 MiB (4 layers x [1024, 1024] bf16) with
      // out_proj=offload, and B5 #32's compile offloads only its context (docs/step_model.md,
      // "Pinned host memory"). An MoE layer's expert outputs are kept as counted: the routing
      // weights' gradient reads them (no compiled evidence yet).
      return m.is_moe() ? M * Et * kBf16 : 0;
    case A::mlpwi_0:
      return M * l.mlp * kBf16;
    case A::mlpwi_1:
      return m.swiglu ? M * l.mlp * kBf16 : 0;
    case A::decoder_layer_input:
    case A::qkv_proj:
    case A::mlpwi:
      return 0;
  }
  return 0;
}

bool is_mlp_activation(Activation a) { return a == A::mlpwi_0 || a == A::mlpwi_1 || a == A::mlpwo; }

// The policy's named tensors, bf16, per layer kind (the GDN layer names only its MLP's): on
// device and offloaded.
void saved_activations(const StepConfig& c, const LocalSizes& l, std::vector<MemoryItem>& items) {
  const ModelConfig& m = c.model;
  int64_t saved[2] = {0, 0};  // on device, offloaded
  const RematPolicy remat = c.layer_remat();
  for (int i = 1; i < kNumActivations; ++i) {
    const auto a = static_cast<Activation>(i);
    if (!remat.saved(a)) continue;
    const int64_t layers = is_mlp_activation(a) ? m.layers : m.attention_layers();
    saved[remat[a] == Placement::offload] += layers * activation_bytes(c, l, a);
  }
  if (saved[0] > 0) items.push_back({"activations saved by the remat policy", saved[0]});
  if (saved[1] > 0)
    items.push_back({"activations saved by the remat policy", saved[1], /*on_device=*/false});
}

// A layer's backward working set: the peak of the HBM buffers its recompute and backward hold live
// (sim/ir/liveness.h), from the buffers its ops name (models/workload/layer_program.h): the
// recomputed activations, the GDN core's chunk arrays, stacked residuals and f32 cotangents, the
// gradients in flight, lane padding. The saved layer input, the saved activations on device, the
// weights and their gradient accumulators are held elsewhere (the other items).
struct LayerBackward {
  std::string layer;
  Liveness live;
};

LayerBackward layer_backward(const std::string& layer, const Program& p) {
  return {layer, hbm_liveness(p, [](const ProgramItem& item) {
            return !is_forward_stage(item.stage);  // the recompute and the backward
          })};
}

// `p` with its buffers renamed "<prefix><name>", and those in `links` renamed as given (layer
// programs side by side in one block, their buffers apart but for those they pass on).
Program renamed(const Program& p, const std::string& prefix,
                const std::map<std::string, std::string>& links) {
  Program out = p;
  auto rename = [&](const std::string& b) {
    const auto link = links.find(b);
    return link != links.end() ? link->second : prefix + b;
  };
  for (ProgramItem& item : out.items) {
    for (const Kernel* k : kernels_of(item))
      for (const auto* specs : {&k->inputs, &k->outputs})
        for (const BlockSpec& b : *specs)
          if (!item.buffers.count(b.array.name)) item.buffers[b.array.name] = {b.array.name};
    for (auto& [array, buffers] : item.buffers)
      for (std::string& b : buffers) b = rename(b);
  }
  return out;
}

// Qwen3-Next's decoder scans blocks of `full_attention_interval` layers (GDN layers, then full
// attention; MaxText's inhomogeneous_layer_cycle_interval), and its compiled backward recomputes
// a whole block before the block's backward: B1 v6e-8 main's compiled step holds, at its peak in
// an MLP's backward, recomputed projections and SiLU outputs of several of the block's layers
// (eight [8192, 12288] bf16 projection outputs, eight of its SiLUs; docs/compiler_import.md). So
// the block's recomputes run first, in order, then its layers' backwards, last layer first, each
// layer's input gradient the previous one's output gradient.
Program block_backward(const std::vector<Program>& layers) {
  const int n = static_cast<int>(layers.size());
  std::vector<Program> named;
  for (int i = 0; i < n; ++i) {
    std::map<std::string, std::string> links;
    if (i + 1 < n) links["layer output grad"] = fmt::format("layer {} input grad", i + 1);
    links["layer input grad"] = fmt::format("layer {} input grad", i);
    named.push_back(renamed(layers[i], fmt::format("layer {} ", i), links));
  }
  Program block;
  for (const Program& l : named)
    for (const ProgramItem& item : l.items)
      if (is_recompute_stage(item.stage)) block.items.push_back(item);
  for (int i = n - 1; i >= 0; --i)
    for (const ProgramItem& item : named[i].items)
      if (!is_forward_stage(item.stage) && !is_recompute_stage(item.stage))
        block.items.push_back(item);
  for (ProgramItem& item : block.items) item.deps.clear();  // only the order matters here
  return block;
}

// The largest working set of the step's layer kinds (or, for Qwen3-Next, its block).
LayerBackward largest_layer_backward(const StepConfig& c, const LocalSizes& l) {
  const ModelConfig& m = c.model;
  std::vector<LayerBackward> kinds;
  if (m.full_attention_interval > 1) {
    std::vector<Program> layers(m.full_attention_interval - 1, gdn_layer(c, l).program);
    layers.push_back(attention_layer(c, l).program);
    kinds.push_back(layer_backward(
        fmt::format("a block's ({} GDN layers and an attention layer, recomputed together)",
                    m.full_attention_interval - 1),
        block_backward(layers)));
  } else if (m.attention_layers() > 0) {
    kinds.push_back(layer_backward("an attention layer's", attention_layer(c, l).program));
  }
  if (m.moe.dense_layers > 0) {
    StepConfig dense = c;
    dense.model = m.without_experts();
    kinds.push_back(layer_backward("a dense layer's", attention_layer(dense, l).program));
  }
  return *std::max_element(kinds.begin(), kinds.end(), [](const auto& a, const auto& b) {
    return a.live.peak_bytes < b.live.peak_bytes;
  });
}

// "q tokens 1.50 GiB, o 1.00 GiB, ...": the largest buffers live at the peak.
std::string largest_buffers(const Liveness& live, size_t count) {
  std::string out;
  for (size_t i = 0; i < std::min(count, live.at_peak.size()); ++i)
    out += fmt::format("{}{} {:.2f} GiB", i ? ", " : "", live.at_peak[i].name,
                       live.at_peak[i].bytes / double(1 << 30));
  return out;
}

}  // namespace

// Assumed: MaxText's activation_embed sharding; replicated copies would not let C3 #22's
// tensor-parallel run fit its 95 GiB.
int64_t residual_columns(const StepConfig& c) { return c.model.d_model / c.mesh.tensor; }

int64_t offloaded_bytes_per_layer(const StepConfig& c, const LocalSizes& l, bool attention) {
  const RematPolicy remat = c.layer_remat();
  int64_t bytes = remat[A::decoder_layer_input] == Placement::offload
                      ? l.tokens * residual_columns(c) * kBf16
                      : 0;
  for (int i = 1; i < kNumActivations; ++i) {
    const auto a = static_cast<Activation>(i);
    if (remat[a] == Placement::offload && (attention || is_mlp_activation(a)))
      bytes += activation_bytes(c, l, a);
  }
  return bytes;
}

MemoryModel memory_model(const StepConfig& c, const LocalSizes& l) {
  const ModelConfig& m = c.model;
  const int64_t M = l.tokens, Et = residual_columns(c);
  MemoryModel out;
  std::vector<MemoryItem>& items = out.items;
  persistent_items(c, l, Et, items);
  saved_activations(c, l, items);
  int64_t persistent = 0;
  for (const MemoryItem& it : items)
    if (it.on_device) persistent += it.bytes;
  const LayerBackward layer = largest_layer_backward(c, l);
  const int64_t layer_weights =
      std::max({m.attention_layer_params(), m.gdn_layers() ? m.gdn_layer_params() : 0,
                m.moe.dense_layers ? m.without_experts().attention_layer_params() : 0}) /
      c.mesh.tensor * kBf16;
  // The logits region as the compiled C1, C3 #1 and B5 #9 steps hold it (XLA's buffer
  // assignments, docs/compiler_import.md "Whole dense steps"): the logits dot's bf16 output and
  // its f32 copy for the loss (their gradient is fused into the backward's dots, never stored),
  // beside the output projection's gathered bf16 weight. Its bf16 gradient sits beside them in C1
  // but not in B5 #9, whose f32 logits share their buffer with it: not counted. With the
  // vocabulary over the tensor axis the logits' gradient is stored (bf16) beside them: B5 #35's
  // step compiled at batch 3 (Llama 4 Maverick, tensor 4) peaks at its cast, holding
  // f32[12,8192,50512] and two bf16 arrays of that shape (docs/compiler_import.md).
  const int64_t vocab = m.vocab / c.mesh.tensor;
  const int64_t logit_arrays = kBf16 + kF32 + (c.mesh.tensor > 1 ? kBf16 : 0);
  const int64_t logits = M / c.vocab_tiles * vocab * logit_arrays + m.d_model * vocab * kBf16;
  // The gradient accumulators (sharded, in the weight dtype) are live through the backward layer
  // loop only: B5 #9's compiled step could not hold them beside its logits and stay within its
  // heap (docs/compiler_import.md, "What is live at the peak").
  const int64_t backward_ws = layer.live.peak_bytes + sharded_params_bytes(c, c.weight_dtype);
  int64_t layer_ws = backward_ws + kGatheredLayers * layer_weights;
  // XLA's scheduler keeps a gather's buffer live from its start to its use, so prefetching costs
  // a layer of HBM; the compiled C5 #14 step (over HBM with it) gathers synchronously in its
  // backward loop instead (docs/compiler_import.md, "Whole compiled steps, simulated").
  const bool gathers = c.mesh.fsdp * c.mesh.context * c.mesh.expert > 1;
  auto fits = [&](int64_t ws) { return persistent + std::max(ws, logits) <= c.chip.hbm_bytes; };
  if (gathers && !fits(layer_ws) && fits(backward_ws + layer_weights)) {
    layer_ws = backward_ws + layer_weights;
    out.backward_gathers_prefetched = false;
  }
  const char* gathered = out.backward_gathers_prefetched
                             ? "gathered weights"
                             : "the running layer's gathered weights (gathers synchronous: the "
                               "next layer's prefetch would not fit)";
  if (layer_ws >= logits) {
    items.push_back({fmt::format("peak: {} backward (its live buffers, the largest {}) + the "
                                 "gradients + {}",
                                 layer.layer, largest_buffers(layer.live, 3), gathered),
                     layer_ws});
  } else {
    const std::string arrays =
        c.mesh.tensor > 1 ? "bf16 and f32, and their bf16 gradient" : "bf16 and f32";
    items.push_back({c.vocab_tiles > 1
                         ? fmt::format("peak: logits ({}), 1/{} of the tokens, + the output "
                                       "projection's gathered weight",
                                       arrays, c.vocab_tiles)
                         : fmt::format("peak: logits ({}) + the output projection's gathered "
                                       "weight",
                                       arrays),
                     logits});
  }
  return out;
}

}  // namespace tpusim
