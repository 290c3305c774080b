#include "models/workload/model_config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <set>

#include "models/chip_loader.h"
#include "models/yaml_errors.h"
#include "sim/error.h"

namespace tpusim {

namespace fs = std::filesystem;

int64_t ModelConfig::attention_layers() const {
  return full_attention_interval > 0 ? layers / full_attention_interval : layers;
}

int64_t ModelConfig::mlp_params() const { return (swiglu ? 3 : 2) * d_model * mlp_dim; }

int64_t ModelConfig::attention_layer_params() const {
  return d_model * (q_heads + 2 * kv_heads) * head_dim + q_heads * head_dim * d_model +
         mlp_params() + 2 * d_model;
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
  return attention_layers() * attention_layer_params() + gdn_layers() * gdn_layer_params() +
         embedding_params() + d_model;
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

ModelConfig load_model(const std::string& name_or_path) {
  fs::path file = name_or_path;
  if (file.extension() != ".yaml") {
    file = fs::path(models_dir()) / "workloads" / (name_or_path + ".yaml");
    if (!fs::exists(file)) {
      std::string list;
      for (const auto& n : known_models()) list += (list.empty() ? "" : ", ") + n;
      throw Error(fmt::format("unknown model '{}' (known models: {})", name_or_path, list));
    }
  }
  const std::string f = file.string();
  const YAML::Node root = yaml_load_file(f);
  if (!root.IsMap()) yaml_fail(f, root, "", "expected a mapping of model dimensions");
  ModelConfig m;
  m.file = f;
  static const std::set<std::string> keys = {"name",
                                             "source",
                                             "d_model",
                                             "layers",
                                             "q_heads",
                                             "kv_heads",
                                             "head_dim",
                                             "mlp_dim",
                                             "mlp",
                                             "vocab",
                                             "full_attention_interval",
                                             "gdn",
                                             "moe"};
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    if (!keys.count(key))
      yaml_fail(f, kv.first, key,
                "unknown model key (known: name, source, d_model, layers, q_heads, kv_heads, "
                "head_dim, mlp_dim, mlp, vocab, full_attention_interval, gdn, moe)");
  }
  auto need = [&](const char* key) {
    if (!root[key]) yaml_fail(f, root, key, "missing");
    return root[key];
  };
  auto positive = [&](const char* key) {
    const auto v = yaml_as<int64_t>(f, need(key), key, "an integer");
    if (v < 1) yaml_fail(f, root[key], key, fmt::format("must be positive, got {}", v));
    return v;
  };
  m.name = yaml_as<std::string>(f, need("name"), "name", "a string");
  m.source = yaml_as<std::string>(f, need("source"), "source", "a string");
  m.d_model = positive("d_model");
  m.layers = positive("layers");
  m.q_heads = positive("q_heads");
  m.kv_heads = positive("kv_heads");
  m.head_dim = positive("head_dim");
  m.mlp_dim = positive("mlp_dim");
  m.vocab = positive("vocab");
  const std::string mlp = yaml_as<std::string>(f, need("mlp"), "mlp", "a string");
  if (mlp != "swiglu" && mlp != "gelu")
    yaml_fail(f, root["mlp"], "mlp", fmt::format("expected swiglu or gelu, got '{}'", mlp));
  m.swiglu = mlp == "swiglu";
  if (m.q_heads % m.kv_heads != 0)
    yaml_fail(
        f, root["kv_heads"], "kv_heads",
        fmt::format("{} query heads are not a multiple of {} kv heads", m.q_heads, m.kv_heads));
  if (root["moe"])
    yaml_fail(f, root["moe"], "moe",
              "mixture-of-experts layers are not modelled yet (no MoE layer kind); this model is "
              "out of reach");
  if (root["full_attention_interval"]) {
    m.full_attention_interval = yaml_as<int64_t>(f, root["full_attention_interval"],
                                                 "full_attention_interval", "an integer");
    if (!root["gdn"])
      yaml_fail(f, root, "gdn", "a hybrid model (full_attention_interval) needs gdn dimensions");
  }
  if (root["gdn"]) {
    const YAML::Node g = root["gdn"];
    if (!g.IsMap()) yaml_fail(f, g, "gdn", "expected a mapping");
    for (const auto& kv : g) {
      const std::string key = kv.first.as<std::string>();
      int64_t* dst = key == "key_heads"     ? &m.gdn.key_heads
                     : key == "value_heads" ? &m.gdn.value_heads
                     : key == "head_dim"    ? &m.gdn.head_dim
                     : key == "conv_kernel" ? &m.gdn.conv_kernel
                                            : nullptr;
      if (!dst)
        yaml_fail(f, kv.first, "gdn." + key,
                  "unknown GDN key (known: key_heads, value_heads, head_dim, conv_kernel)");
      *dst = yaml_as<int64_t>(f, kv.second, "gdn." + key, "an integer");
    }
  }
  return m;
}

}  // namespace tpusim
