#include "app/maxtext_config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "app/maxtext_keys.h"
#include "models/chip_loader.h"
#include "models/workload/model_config.h"
#include "models/yaml_errors.h"
#include "sim/error.h"

namespace tpusim {

using namespace maxtext_keys;

namespace {

// The command line's overrides, in order; a repeated key keeps the last value, as MaxText does.
std::map<std::string, std::string> parse_overrides(const std::vector<std::string>& overrides) {
  std::map<std::string, std::string> kv;
  for (const std::string& o : overrides) {
    const auto eq = o.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error(fmt::format("'{}': expected KEY=VALUE, as MaxText's command line takes it", o));
    kv[o.substr(0, eq)] = o.substr(eq + 1);
  }
  return kv;
}

// A value of the command line as a number, or nothing when it is not one.
std::optional<double> number(const std::string& v) {
  size_t used = 0;
  try {
    const double x = std::stod(v, &used);
    if (used == v.size() && std::isfinite(x)) return x;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

int64_t integer(const std::string& key, const std::string& v) {
  const std::optional<double> x = number(v);
  if (!x || *x != std::floor(*x) || std::abs(*x) > 1e15)
    throw Error(fmt::format("{}={}: expected an integer", key, v));
  return static_cast<int64_t>(*x);
}

// A MaxText boolean (True or true, False or false) as a scenario's "true" or "false".
std::string boolean(const std::string& key, const std::string& v) {
  if (v == "true" || v == "True") return "true";
  if (v == "false" || v == "False") return "false";
  throw Error(fmt::format("{}={}: expected true or false", key, v));
}

// A count MaxText may write as a float (per_device_batch_size=2.0): whole numbers only.
int64_t whole(const std::string& key, const std::string& v) {
  const std::optional<double> x = number(v);
  if (!x || *x != std::floor(*x) || *x < 1 || *x > 1e12)
    throw Error(
        fmt::format("{}={}: expected a whole number of at least 1 (tpusim runs whole "
                    "samples and tokens per chip)",
                    key, v));
  return static_cast<int64_t>(*x);
}

// MaxText 0.2.5's defaults (configs/base.yml) for what a run needs and its command line may leave
// out.
const std::vector<std::pair<std::string, std::string>> kDefaults = {
    {"max_target_length", "2048"}, {"per_device_batch_size", "12"}, {"remat_policy", "full"}};

// base.yml's values of the model keys a model config may leave out (MaxText loads base.yml
// first): head_dim L210, base_mlp_dim L207, vocab_size L821.
const std::map<std::string, int64_t> kModelDefaults = {
    {"head_dim", 128}, {"base_mlp_dim", 7168}, {"vocab_size", 32000}};

// Model config keys tpusim does not model whose effect on a step is small, with why.
const std::map<std::string, std::string> kSmallKeys = {
    {"use_qk_norm", "an elementwise norm of q and k, not modelled"},
    {"nope_layer_interval", "layers without RoPE: RoPE is not modelled"},
    {"chunk_attn_window_size",
     "chunked attention taken as full causal attention (the same when the window is at least "
     "the sequence)"}};

// MaxText's Gated Delta Net keys and ours under `gdn:` (base.yml L1457-1465; tpusim's GdnDims
// defaults are base.yml's, so absent keys need not be written). gdn_value_head_dim must equal the
// key head dim: tpusim's layer has one head dim.
const std::map<std::string, std::string> kGdnKeys = {{"gdn_num_key_heads", "key_heads"},
                                                     {"gdn_num_value_heads", "value_heads"},
                                                     {"gdn_key_head_dim", "head_dim"},
                                                     {"gdn_conv_kernel_dim", "conv_kernel"}};

// The `moe:` map of a model config's MoE keys (none when it has at most one expert).
void emit_moe(YAML::Emitter& out, const std::vector<std::pair<std::string, int64_t>>& moe) {
  const auto experts =
      std::find_if(moe.begin(), moe.end(), [](const auto& kv) { return kv.first == "experts"; });
  if (experts == moe.end() || experts->second <= 1) return;
  out << YAML::Key << "moe" << YAML::Value << YAML::Flow << YAML::BeginMap;
  for (const auto& [k, v] : moe)
    if (v > 0) out << YAML::Key << k << YAML::Value << v;
  if (std::none_of(moe.begin(), moe.end(), [](const auto& kv) { return kv.first == "top_k"; }))
    out << YAML::Key << "top_k" << YAML::Value << 1;  // base.yml's num_experts_per_tok
  out << YAML::EndMap;
}

struct Writer {
  std::vector<std::string> not_modelled, defaults;
  void skip(const std::string& key, const std::string& value, const std::string& why) {
    not_modelled.push_back(fmt::format("{}={} ({})", key, value, why));
  }
};

std::string scalar_text(const YAML::Node& n) { return n.IsScalar() ? n.Scalar() : YAML::Dump(n); }

// mlp_activations: [silu, linear] (or gelu's) is a gated MLP, anything else one GELU projection.
void emit_mlp(YAML::Emitter& out, const std::string& file, const YAML::Node& list, Writer& w) {
  std::vector<std::string> acts;
  for (const auto& a : list)
    acts.push_back(yaml_as<std::string>(file, a, "mlp_activations", "a name"));
  const bool gated = acts.size() == 2 && acts[1] == "linear";
  out << YAML::Key << "mlp" << YAML::Value << (gated ? "swiglu" : "gelu");
  if (!gated && !(acts.size() == 1 && acts[0] == "gelu"))
    w.skip("mlp_activations", scalar_text(list), "modelled as one GELU up projection");
}

// The model keys the config left out, at base.yml's values; a key without one is an error.
void emit_model_defaults(YAML::Emitter& out, const std::string& file,
                         const std::set<std::string>& seen, Writer& w) {
  for (const auto& [key, ours] : kModelKeys) {
    if (seen.count(key)) continue;
    const auto d = kModelDefaults.find(key);
    if (d == kModelDefaults.end())
      throw Error(fmt::format("{}: no '{}' (tpusim needs it for the model's {})", file, key, ours));
    out << YAML::Key << ours << YAML::Value << d->second;
    w.defaults.push_back(fmt::format("{}={} (MaxText's base.yml)", key, d->second));
  }
}

// `mla:` from the config's dims, base.yml's for those it leaves out.
void emit_mla(YAML::Emitter& out, const std::map<std::string, int64_t>& dims, Writer& w) {
  out << YAML::Key << "mla" << YAML::Value << YAML::Flow << YAML::BeginMap;
  for (const auto& [key, fallback] : kMlaKeys) {
    const auto it = dims.find(key);
    if (it == dims.end())
      w.defaults.push_back(fmt::format("{}={} (MaxText's base.yml)", key, fallback));
    out << YAML::Key << key << YAML::Value << (it == dims.end() ? fallback : it->second);
  }
  out << YAML::EndMap;
}

// A hybrid model's Gated Delta Net dims (one head dim: the key's).
void emit_gdn(YAML::Emitter& out, const std::vector<std::pair<std::string, int64_t>>& gdn,
              int64_t value_head_dim, Writer& w) {
  out << YAML::Key << "gdn" << YAML::Value << YAML::Flow << YAML::BeginMap;
  for (const auto& [k, v] : gdn) out << YAML::Key << k << YAML::Value << v;
  out << YAML::EndMap;
  const auto key_dim =
      std::find_if(gdn.begin(), gdn.end(), [](const auto& kv) { return kv.first == "head_dim"; });
  if (value_head_dim > 0 && value_head_dim != (key_dim == gdn.end() ? 128 : key_dim->second))
    w.skip("gdn_value_head_dim", std::to_string(value_head_dim),
           "tpusim's GDN layer has one head dim, the key head dim");
}

// What the import makes of MaxText's decoder_block: nothing to say for llama2 (tpusim's layers
// are that block's), else what it reads from the block and what it leaves out.
std::string decoder_block_reason(const std::string& block) {
  if (block == "llama2") return "";
  if (block == "qwen3_next")
    return "partly: it makes the first inhomogeneous_layer_cycle_interval - 1 layers of each "
           "cycle GDN layers; its other details are not modelled";
  if (block == "llama4" || block == "deepseek")
    return "partly: it decides which layers keep a dense MLP (get_dense_moe_layers); its other "
           "details are not modelled";
  return "not modelled: tpusim's layers are MaxText's llama2 block";
}

// `decoder_block`: the command line's, which overrides the model config's ("" for none).
std::string model_yaml(const std::string& file, const std::string& name,
                       const std::string& decoder_block, Writer& w) {
  const YAML::Node root = yaml_load_file(file);
  if (!root.IsMap())
    throw Error(fmt::format("{}: expected a MaxText model config (a mapping)", file));
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << name << YAML::Key << "source"
      << YAML::Value << fmt::format("MaxText model config {} (tpusim import maxtext)", file);
  std::set<std::string> seen;
  std::vector<std::pair<std::string, int64_t>> moe, gdn;
  int64_t interval = 1, value_head_dim = 0, interleave = 1, first_dense = 0;
  // inhomogeneous_layer_cycle_interval is Qwen3-Next's GDN cycle only under its decoder block.
  const std::string block = !decoder_block.empty()  ? decoder_block
                            : root["decoder_block"] ? scalar_text(root["decoder_block"])
                                                    : "";
  const bool qwen3_next = block == "qwen3_next";
  const bool mla = root["attention_type"] && scalar_text(root["attention_type"]) == "mla";
  std::map<std::string, int64_t> mla_dims;
  for (const auto& kv : root) {
    const std::string key = yaml_as<std::string>(file, kv.first, "", "a key");
    if (mla && key == "base_num_kv_heads") {
      w.skip(key, scalar_text(kv.second),
             "multi-head latent attention has a key and a value per query head (wkv_b, "
             "attention_mla.py L737-741)");
    } else if (auto it = kModelKeys.find(key); it != kModelKeys.end()) {
      out << YAML::Key << it->second << YAML::Value
          << yaml_as<int64_t>(file, kv.second, key, "an integer");
      seen.insert(key);
    } else if (key == "mlp_activations") {
      emit_mlp(out, file, kv.second, w);
    } else if (auto m = kMoeKeys.find(key); m != kMoeKeys.end()) {
      moe.emplace_back(m->second, yaml_as<int64_t>(file, kv.second, key, "an integer"));
    } else if (key == "inhomogeneous_layer_cycle_interval" && qwen3_next) {
      interval = yaml_as<int64_t>(file, kv.second, key, "an integer");
      out << YAML::Key << "full_attention_interval" << YAML::Value << interval;
    } else if ((key == "interleave_moe_layer_step" && block == "llama4") ||
               (key == "first_num_dense_layers" && block == "deepseek")) {
      // Which layers keep a dense MLP, as MaxText's get_dense_moe_layers reads them for these
      // decoder blocks (maxtext_utils.py L754-761).
      const int64_t n = yaml_as<int64_t>(file, kv.second, key, "an integer");
      if (n < (key == "first_num_dense_layers" ? 0 : 1))
        throw Error(fmt::format("{}: {}={}: expected a whole number{}", file, key, n,
                                key == "first_num_dense_layers" ? "" : " of at least 1"));
      (key == "first_num_dense_layers" ? first_dense : interleave) = n;
    } else if (key == "attention_type" && mla) {
      continue;  // its dims below
    } else if (mla && std::any_of(kMlaKeys.begin(), kMlaKeys.end(),
                                  [&](const auto& kv) { return kv.first == key; })) {
      mla_dims[key] = yaml_as<int64_t>(file, kv.second, key, "an integer");
    } else if (auto small = kSmallKeys.find(key); small != kSmallKeys.end()) {
      w.skip(key, scalar_text(kv.second), small->second);
    } else if (auto g = kGdnKeys.find(key); g != kGdnKeys.end()) {
      gdn.emplace_back(g->second, yaml_as<int64_t>(file, kv.second, key, "an integer"));
    } else if (key == "gdn_value_head_dim") {
      value_head_dim = yaml_as<int64_t>(file, kv.second, key, "an integer");
    } else if (key == "decoder_block") {  // unless the command line's overrides it
      if (const std::string why = decoder_block_reason(block);
          decoder_block.empty() && !why.empty())
        w.skip(key, block, why);
    } else {
      w.skip(key, scalar_text(kv.second), "not modelled");
    }
  }
  if (mla && root["base_num_query_heads"]) {
    out << YAML::Key << "kv_heads" << YAML::Value
        << yaml_as<int64_t>(file, root["base_num_query_heads"], "base_num_query_heads",
                            "an integer");
    seen.insert("base_num_kv_heads");
  }
  emit_model_defaults(out, file, seen, w);
  if (interleave > 1 || first_dense > 0) {
    const int64_t layers = yaml_as<int64_t>(file, root["base_num_decoder_layers"],
                                            "base_num_decoder_layers", "an integer");
    moe.emplace_back("dense_layers", first_dense + layers - layers / interleave);
  }
  emit_moe(out, moe);
  if (mla) emit_mla(out, mla_dims, w);
  if (interval > 1) emit_gdn(out, gdn, value_head_dim, w);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

// compile_topology=v5e-256: the chip and its chips (v5p and v4 name TensorCores, two per chip).
std::pair<std::string, int64_t> topology(const std::string& t) {
  const auto dash = t.rfind('-');
  if (dash == std::string::npos)
    throw Error(fmt::format("compile_topology={}: expected like v5e-256", t));
  std::string chip = t.substr(0, dash);
  if (chip == "v5litepod") chip = "v5e";
  int64_t n = integer("compile_topology", t.substr(dash + 1));
  if (chip == "v5p" || chip == "v4") n /= 2;
  return {chip, n};
}

// The scenario's workload keys from MaxText's: sequence, batch, remat, MoE path, int8, dtype.
void emit_workload(YAML::Emitter& out, const std::function<std::string(const std::string&)>& take,
                   int64_t context, Writer& w) {
  if (const std::string s = take("max_target_length"); !s.empty())
    out << YAML::Key << "seq" << YAML::Value << whole("max_target_length", s);
  // Under context parallelism MaxText's per-device batch is a fraction of a sequence (one
  // sequence over the context axis: 1 / context); a scenario counts whole sequences.
  if (const std::string b = take("per_device_batch_size"); !b.empty())
    out << YAML::Key << "batch_per_chip" << YAML::Value
        << (context > 1
                ? whole(fmt::format("per_device_batch_size={} x ici_context_parallelism", b),
                        fmt::format("{}", number(b).value_or(0) * context))
                : whole("per_device_batch_size", b));
  if (const std::string p = take("remat_policy"); p == "custom") {
    // MaxText's per-tensor keys (decoder_layer_input=offload, query_proj=device, ...).
    out << YAML::Key << "remat" << YAML::Value << YAML::BeginMap << YAML::Key << "custom"
        << YAML::Value << YAML::Flow << YAML::BeginMap;
    for (int i = 0; i < kNumActivations; ++i) {
      const std::string tensor = name(static_cast<Activation>(i));
      if (const std::string where = take(tensor); !where.empty()) {
        try {
          RematPolicy::named("custom").set(static_cast<Activation>(i), where);
        } catch (const Error& e) {
          throw Error(fmt::format("{}={}: {}", tensor, where, e.what()));
        }
        out << YAML::Key << tensor << YAML::Value << where;
      }
    }
    out << YAML::EndMap << YAML::EndMap;
  } else if (!p.empty()) {
    out << YAML::Key << "remat" << YAML::Value << p;
  }
  for (const char* key : {"fused_qkv", "fused_mlp"})
    if (const std::string f = take(key); !f.empty())
      out << YAML::Key << key << YAML::Value << boolean(key, f);
  // MoE: MaxText's sparse_matmul (megablox) and capacity_factor (token dropping).
  const std::string sparse = take("sparse_matmul"), capacity = take("capacity_factor");
  if (!sparse.empty() || !capacity.empty()) {
    out << YAML::Key << "moe" << YAML::Value << YAML::Flow << YAML::BeginMap;
    if (!sparse.empty())
      out << YAML::Key << "sparse_matmul" << YAML::Value << boolean("sparse_matmul", sparse);
    if (!capacity.empty()) out << YAML::Key << "capacity_factor" << YAML::Value << capacity;
    out << YAML::EndMap;
  }
  if (const std::string q = take("quantization"); !q.empty()) {
    if (q == "int8")
      out << YAML::Key << "quantization" << YAML::Value << "int8";
    else
      w.skip("quantization", q, "only int8 (AQT) is modelled");
  }
  if (const std::string d = take("weight_dtype"); !d.empty()) {
    if (d == "float32" || d == "bfloat16")
      out << YAML::Key << "weight_dtype" << YAML::Value << (d == "float32" ? "f32" : "bf16");
    else
      w.skip("weight_dtype", d, "f32 or bf16 only");
  }
}

// The scenario's mesh from MaxText's ici_*_parallelism (an axis at -1 is left out: tpusim's mesh
// gives it what the others leave); returns the context axis's size.
int64_t emit_mesh(YAML::Emitter& out, const std::function<std::string(const std::string&)>& take) {
  std::vector<std::pair<std::string, std::string>> mesh;
  int64_t context = 1;
  for (const auto& [maxtext, ours] :
       std::vector<std::pair<std::string, std::string>>{{"ici_fsdp_parallelism", "fsdp"},
                                                        {"ici_tensor_parallelism", "tensor"},
                                                        {"ici_context_parallelism", "context"},
                                                        {"ici_expert_parallelism", "expert"}})
    if (const std::string v = take(maxtext); !v.empty() && v != "-1") mesh.push_back({ours, v});
  if (mesh.empty()) return context;
  out << YAML::Key << "mesh" << YAML::Value << YAML::Flow << YAML::BeginMap;
  for (const auto& [k, v] : mesh) {
    out << YAML::Key << k << YAML::Value << integer(k, v);
    if (k == "context") context = integer(k, v);
  }
  out << YAML::EndMap;
  return context;
}

}  // namespace

MaxTextImport import_maxtext(const std::string& model_file,
                             const std::vector<std::string>& overrides, const std::string& name,
                             const std::string& model_path) {
  Writer w;
  MaxTextImport r;
  std::map<std::string, std::string> kv = parse_overrides(overrides);
  for (const auto& [key, value] : kDefaults)
    if (!kv.count(key)) {
      kv[key] = value;
      r.defaults.push_back(fmt::format("{}={} (MaxText's default)", key, value));
    }
  auto take = [&](const std::string& key) {
    const auto it = kv.find(key);
    if (it == kv.end()) return std::string();
    std::string v = it->second;
    kv.erase(it);
    return v;
  };
  std::string model = take("model_name");
  if (!model_file.empty()) {
    const auto block = kv.find("decoder_block");
    r.model = model_yaml(model_file, model.empty() ? name : model,
                         block == kv.end() ? "" : block->second, w);
    r.defaults.insert(r.defaults.end(), w.defaults.begin(), w.defaults.end());
    model = model_path;
  } else if (model.empty()) {
    throw Error("no model: give a MaxText model config file or model_name=NAME of a tpusim model");
  } else {
    load_model(model);  // one of models/workloads, or the error lists them
  }
  const std::string topo = take("compile_topology");
  if (topo.empty())
    throw Error("compile_topology=CHIP-N is needed (e.g. v5e-256): the chip and the slice");
  const auto [chip, chips] = topology(topo);
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << name;
  out << YAML::Key << "description" << YAML::Value
      << fmt::format("imported from MaxText: {}{}", model_file.empty() ? "" : model_file + " ",
                     fmt::join(overrides, " "));
  out << YAML::Key << "chip" << YAML::Value << chip << YAML::Key << "chips" << YAML::Value << chips;
  if (const std::string s = take("compile_topology_num_slices"); !s.empty())
    out << YAML::Key << "slices" << YAML::Value << integer("compile_topology_num_slices", s);
  if (const std::string d = take("dcn_data_parallelism"); !d.empty() && d != "1" && d != "-1")
    w.skip("dcn_data_parallelism", d, "slices come from compile_topology_num_slices");
  const int64_t context = emit_mesh(out, take);
  out << YAML::Key << "model" << YAML::Value << model;
  emit_workload(out, take, context, w);
  // A hybrid model's GDN layers run MaxText's XLA path (the main build, the only one 0.2.5 has),
  // in chunks of gdn_chunk_size (base.yml L1467: 64).
  const bool hybrid = model_file.empty() ? load_model(model).gdn_layers() > 0
                                         : r.model.find("\ngdn:") != std::string::npos;
  if (const std::string block = take("decoder_block"); !block.empty())
    if (const std::string why = decoder_block_reason(block); !why.empty())
      w.skip("decoder_block", block, why);
  if (hybrid) {
    std::string chunk = take("gdn_chunk_size");
    if (chunk.empty()) {
      chunk = "64";
      r.defaults.push_back("gdn_chunk_size=64 (MaxText's default)");
    }
    out << YAML::Key << "gdn" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "build"
        << YAML::Value << "main" << YAML::Key << "chunk" << YAML::Value
        << integer("gdn_chunk_size", chunk) << YAML::EndMap;
  }
  out << YAML::EndMap;
  for (const auto& [k, v] : kv) w.skip(k, v, "not modelled");
  r.scenario = std::string(out.c_str()) + "\n";
  r.not_modelled = w.not_modelled;
  return r;
}

}  // namespace tpusim
