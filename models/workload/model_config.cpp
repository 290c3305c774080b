#include "models/workload/model_config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "models/chip_loader.h"
#include "models/yaml_map.h"
#include "sim/error.h"

namespace tpusim {

namespace fs = std::filesystem;

int64_t ModelConfig::attention_layers() const {
  return full_attention_interval > 0 ? layers / full_attention_interval : layers;
}

int64_t ModelConfig::mlp_params() const {
  if (is_moe())
    return d_model * moe.experts + (moe.experts + moe.shared) * 3 * d_model * moe.mlp_dim;
  return (swiglu ? 3 : 2) * d_model * mlp_dim;
}

int64_t ModelConfig::attention_params() const {
  if (!is_mla())
    return d_model * q_heads * query_projection_dim() + d_model * 2 * kv_heads * head_dim +
           q_heads * head_dim * d_model;
  // attention_mla.py L663-745: wq (or wq_a, its norm and wq_b), wkv_a, its norm, wkv_b, out.
  const MlaDims& a = mla;
  const int64_t q = a.q_lora_rank == 0 ? d_model * q_heads * qk_head_dim()
                                       : d_model * a.q_lora_rank + a.q_lora_rank +
                                             a.q_lora_rank * q_heads * qk_head_dim();
  const int64_t kv = d_model * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank +
                     a.kv_lora_rank * q_heads * (a.qk_nope_head_dim + a.v_head_dim);
  return q + kv + q_heads * a.v_head_dim * d_model;
}

int64_t ModelConfig::attention_layer_params() const {
  return attention_params() + mlp_params() + 2 * d_model;
}

int64_t ModelConfig::gdn_layer_params() const {
  const GdnDims& g = gdn;
  const int64_t qkvz = d_model * (2 * g.key_heads * g.head_dim + 2 * g.value_heads * g.head_dim);
  const int64_t ba = d_model * 2 * g.value_heads;
  const int64_t conv = (2 * g.key_heads * g.head_dim + g.value_heads * g.head_dim) * g.conv_kernel;
  const int64_t out = g.value_heads * g.head_dim * d_model;
  return qkvz + ba + conv + out + 2 * g.value_heads + g.head_dim + mlp_params() + 2 * d_model;
}

int64_t ModelConfig::embedding_params() const { return 2 * vocab * d_model; }

int64_t ModelConfig::params() const {
  return (attention_layers() - moe.dense_layers) * attention_layer_params() +
         moe.dense_layers * without_experts().attention_layer_params() +
         gdn_layers() * gdn_layer_params() + embedding_params() + d_model;
}

std::vector<std::string> known_models() {
  std::vector<std::string> names;
  const fs::path dir = fs::path(models_dir()) / "workloads";
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

// Bounds beyond any published model (widths of tens of thousands, a few hundred layers,
// vocabularies of a few hundred thousand) that keep the step model's products within 64 bits.
constexpr int64_t kMaxWidth = int64_t{1} << 20, kMaxCount = int64_t{1} << 14;

void load_moe(const YamlMap& top, ModelConfig& m) {
  const YamlMap e =
      top.map("moe", {"experts", "top_k", "mlp_dim", "shared", "dense_layers"}, "MoE key");
  for (const char* k : {"experts", "top_k"}) e.need(k);
  m.moe.experts = e.positive("experts", 0, kMaxCount);
  m.moe.top_k = e.positive("top_k", 0, m.moe.experts);
  m.moe.mlp_dim = e.positive("mlp_dim", m.mlp_dim, kMaxWidth);
  m.moe.shared = e.has("shared") ? e.positive("shared", 0, kMaxCount) : 0;
  if (e.has("dense_layers")) {
    m.moe.dense_layers = e.positive("dense_layers", 0, m.layers);
    if (m.moe.dense_layers >= m.layers)
      e.fail("dense_layers", fmt::format("{} of the {} layers: none would have experts",
                                         m.moe.dense_layers, m.layers));
  }
  if (!m.swiglu) top.fail("mlp", "MoE experts are SwiGLU (MaxText's silu, linear)");
}

void load_mla(const YamlMap& top, ModelConfig& m) {
  const YamlMap a = top.map(
      "mla", {"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"},
      "MLA key");
  for (const char* k : {"kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"})
    a.need(k);
  // 0 (MaxText's deepseek2-16b): q straight from the embedding, no latent.
  if (a.has("q_lora_rank")) {
    m.mla.q_lora_rank = a.as<int64_t>("q_lora_rank", "an integer");
    if (m.mla.q_lora_rank < 0 || m.mla.q_lora_rank > kMaxWidth)
      a.fail("q_lora_rank",
             fmt::format("expected 0 (no latent) to {}, got {}", kMaxWidth, m.mla.q_lora_rank));
  }
  m.mla.kv_lora_rank = a.positive("kv_lora_rank", 0, kMaxWidth);
  m.mla.qk_nope_head_dim = a.positive("qk_nope_head_dim", 0, kMaxWidth);
  m.mla.qk_rope_head_dim = a.positive("qk_rope_head_dim", 0, kMaxWidth);
  m.mla.v_head_dim = a.positive("v_head_dim", 0, kMaxWidth);
  // Every head has its own keys and values, decompressed from the shared latent.
  if (m.kv_heads != m.q_heads)
    top.fail("kv_heads", fmt::format("multi-head latent attention has a key per query head "
                                     "({} kv heads, {} query heads)",
                                     m.kv_heads, m.q_heads));
}

}  // namespace

ModelConfig load_model(const std::string& name_or_path) {
  const std::string f = models_file(name_or_path, "workloads", "model", known_models());
  const YamlMap top(f, yaml_load_file(f), "",
                    {"name", "source", "d_model", "layers", "q_heads", "kv_heads", "head_dim",
                     "mlp_dim", "mlp", "vocab", "full_attention_interval", "gdn", "moe", "mla"},
                    "model key");
  ModelConfig m;
  m.file = f;
  m.name = top.string("name");
  m.source = top.string("source");
  for (const char* k : {"d_model", "layers", "q_heads", "kv_heads", "head_dim", "mlp_dim", "vocab"})
    top.need(k);
  m.d_model = top.positive("d_model", 0, kMaxWidth);
  m.layers = top.positive("layers", 0, kMaxCount);
  m.q_heads = top.positive("q_heads", 0, kMaxCount);
  m.kv_heads = top.positive("kv_heads", 0, kMaxCount);
  m.head_dim = top.positive("head_dim", 0, kMaxWidth);
  m.mlp_dim = top.positive("mlp_dim", 0, kMaxWidth);
  m.vocab = top.positive("vocab", 0, kMaxWidth);
  m.swiglu = top.choice("mlp", {"swiglu", "gelu"}) == "swiglu";
  if (m.q_heads % m.kv_heads != 0)
    top.fail("kv_heads", fmt::format("{} query heads are not a multiple of {} kv heads", m.q_heads,
                                     m.kv_heads));
  if (top.has("moe")) load_moe(top, m);
  if (top.has("mla")) load_mla(top, m);
  if (top.has("full_attention_interval")) {
    m.full_attention_interval = top.positive("full_attention_interval");
    if (m.moe.dense_layers > 0)
      top.fail("full_attention_interval",
               "a hybrid model's layers all have experts or none (moe.dense_layers)");
    if (!top.has("gdn"))
      top.fail("gdn", "a hybrid model (full_attention_interval) needs gdn dimensions");
  }
  if (top.has("gdn")) {
    const YamlMap g =
        top.map("gdn", {"key_heads", "value_heads", "head_dim", "conv_kernel"}, "GDN key");
    m.gdn.key_heads = g.positive("key_heads", m.gdn.key_heads);
    m.gdn.value_heads = g.positive("value_heads", m.gdn.value_heads);
    m.gdn.head_dim = g.positive("head_dim", m.gdn.head_dim);
    m.gdn.conv_kernel = g.positive("conv_kernel", m.gdn.conv_kernel);
  }
  return m;
}

}  // namespace tpusim
