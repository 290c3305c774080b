// `tpusim export maxtext`: a step as MaxText's command line (maxtext_config.h,
// maxtext_command_line), what `python -m tpusim_jax compile-step` compiles.
#include <fmt/format.h>

#include "app/maxtext_config.h"
#include "app/maxtext_keys.h"
#include "sim/error.h"

namespace tpusim {

using namespace maxtext_keys;

namespace {

// The model's MaxText keys (and the MoE path's, which the scenario holds).
std::vector<std::string> model_args(const StepConfig& c) {
  const ModelConfig& m = c.model;
  const std::map<std::string, int64_t> dims = {{"d_model", m.d_model},   {"q_heads", m.q_heads},
                                               {"kv_heads", m.kv_heads}, {"mlp_dim", m.mlp_dim},
                                               {"layers", m.layers},     {"head_dim", m.head_dim},
                                               {"vocab", m.vocab}};
  std::vector<std::string> args;
  for (const auto& [maxtext, ours] : kModelKeys)
    args.push_back(fmt::format("{}={}", maxtext, dims.at(ours)));
  args.push_back(m.swiglu ? "mlp_activations=[silu,linear]" : "mlp_activations=[gelu]");
  if (m.is_mla()) {  // the compiled step refuses attention_type
    args.push_back("attention_type=mla");
    const MlaDims& a = m.mla;
    const int64_t latent[] = {a.q_lora_rank, a.kv_lora_rank, a.qk_nope_head_dim, a.qk_rope_head_dim,
                              a.v_head_dim};
    for (size_t k = 0; k < kMlaKeys.size(); ++k)
      args.push_back(fmt::format("{}={}", kMlaKeys[k].first, latent[k]));
  }
  if (m.gdn_layers() > 0) {
    args.push_back("decoder_block=qwen3_next");
    args.push_back(fmt::format("inhomogeneous_layer_cycle_interval={}", m.full_attention_interval));
    for (const auto& [key, v] :
         std::vector<std::pair<std::string, int64_t>>{{"gdn_num_key_heads", m.gdn.key_heads},
                                                      {"gdn_num_value_heads", m.gdn.value_heads},
                                                      {"gdn_key_head_dim", m.gdn.head_dim},
                                                      {"gdn_value_head_dim", m.gdn.head_dim},
                                                      {"gdn_conv_kernel_dim", m.gdn.conv_kernel},
                                                      {"gdn_chunk_size", c.gdn_chunk}})
      args.push_back(fmt::format("{}={}", key, v));
    // Not MaxText's key: PR #4348's Pallas builds, which the compiled step adds
    // (python/tpusim_jax/gdn_kernel_rule.py).
    if (c.gdn.build != kernels::gdn::Build::main)
      args.push_back("gdn_build=" + kernels::gdn::name(c.gdn.build));
  }
  if (m.is_moe()) {
    const std::map<std::string, int64_t> moe = {{"experts", m.moe.experts},
                                                {"top_k", m.moe.top_k},
                                                {"mlp_dim", m.moe.mlp_dim},
                                                {"shared", m.moe.shared}};
    for (const auto& [maxtext, ours] : kMoeKeys)
      args.push_back(fmt::format("{}={}", maxtext, moe.at(ours)));
    // Layers keeping the dense MLP, in DeepSeek's key (the compiled step refuses it and MLA).
    if (m.moe.dense_layers > 0)
      args.push_back(fmt::format("first_num_dense_layers={}", m.moe.dense_layers));
    args.push_back(fmt::format("sparse_matmul={}", c.moe_sparse_matmul ? "true" : "false"));
    if (c.capacity_factor > 0) args.push_back(fmt::format("capacity_factor={}", c.capacity_factor));
  }
  return args;
}

}  // namespace

std::vector<std::string> maxtext_command_line(const StepConfig& c) {
  const ModelConfig& m = c.model;
  // MaxText 0.2.5 has the GDN layer's XLA path only (models/qwen3.py); the compiled step adds
  // PR #4348's Pallas builds with this project's kernels at their default tiles, not the
  // doubling inverse of PR #4577.
  if (m.gdn_layers() > 0 && (c.gdn.build == kernels::gdn::Build::doubling || c.gdn.head_tile_fwd ||
                             c.gdn.head_tile_bwd || c.gdn.tile_n))
    throw Error(fmt::format(
        "gdn build {}: the compiled step runs the main build and PR #4348's Pallas builds (scan, "
        "heads, ladder) at their default tiles",
        kernels::gdn::name(c.gdn.build)));
  std::vector<std::string> args = model_args(c);
  // Under context parallelism a chip holds 1 / context of a sequence: MaxText's per-device batch
  // is that fraction (a scenario counts whole sequences). A model with GDN layers runs without
  // the load-balanced order, which MaxText refuses for it (configs/types.py L5375-5383); a dense
  // model keeps MaxText's default (load-balanced), as the step model assumes.
  args.push_back(fmt::format("per_device_batch_size={}",
                             static_cast<double>(c.batch_per_chip) / c.mesh.context));
  args.push_back(fmt::format("max_target_length={}", c.seq));
  args.push_back(fmt::format("remat_policy={}", c.remat.policy));
  if (c.remat.policy == "custom")
    for (int i = 0; i < kNumActivations; ++i) {
      // The fused projections' names exist only when the step fuses them.
      const auto a = static_cast<Activation>(i);
      if ((a == Activation::qkv_proj && !c.fused_qkv) || (a == Activation::mlpwi && !c.fused_mlp))
        continue;
      args.push_back(fmt::format("{}={}", name(a), name(c.remat.where[i])));
    }
  if (c.fused_qkv) args.push_back("fused_qkv=true");
  if (c.fused_mlp) args.push_back("fused_mlp=true");
  args.push_back(
      fmt::format("weight_dtype={}", c.weight_dtype == DType::f32 ? "float32" : "bfloat16"));
  if (c.int8_matmuls) {
    args.push_back("quantization=int8");
    args.push_back(fmt::format("quantization_local_shard_count={}", c.int8_local_shards()));
  }
  if (c.vocab_tiles > 1) args.push_back(fmt::format("num_vocab_tiling={}", c.vocab_tiles));
  for (const auto& [maxtext, size] :
       std::vector<std::pair<std::string, int64_t>>{{"ici_fsdp_parallelism", c.mesh.fsdp},
                                                    {"ici_tensor_parallelism", c.mesh.tensor},
                                                    {"ici_context_parallelism", c.mesh.context},
                                                    {"ici_expert_parallelism", c.mesh.expert}})
    args.push_back(fmt::format("{}={}", maxtext, size));
  if (c.mesh.context > 1 && m.gdn_layers() > 0)
    args.push_back("context_parallel_load_balance=false");
  // MaxText names v5p slices by TensorCores, two per chip (as `topology` above reads them).
  const int64_t devices = c.chip.name == "v5p" ? 2 * c.chips_per_slice : c.chips_per_slice;
  args.push_back(fmt::format("compile_topology={}-{}", c.chip.name, devices));
  args.push_back(fmt::format("compile_topology_num_slices={}", c.mesh.data));
  return args;
}

}  // namespace tpusim
