#include "app/scenario.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "app/compiled_step.h"
#include "app/maxtext_config.h"
#include "models/chip_loader.h"
#include "models/yaml_map.h"
#include "sim/error.h"

namespace tpusim {

namespace fs = std::filesystem;

namespace {

// XLA's --xla_tpu_scoped_vmem_limit_kib accepts [4096, VMEM - 1024] KiB (tpu_hardware.md,
// XLA-flags); the rest of VMEM is XLA's prefetch space.
constexpr int64_t kMinScopedVmemKib = 4096;
constexpr int64_t kVmemReserveBytes = int64_t{1024} << 10;
// The largest counts a scenario may give. Beyond any TPU job (the largest pods hold thousands of
// chips; MaxText's longest contexts are about a million tokens) and small enough that the step
// model's products (tokens x width x layers x bytes) stay within 64 bits.
constexpr int64_t kMaxChips = int64_t{1} << 20, kMaxSlices = int64_t{1} << 12;
constexpr int64_t kMaxTokensPerChip = int64_t{1} << 24;  // seq x batch_per_chip; seq alone too
constexpr int64_t kMaxTile = int64_t{1} << 16;           // chunk, head and block tiles

// The keys of each mapping of a scenario file, by key path ("" for the top level). `remat` is a
// policy name or {custom: {TENSOR: placement}}; load_remat checks the tensor names.
const std::map<std::string, std::vector<std::string>>& schema() {
  static const std::map<std::string, std::vector<std::string>> keys = [] {
    std::vector<std::string> measured = kMetrics;
    measured.insert(measured.end(), {"source", "attention_flops"});
    return std::map<std::string, std::vector<std::string>>{
        {"", {"name",      "description", "chip",         "chips",           "slices",
              "mesh",      "model",       "seq",          "batch_per_chip",  "remat",
              "fused_qkv", "fused_mlp",   "weight_dtype", "vocab_tiling",    "quantization",
              "gdn",       "attention",   "moe",          "scoped_vmem_kib", "compiled",
              "memory",    "measured"}},
        {"mesh", {"fsdp", "tensor", "context", "expert"}},
        {"moe", {"sparse_matmul", "capacity_factor"}},
        {"remat", {"custom"}},
        {"gdn", {"build", "chunk", "head_tile_fwd", "head_tile_bwd", "tile_n"}},
        {"attention", {"block"}},
        {"measured", measured}};
  }();
  return keys;
}

YamlMap section(const YamlMap& top, const std::string& key) {
  return top.map(key, schema().at(key));
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

// `remat: NAME` (a MaxText remat_policy) or `remat: {custom: {TENSOR: remat|device|offload}}`.
RematPolicy load_remat(const YamlMap& top) {
  const std::string& f = top.file();
  const YAML::Node r = top.node("remat");
  if (!r.IsMap()) {
    const std::string name = top.string("remat");
    try {
      return RematPolicy::named(name);
    } catch (const Error& e) {
      top.fail("remat", e.what());
    }
  }
  const YAML::Node t = section(top, "remat").node("custom");
  if (!t.IsMap())
    yaml_fail(f, t ? t : r, "remat.custom",
              "expected a mapping of tensor names to remat, device or offload");
  RematPolicy p = RematPolicy::named("custom");
  for (const auto& kv : t) {
    const std::string tensor = yaml_as<std::string>(f, kv.first, "remat.custom", "a string key");
    const std::string path = "remat.custom." + tensor;
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

// A slice is part of one host or whole hosts, and no larger than the chip's largest ICI domain
// (chips_per_host, max_slice_chips: the chip file's sources).
void check_slice_size(const YamlMap& top, const std::string& chip_name, const ChipSpec& chip,
                      int64_t chips) {
  const int64_t per_host = chip.chips_per_host;
  if (chips > chip.max_slice_chips)
    top.fail("chips", fmt::format("{} chips is more than the largest {} slice ({} chips); use "
                                  "slices: for more",
                                  chips, chip_name, chip.max_slice_chips));
  if (chips < per_host ? per_host % chips != 0 : chips % per_host != 0)
    top.fail("chips", fmt::format("{} chips is not a {} slice: a slice is a divisor of a host's {} "
                                  "chips or a multiple of it",
                                  chips, chip_name, per_host));
}

// A chip or model named by a relative .yaml path is found beside the scenario file (as a
// sweep's base is); a bare name in models/.
std::string beside_file(const Scenario& s, const std::string& path) {
  if (fs::path(path).is_absolute()) return path;
  return (fs::path(s.file).parent_path() / path).lexically_normal().string();
}
std::string beside(const Scenario& s, const std::string& name_or_path) {
  return fs::path(name_or_path).extension() == ".yaml" ? beside_file(s, name_or_path)
                                                       : name_or_path;
}

// chip, model, slice and mesh.
void load_hardware(const YamlMap& top, Scenario& s) {
  StepConfig& c = s.step;
  s.chip_name = top.string("chip");
  try {
    c.chip = load_chip(beside(s, s.chip_name));
  } catch (const Error& e) {
    top.fail("chip", e.what());
  }
  s.model_name = top.string("model");
  try {
    c.model = load_model(beside(s, s.model_name));
  } catch (const Error& e) {
    top.fail("model", e.what());
  }
  top.need("chips");
  c.chips_per_slice = top.positive("chips", 0, kMaxChips);
  check_slice_size(top, s.chip_name, c.chip, c.chips_per_slice);
  c.mesh.data = top.positive("slices", 1, kMaxSlices);
  c.mesh.fsdp = c.chips_per_slice;
  if (top.has("mesh")) {
    const YamlMap m = section(top, "mesh");
    c.mesh.tensor = m.positive("tensor", 1, kMaxChips);
    c.mesh.context = m.positive("context", 1, kMaxChips);
    c.mesh.expert = m.positive("expert", 1, kMaxChips);
    c.mesh.fsdp = m.positive(
        "fsdp", c.chips_per_slice / (c.mesh.tensor * c.mesh.context * c.mesh.expert), kMaxChips);
  }
  if (top.has("scoped_vmem_kib")) {  // --xla_tpu_scoped_vmem_limit_kib
    const int64_t kib = top.positive("scoped_vmem_kib");
    if (kib < kMinScopedVmemKib || kib > (c.chip.vmem_bytes - kVmemReserveBytes) / 1024)
      top.fail("scoped_vmem_kib",
               fmt::format("{} KiB is outside [{}, VMEM - {}] = [{}, {}] on {}", kib,
                           kMinScopedVmemKib, kVmemReserveBytes / 1024, kMinScopedVmemKib,
                           (c.chip.vmem_bytes - kVmemReserveBytes) / 1024, s.chip_name));
    c.chip.scoped_vmem_bytes = kib * 1024;
  }
}

// Sequence, batch, remat, dtypes and the kernels' knobs.
void load_workload(const YamlMap& top, StepConfig& c) {
  top.need("seq");
  top.need("batch_per_chip");
  c.seq = top.positive("seq", 0, kMaxTokensPerChip);
  c.batch_per_chip = top.positive("batch_per_chip", 0, kMaxTokensPerChip / c.seq);
  if (top.has("remat")) c.remat = load_remat(top);
  // MaxText's fused_qkv / fused_mlp: which checkpoint names the projections carry.
  if (top.has("fused_qkv")) c.fused_qkv = top.choice("fused_qkv", {"true", "false"}) == "true";
  if (top.has("fused_mlp")) c.fused_mlp = top.choice("fused_mlp", {"true", "false"}) == "true";
  if (top.has("weight_dtype"))
    c.weight_dtype =
        top.choice("weight_dtype", {"f32", "bf16"}) == "bf16" ? DType::bf16 : DType::f32;
  c.vocab_tiles = top.positive("vocab_tiling", 1, kMaxTile);
  if (top.has("quantization"))  // MaxText's quantization: int8 (AQT)
    c.int8_matmuls =
        !top.choice("quantization", {"int8"}, "int8 (AQT int8 weight matmuls)").empty();
  if (top.has("moe")) {  // MaxText's sparse_matmul and capacity_factor
    if (!c.model.is_moe())
      top.fail("moe", fmt::format("the model {} has no mixture-of-experts layers", c.model.name));
    const YamlMap e = section(top, "moe");
    if (e.has("sparse_matmul"))
      c.moe_sparse_matmul = e.choice("sparse_matmul", {"true", "false"}) == "true";
    if (e.has("capacity_factor")) c.capacity_factor = e.as<double>("capacity_factor", "a number");
    if (!std::isfinite(c.capacity_factor) || c.capacity_factor > 64)
      e.fail("capacity_factor", "expected a number up to 64 (-1: no dropping)");
  }
  if (top.has("gdn") && c.model.gdn_layers() == 0)
    top.fail("gdn", fmt::format("the model {} has no GDN layers for these settings to apply to",
                                c.model.name));
  if (top.has("gdn")) {
    const YamlMap g = section(top, "gdn");
    if (g.has("build")) {
      const std::string build = g.string("build");
      try {
        c.gdn.build = kernels::gdn::parse_build(build);
      } catch (const Error& e) {
        g.fail("build", e.what());
      }
    }
    c.gdn_chunk = g.positive("chunk", c.gdn_chunk, kMaxTile);
    c.gdn.head_tile_fwd = g.positive("head_tile_fwd", c.gdn.head_tile_fwd, kMaxTile);
    c.gdn.head_tile_bwd = g.positive("head_tile_bwd", c.gdn.head_tile_bwd, kMaxTile);
    c.gdn.tile_n = g.positive("tile_n", c.gdn.tile_n, kMaxTile);
  } else if (c.model.gdn_layers() > 0) {
    top.fail("gdn",
             "the model has GDN layers: say which build runs them (gdn: {build: "
             "main|scan|heads|ladder})");
  }
  if (top.has("attention"))
    c.attention_block = section(top, "attention").positive("block", c.attention_block, kMaxTile);
}

void load_measured(const YamlMap& top, Scenario& s) {
  const YamlMap m = section(top, "measured");
  if (!m.has("source")) m.fail("source", "measured values need a source");
  s.measured_source = m.string("source");
  for (const std::string& k : kMetrics)
    if (m.has(k)) s.measured[k] = m.positive_number(k);
  if (m.has("attention_flops"))
    s.measured_attention = m.choice("attention_flops", {"causal", "full"},
                                    "causal (MaxText since mid-2025) or full (before)") == "full"
                               ? AttentionCount::full
                               : AttentionCount::causal;
}

// `compiled: FILE` (beside the scenario) and `memory: model|compiler`. The compiled step must be
// of this scenario's configuration: its MaxText command line is compared with the scenario's.
void load_compiled(const YamlMap& top, Scenario& s) {
  if (top.has("compiled")) {
    try {
      s.compiled = load_compiled_step(beside_file(s, top.string("compiled")));
    } catch (const Error& e) {
      top.fail("compiled", e.what());
    }
    std::vector<std::string> ours;
    try {
      ours = maxtext_command_line(s.step);
    } catch (const Error& e) {  // a step MaxText's command line cannot say
      top.fail("compiled", e.what());
    }
    if (s.compiled->maxtext_args != ours) {
      const auto [a, b] = std::mismatch(ours.begin(), ours.end(), s.compiled->maxtext_args.begin(),
                                        s.compiled->maxtext_args.end());
      top.fail("compiled",
               fmt::format("{} was compiled from another configuration ({} there, {} here); "
                           "recompile with scripts/{}",
                           s.compiled->file, b == s.compiled->maxtext_args.end() ? "nothing" : *b,
                           a == ours.end() ? "nothing" : *a,
                           s.compiled->file.find("/steps/") != std::string::npos
                               ? "compile_steps.sh"
                               : "compile_scenarios.sh"));
    }
  }
  s.memory_from_compiler =
      top.has("memory") &&
      top.choice("memory", {"model", "compiler"}, "model (tpusim's) or compiler") == "compiler";
  if (s.memory_from_compiler && !s.compiled)
    top.fail("memory", "memory: compiler needs the compiled step (compiled: FILE)");
}

}  // namespace

void add_compiled(const Scenario& s, StepPrediction& p) {
  if (s.compiled) apply_compiled(*s.compiled, s.memory_from_compiler, p);
}

void add_compiled_program(const Scenario& s, StepPrediction& p) {
  if (s.compiled && !s.compiled->hlo.empty())
    p.compiled_program_s = simulate_compiled_program(*s.compiled, s.step.chip);
}

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
  return it != schema().end() &&
         std::find(it->second.begin(), it->second.end(), key) != it->second.end();
}

Scenario load_scenario(const std::string& f, LoadChecks checks) {
  return load_scenario(yaml_load_file(f), f, checks);
}

StepPrediction predict_scenario(const YAML::Node& root, const std::string& file) {
  const Scenario s = load_scenario(root, file, LoadChecks::file);
  try {
    StepPrediction p = predict_step(s.step);
    add_compiled(s, p);
    add_compiled_program(s, p);
    return p;
  } catch (const ConfigError&) {
    load_scenario(root, file);  // the same check, naming the file's line and key
    throw;
  }
}

Scenario load_scenario(const YAML::Node& root, const std::string& f, LoadChecks checks) {
  const YamlMap top(f, root, "", schema().at(""));
  Scenario s;
  s.file = f;
  s.name = top.string("name", fs::path(f).stem().string());
  s.description = top.string("description", "");
  load_hardware(top, s);
  load_workload(top, s.step);
  if (top.has("measured")) load_measured(top, s);
  if (top.has("compiled") || top.has("memory")) load_compiled(top, s);
  try {
    if (checks == LoadChecks::kernels)
      check(s.step);
    else
      check_config(s.step);
  } catch (const ConfigError& e) {
    // A kernel over its VMEM limit is the limit's fault when the scenario lowered it.
    const std::string key = e.over_vmem && top.has("scoped_vmem_kib") ? "scoped_vmem_kib" : e.key;
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
