#include "app/scenario.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "models/chip_loader.h"
#include "models/yaml_errors.h"
#include "sim/error.h"

namespace tpusim {

namespace fs = std::filesystem;

namespace {

void only_keys(const std::string& f, const YAML::Node& n, const std::string& path,
               const std::set<std::string>& keys);

// The keys of each mapping of a scenario file, by key path ("" for the top level). `remat` is a
// policy name or {custom: {TENSOR: placement}}; load_remat checks the tensor names.
const std::map<std::string, std::set<std::string>>& schema() {
  static const std::map<std::string, std::set<std::string>> keys = [] {
    std::set<std::string> measured(kMetrics.begin(), kMetrics.end());
    measured.insert({"source", "attention_flops"});
    return std::map<std::string, std::set<std::string>>{
        {"",
         {"name", "description", "chip", "chips", "slices", "mesh", "model", "seq",
          "batch_per_chip", "remat", "weight_dtype", "vocab_tiling", "quantization", "gdn",
          "attention", "scoped_vmem_kib", "measured"}},
        {"mesh", {"fsdp", "tensor", "context"}},
        {"remat", {"custom"}},
        {"gdn", {"build", "chunk", "head_tile_fwd", "head_tile_bwd", "tile_n"}},
        {"attention", {"block"}},
        {"measured", measured}};
  }();
  return keys;
}

void only_keys(const std::string& f, const YAML::Node& n, const std::string& path) {
  only_keys(f, n, path, schema().at(path));
}

void only_keys(const std::string& f, const YAML::Node& n, const std::string& path,
               const std::set<std::string>& keys) {
  if (!n.IsMap()) yaml_fail(f, n, path, "expected a mapping");
  for (const auto& kv : n) {
    const std::string k = kv.first.as<std::string>();
    if (!keys.count(k)) {
      std::string known;
      for (const auto& x : keys) known += (known.empty() ? "" : ", ") + x;
      yaml_fail(f, kv.first, path.empty() ? k : path + "." + k,
                fmt::format("unknown key (known: {})", known));
    }
  }
}

// The node of a dotted key path, or of its longest prefix present in the file (the root for none),
// so that an error about a key the file leaves at its default points where it would be written.
YAML::Node deepest_node(const YAML::Node& root, const std::string& key_path) {
  // yaml-cpp's operator= and non-const operator[] write into the tree: reset() and a const
  // lookup only move the handle.
  YAML::Node at = root;
  std::string rest = key_path;
  while (!rest.empty()) {
    const size_t dot = rest.find('.');
    const YAML::Node next = std::as_const(at)[rest.substr(0, dot)];
    if (!next) break;
    at.reset(next);
    rest = dot == std::string::npos ? "" : rest.substr(dot + 1);
  }
  return at;
}

double positive_number(const std::string& f, const YAML::Node& n, const std::string& path) {
  const auto v = yaml_as<double>(f, n, path, "a number");
  if (!(v > 0) || !std::isfinite(v))
    yaml_fail(f, n, path, fmt::format("must be a positive finite number, got {}", n.Scalar()));
  return v;
}

int64_t positive(const std::string& f, const YAML::Node& n, const std::string& path) {
  const auto v = yaml_as<int64_t>(f, n, path, "an integer");
  if (v < 1) yaml_fail(f, n, path, fmt::format("must be a positive integer, got {}", v));
  return v;
}

// `remat: NAME` (a MaxText remat_policy) or `remat: {custom: {TENSOR: remat|device|offload}}`.
RematPolicy load_remat(const std::string& f, const YAML::Node& r) {
  if (!r.IsMap()) {
    const auto name = yaml_as<std::string>(f, r, "remat", "a string");
    try {
      return RematPolicy::named(name);
    } catch (const Error& e) {
      yaml_fail(f, r, "remat", e.what());
    }
  }
  only_keys(f, r, "remat");
  const YAML::Node t = r["custom"];
  if (!t.IsMap())
    yaml_fail(f, t, "remat.custom",
              "expected a mapping of tensor names to remat, device or offload");
  RematPolicy p = RematPolicy::named("custom");
  for (const auto& kv : t) {
    const std::string tensor = kv.first.as<std::string>(), path = "remat.custom." + tensor;
    Activation a{};
    try {
      a = parse_activation(tensor);
    } catch (const Error& e) {
      yaml_fail(f, kv.first, path, e.what());
    }
    const auto placement = yaml_as<std::string>(f, kv.second, path, "a string");
    try {
      p.set(a, placement);
    } catch (const Error& e) {
      yaml_fail(f, kv.second, path, e.what());
    }
  }
  return p;
}

}  // namespace

bool is_scenario_key(const std::string& path) {
  const size_t dot = path.rfind('.');
  const std::string parent = dot == std::string::npos ? "" : path.substr(0, dot),
                    key = dot == std::string::npos ? path : path.substr(dot + 1);
  if (parent == "remat.custom") {
    try {
      parse_activation(key);
      return true;
    } catch (const Error&) {
      return false;
    }
  }
  const auto it = schema().find(parent);
  return it != schema().end() && it->second.count(key);
}

Scenario load_scenario(const std::string& f) { return load_scenario(yaml_load_file(f), f); }

Scenario load_scenario(const YAML::Node& root, const std::string& f) {
  only_keys(f, root, "");
  auto need = [&](const char* key) {
    if (!root[key]) yaml_fail(f, root, key, "missing");
    return root[key];
  };
  Scenario s;
  s.file = f;
  s.name = root["name"] ? yaml_as<std::string>(f, root["name"], "name", "a string")
                        : fs::path(f).stem().string();
  if (root["description"])
    s.description = yaml_as<std::string>(f, root["description"], "description", "a string");
  s.chip_name = yaml_as<std::string>(f, need("chip"), "chip", "a string");
  try {
    s.step.chip = load_chip(s.chip_name);
  } catch (const Error& e) {
    yaml_fail(f, root["chip"], "chip", e.what());
  }
  s.model_name = yaml_as<std::string>(f, need("model"), "model", "a string");
  try {
    s.step.model = load_model(s.model_name);
  } catch (const Error& e) {
    yaml_fail(f, root["model"], "model", e.what());
  }
  StepConfig& c = s.step;
  c.chips_per_slice = positive(f, need("chips"), "chips");
  c.mesh.data = root["slices"] ? positive(f, root["slices"], "slices") : 1;
  c.seq = positive(f, need("seq"), "seq");
  c.batch_per_chip = positive(f, need("batch_per_chip"), "batch_per_chip");
  if (const YAML::Node r = root["remat"]) c.remat = load_remat(f, r);
  if (const YAML::Node w = root["weight_dtype"]) {
    const std::string t = yaml_as<std::string>(f, w, "weight_dtype", "a string");
    if (t != "f32" && t != "bf16") yaml_fail(f, w, "weight_dtype", "expected f32 or bf16");
    c.weight_dtype = t == "bf16" ? DType::bf16 : DType::f32;
  }
  if (const YAML::Node v = root["vocab_tiling"]) c.vocab_tiles = positive(f, v, "vocab_tiling");
  if (const YAML::Node q = root["quantization"]) {  // MaxText's quantization: int8 (AQT)
    if (yaml_as<std::string>(f, q, "quantization", "a string") != "int8")
      yaml_fail(f, q, "quantization", "expected int8 (AQT int8 weight matmuls)");
    c.int8_matmuls = true;
  }
  c.mesh.fsdp = c.chips_per_slice;
  if (const YAML::Node m = root["mesh"]) {
    only_keys(f, m, "mesh");
    c.mesh.tensor = m["tensor"] ? positive(f, m["tensor"], "mesh.tensor") : 1;
    c.mesh.context = m["context"] ? positive(f, m["context"], "mesh.context") : 1;
    c.mesh.fsdp = m["fsdp"] ? positive(f, m["fsdp"], "mesh.fsdp")
                            : c.chips_per_slice / (c.mesh.tensor * c.mesh.context);
  }
  if (const YAML::Node g = root["gdn"]) {
    only_keys(f, g, "gdn");
    if (g["build"]) {
      const auto build = yaml_as<std::string>(f, g["build"], "gdn.build", "a string");
      try {
        c.gdn.build = kernels::gdn::parse_build(build);
      } catch (const Error& e) {
        yaml_fail(f, g["build"], "gdn.build", e.what());
      }
    }
    if (g["chunk"]) c.gdn_chunk = positive(f, g["chunk"], "gdn.chunk");
    if (g["head_tile_fwd"])
      c.gdn.head_tile_fwd = positive(f, g["head_tile_fwd"], "gdn.head_tile_fwd");
    if (g["head_tile_bwd"])
      c.gdn.head_tile_bwd = positive(f, g["head_tile_bwd"], "gdn.head_tile_bwd");
    if (g["tile_n"]) c.gdn.tile_n = positive(f, g["tile_n"], "gdn.tile_n");
  } else if (c.model.gdn_layers() > 0) {
    yaml_fail(f, root, "gdn",
              "the model has GDN layers: say which build runs them (gdn: {build: "
              "main|scan|heads|ladder})");
  }
  if (const YAML::Node v = root["scoped_vmem_kib"]) {  // --xla_tpu_scoped_vmem_limit_kib
    const int64_t kib = positive(f, v, "scoped_vmem_kib");
    if (kib < 4096 || kib * 1024 > c.chip.vmem_bytes - (1 << 20))
      yaml_fail(f, v, "scoped_vmem_kib",
                fmt::format("{} KiB is outside [4096, VMEM - 1024] = [4096, {}] on {}", kib,
                            c.chip.vmem_bytes / 1024 - 1024, s.chip_name));
    c.chip.scoped_vmem_bytes = kib * 1024;
  }
  if (const YAML::Node a = root["attention"]) {
    only_keys(f, a, "attention");
    if (a["block"]) c.attention_block = positive(f, a["block"], "attention.block");
  }
  if (const YAML::Node m = root["measured"]) {
    only_keys(f, m, "measured");
    if (!m["source"]) yaml_fail(f, m, "measured.source", "measured values need a source");
    s.measured_source = yaml_as<std::string>(f, m["source"], "measured.source", "a string");
    for (const std::string& k : kMetrics)
      if (m[k]) s.measured[k] = positive_number(f, m[k], "measured." + k);
    if (m["attention_flops"]) {
      const std::string a =
          yaml_as<std::string>(f, m["attention_flops"], "measured.attention_flops", "a string");
      if (a != "causal" && a != "full")
        yaml_fail(f, m["attention_flops"], "measured.attention_flops",
                  "expected causal (MaxText since mid-2025) or full (before)");
      s.measured_attention = a == "full" ? AttentionCount::full : AttentionCount::causal;
    }
  }
  try {
    check(c);
  } catch (const ConfigError& e) {
    // A kernel over its VMEM limit is the limit's fault when the scenario lowered it.
    const std::string key = e.over_vmem && root["scoped_vmem_kib"] ? "scoped_vmem_kib" : e.key;
    yaml_fail(f, deepest_node(root, key), key, e.what());
  }
  return s;
}

bool is_micro_benchmark_table(const std::string& file) {
  const YAML::Node root = yaml_load_file(file);
  return root.IsMap() && root["rows"];
}

std::vector<std::string> scenario_files(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    if (fs::is_directory(p)) {
      for (const auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file() && e.path().extension() == ".yaml" &&
            !is_micro_benchmark_table(e.path().string()))
          files.push_back(e.path().string());
    } else if (fs::exists(p)) {
      files.push_back(p);
    } else {
      throw Error(fmt::format("{}: no such scenario file or folder", p));
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

double metric(const StepPrediction& p, const std::string& m) {
  if (m == "step_time_s") return p.step_time_s;
  if (m == "tokens_per_s_per_chip") return p.tokens_per_s_per_chip;
  if (m == "tflops_per_chip") return p.tflops_per_s_per_chip;
  if (m == "mfu") return p.mfu;
  if (m == "peak_hbm_bytes") return static_cast<double>(p.peak_hbm_bytes);
  throw Error(fmt::format("unknown metric '{}'", m));
}

}  // namespace tpusim
