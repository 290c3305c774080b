#include "models/chip_loader.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <set>

#include "models/yaml_map.h"
#include "sim/error.h"

#ifndef TPUSIM_MODELS_DIR
#define TPUSIM_MODELS_DIR "models"
#endif

namespace tpusim {
namespace {

namespace fs = std::filesystem;
using Setter = std::function<void(ChipSpec&, const std::string& file, const YAML::Node&,
                                  const std::string& key)>;

// The values a parameter may take: above (or from) `min`, up to `max`.
struct Range {
  double min = 0;
  bool min_allowed = false;  // min itself is a valid value
  double max = std::numeric_limits<double>::infinity();
};
// Physical ceilings. A value beyond one describes no chip that could be built (and would overflow
// the engine's cycle arithmetic), so it is a typing mistake rather than a design to explore.
constexpr double kMaxClockHz = 1e11;        // 100 GHz: two orders above any clocked accelerator
constexpr double kMaxRate = 1e18;           // op/s or byte/s of one chip: 1000x a v5p
constexpr double kMaxPerCycle = 1e6;        // operations per cycle of one unit
constexpr double kMaxUnits = 4096;          // cores, MXUs, queues, chips per host
constexpr double kMaxBytes = 0x1p44;        // 16 TiB of memory on one chip
constexpr double kMaxCycles = 1e9;          // a fixed cost of a second at 1 GHz
constexpr double kMaxSeconds = 1;           // a fixed latency of a whole second
constexpr double kMaxSliceChips = 1 << 20;  // a million chips in one ICI domain

constexpr Range kPositive{0, false, kMaxRate};
constexpr Range kUnits{0, false, kMaxUnits};
constexpr Range kPerCycle{0, false, kMaxPerCycle};
constexpr Range kBytes{0, false, kMaxBytes};
constexpr Range kCycles{0, true, kMaxCycles};
constexpr Range kSeconds{0, true, kMaxSeconds};

template <typename T>
Setter field(T ChipSpec::*member, const char* type_name, Range r = kPositive) {
  return [member, type_name, r](ChipSpec& c, const std::string& file, const YAML::Node& n,
                                const std::string& key) {
    const T v = yaml_as<T>(file, n, key, type_name);
    const double x = static_cast<double>(v);
    if (!std::isfinite(x))
      yaml_fail(file, n, key, fmt::format("{} is not a finite number", n.Scalar()));
    if (!(r.min_allowed ? x >= r.min : x > r.min) || !(x <= r.max))
      yaml_fail(file, n, key,
                fmt::format("{} is out of range: must be {} {:g}{}", n.Scalar(),
                            r.min_allowed ? "at least" : "more than", r.min,
                            fmt::format(" and at most {:g}", r.max)));
    c.*member = v;
  };
}

Setter megacore_split() {
  return [](ChipSpec& c, const std::string& file, const YAML::Node& n, const std::string& key) {
    const std::string v = n.IsScalar() ? n.Scalar() : "";
    if (v == "first_divisible_parallel")
      c.megacore_split = MegacoreSplit::first_divisible_parallel;
    else if (v == "leading_parallel")
      c.megacore_split = MegacoreSplit::leading_parallel;
    else
      yaml_fail(
          file, n, key,
          fmt::format("'{}' is not a split rule: first_divisible_parallel or leading_parallel", v));
  };
}

Setter synchronous_weight_gather() {
  return [](ChipSpec& c, const std::string& file, const YAML::Node& n, const std::string& key) {
    const std::string v = n.IsScalar() ? n.Scalar() : "";
    if (v != "routed" && v != "ring")
      yaml_fail(file, n, key, fmt::format("'{}' is not a gather form: routed or ring", v));
    c.routed_weight_gathers = v == "routed";
  };
}

const std::map<std::string, Setter>& fields() {
  static const std::map<std::string, Setter> f = {
      {"megacore_split", megacore_split()},
      {"synchronous_weight_gather", synchronous_weight_gather()},
      {"async_collective_setup_cycles_per_device",
       field(&ChipSpec::async_collective_setup_cycles_per_device, "an integer", kCycles)},
      {"clock_hz", field(&ChipSpec::clock_hz, "a number", {0, false, kMaxClockHz})},
      {"tensorcores", field(&ChipSpec::tensorcores, "an integer", kUnits)},
      {"mxus_per_core", field(&ChipSpec::mxus_per_core, "an integer", kUnits)},
      {"mxu_dim", field(&ChipSpec::mxu_dim, "an integer", {8, true, kMaxUnits})},
      {"mxu_fill_drain_per_dim",
       field(&ChipSpec::mxu_fill_drain_per_dim, "a number", {0, true, kMaxPerCycle})},
      {"peak_bf16_flops", field(&ChipSpec::peak_bf16_flops, "a number")},
      {"peak_int8_ops", field(&ChipSpec::peak_int8_ops, "a number")},
      {"vpu_simple_per_cycle", field(&ChipSpec::vpu_simple_per_cycle, "a number", kPerCycle)},
      {"vpu_divide_per_cycle", field(&ChipSpec::vpu_divide_per_cycle, "a number", kPerCycle)},
      {"vpu_transcendental_per_cycle",
       field(&ChipSpec::vpu_transcendental_per_cycle, "a number", kPerCycle)},
      {"vpu_cross_lane_per_cycle",
       field(&ChipSpec::vpu_cross_lane_per_cycle, "a number", kPerCycle)},
      {"vector_rate_scale", field(&ChipSpec::vector_rate_scale, "a number", kPerCycle)},
      {"vpu_latency_cycles", field(&ChipSpec::vpu_latency_cycles, "an integer", kCycles)},
      {"xla_row_solve_step_cycles",
       field(&ChipSpec::xla_row_solve_step_cycles, "an integer", kCycles)},
      {"xla_row_solve_step_scale",
       field(&ChipSpec::xla_row_solve_step_scale, "a number", {0, false, kMaxPerCycle})},
      {"vpu_cast_ops_per_vreg",
       field(&ChipSpec::vpu_cast_ops_per_vreg, "a number", {1, true, kMaxPerCycle})},
      {"vmem_bytes", field(&ChipSpec::vmem_bytes, "an integer", kBytes)},
      {"scoped_vmem_bytes", field(&ChipSpec::scoped_vmem_bytes, "an integer", kBytes)},
      {"hbm_bytes", field(&ChipSpec::hbm_bytes, "an integer", kBytes)},
      {"hbm_bytes_per_s", field(&ChipSpec::hbm_bytes_per_s, "a number")},
      {"hbm_efficiency", field(&ChipSpec::hbm_efficiency, "a number", {0, false, 1})},
      {"dma_queues", field(&ChipSpec::dma_queues, "an integer", kUnits)},
      {"dma_latency_cycles", field(&ChipSpec::dma_latency_cycles, "an integer", kCycles)},
      {"grid_step_overhead_cycles",
       field(&ChipSpec::grid_step_overhead_cycles, "an integer", kCycles)},
      {"while_loop_overhead_cycles",
       field(&ChipSpec::while_loop_overhead_cycles, "an integer", kCycles)},
      {"host_dispatch_s", field(&ChipSpec::host_dispatch_s, "a number", kSeconds)},
      {"ici_dims", field(&ChipSpec::ici_dims, "an integer", {2, true, 3})},
      {"ici_wraparound_chips",
       field(&ChipSpec::ici_wraparound_chips, "an integer", {0, false, kMaxSliceChips})},
      {"ici_link_bytes_per_s", field(&ChipSpec::ici_link_bytes_per_s, "a number")},
      {"ici_hop_latency_s", field(&ChipSpec::ici_hop_latency_s, "a number", kSeconds)},
      {"ici_efficiency", field(&ChipSpec::ici_efficiency, "a number", {0, false, 1})},
      {"dcn_bytes_per_s_per_chip", field(&ChipSpec::dcn_bytes_per_s_per_chip, "a number")},
      {"dcn_slice_latency_s", field(&ChipSpec::dcn_slice_latency_s, "a number", kSeconds)},
      {"host_link_bytes_per_s", field(&ChipSpec::host_link_bytes_per_s, "a number")},
      {"pinned_host_bytes", field(&ChipSpec::pinned_host_bytes, "an integer", kBytes)},
      {"chips_per_host", field(&ChipSpec::chips_per_host, "an integer", kUnits)},
      {"max_slice_chips",
       field(&ChipSpec::max_slice_chips, "an integer", {0, false, kMaxSliceChips})},
  };
  return f;
}

void read_file(ChipSpec& c, const std::string& file, std::set<std::string>& seen, bool chip_file) {
  std::vector<std::string> known = {"name"};
  for (const auto& [k, _] : fields()) known.push_back(k);
  const YamlMap top(file, yaml_load_file(file), "", known, "chip parameter");
  for (const auto& kv : top.node()) {
    const std::string key = kv.first.as<std::string>();  // a string: YamlMap checked it
    if (key == "name") {
      if (!chip_file) top.fail(key, "the chip's name belongs in its own file");
      c.name = top.string(key);
      continue;
    }
    const YamlMap entry =
        top.map(key, {"value", "source", "derived", "calibrated", "assumed"}, "field");
    std::string provenance;
    for (const auto& p : entry.node()) {
      const std::string pk = p.first.as<std::string>();
      if (pk == "value") continue;
      if (!provenance.empty())
        yaml_fail(file, p.first, key + "." + pk, "a value has exactly one provenance");
      provenance = pk + ": " + entry.string(pk);
    }
    if (provenance.empty())
      top.fail(key, "missing provenance: add source, derived, calibrated or assumed");
    if (!seen.insert(key).second)
      yaml_fail(file, kv.first, key, "set twice (chip file and shared.yaml)");
    fields().at(key)(c, file, entry.need("value"), key + ".value");
    c.provenance[key] = provenance;
    c.value_text[key] = entry.need("value").Scalar();
  }
}

}  // namespace

std::string models_dir() {
  if (const char* env = std::getenv("TPUSIM_MODELS_DIR")) return env;
  return TPUSIM_MODELS_DIR;
}

std::string repo_relative(const std::string& path) {
  return fs::relative(path, fs::path(models_dir()).parent_path()).string();
}

std::string repo_path(const std::string& relative) {
  return (fs::path(models_dir()).parent_path() / relative).string();
}

std::vector<std::string> known_chips() {
  std::vector<std::string> names;
  const fs::path dir = fs::path(models_dir()) / "chips";
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".yaml" && e.path().stem() != "shared")
        names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

bool is_bare_name(const std::string& name) {
  return !name.empty() && name[0] != '.' &&
         std::all_of(name.begin(), name.end(), [](unsigned char c) {
           return std::isalnum(c) || c == '.' || c == '_' || c == '-';
         });
}

std::string models_file(const std::string& name_or_path, const std::string& folder,
                        const std::string& noun, const std::vector<std::string>& known) {
  if (fs::path(name_or_path).extension() == ".yaml") return name_or_path;
  const fs::path file = fs::path(models_dir()) / folder / (name_or_path + ".yaml");
  std::error_code ec;  // a name too long for the filesystem is just an unknown name
  if (!is_bare_name(name_or_path) ||
      std::find(known.begin(), known.end(), name_or_path) == known.end() ||
      !fs::is_regular_file(file, ec)) {
    std::string list;
    for (const auto& n : known) list += (list.empty() ? "" : ", ") + n;
    throw Error(fmt::format("unknown {} '{}' (known {}s: {}; or a path to a .yaml file)", noun,
                            shortened(name_or_path), noun, list));
  }
  return file.string();
}

ChipSpec load_chip(const std::string& name_or_path) {
  const fs::path chips = fs::path(models_dir()) / "chips";
  const fs::path file = models_file(name_or_path, "chips", "chip", known_chips());
  ChipSpec c;
  std::set<std::string> seen;
  read_file(c, file.string(), seen, true);
  read_file(c, (chips / "shared.yaml").string(), seen, false);
  for (const auto& [key, _] : fields())
    if (!seen.count(key))
      throw Error(fmt::format("{}: missing chip parameter '{}'", file.string(), key));
  if (c.name.empty()) throw Error(fmt::format("{}: missing 'name'", file.string()));
  c.mxu_fill_drain_cycles = c.fill_drain_cycles_from_dim();
  if (c.scoped_vmem_bytes > c.vmem_bytes)
    throw Error(fmt::format("{}: scoped_vmem_bytes {} is more than vmem_bytes {}", file.string(),
                            c.scoped_vmem_bytes, c.vmem_bytes));
  return c;
}

}  // namespace tpusim
