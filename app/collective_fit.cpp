#include "app/collective_fit.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "models/chip_loader.h"
#include "models/yaml_errors.h"
#include "sim/error.h"
#include "sim/timing/collectives.h"

namespace tpusim {

CollectiveTable load_collective_table(const std::string& file) {
  const YAML::Node root = yaml_load_file(file);
  if (!root.IsMap()) yaml_fail(file, root, "", "expected a mapping with source, chip, axis, rows");
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    if (key != "source" && key != "chip" && key != "axis" && key != "rows")
      yaml_fail(file, kv.first, key, "unknown key (expected source, chip, axis, rows)");
  }
  for (const char* key : {"source", "chip", "axis", "rows"})
    if (!root[key]) yaml_fail(file, root, key, "missing");
  CollectiveTable t;
  t.file = file;
  t.source = yaml_as<std::string>(file, root["source"], "source", "a string");
  t.chip = yaml_as<std::string>(file, root["chip"], "chip", "a string");
  const YAML::Node a = root["axis"];
  for (const auto& kv : a)
    if (const std::string k = kv.first.as<std::string>();
        k != "size" && k != "wraparound" && k != "torus_dims")
      yaml_fail(file, kv.first, "axis." + k, "unknown key (expected size, wraparound, torus_dims)");
  for (const char* key : {"size", "wraparound", "torus_dims"})
    if (!a[key]) yaml_fail(file, a, std::string("axis.") + key, "missing");
  t.axis = {"axis", yaml_as<int64_t>(file, a["size"], "axis.size", "an integer"),
            yaml_as<bool>(file, a["wraparound"], "axis.wraparound", "true or false"),
            yaml_as<int>(file, a["torus_dims"], "axis.torus_dims", "an integer"), false};
  const YAML::Node rows = root["rows"];
  if (!rows.IsSequence() || rows.size() < 2)
    yaml_fail(file, rows, "rows", "expected a list of at least two measurements");
  for (size_t i = 0; i < rows.size(); ++i) {
    const YAML::Node r = rows[i];
    const std::string at = fmt::format("rows[{}]", i);
    for (const auto& kv : r)
      if (const std::string k = kv.first.as<std::string>();
          k != "what" && k != "bytes" && k != "measured_s")
        yaml_fail(file, kv.first, at + "." + k, "unknown key (expected what, bytes, measured_s)");
    for (const char* key : {"what", "bytes", "measured_s"})
      if (!r[key]) yaml_fail(file, r, at + "." + key, "missing");
    t.rows.push_back({yaml_as<std::string>(file, r["what"], at + ".what", "a string"),
                      yaml_as<int64_t>(file, r["bytes"], at + ".bytes", "an integer"),
                      yaml_as<double>(file, r["measured_s"], at + ".measured_s", "a number")});
  }
  return t;
}

void predict(const ChipSpec& chip, CollectiveTable& table) {
  for (CollectiveRow& r : table.rows)
    r.predicted_s = collective_seconds(chip, {CollectiveKind::all_gather, r.bytes, table.axis});
}

ChipSpec with_constants(ChipSpec chip, const CollectiveConstants& c) {
  chip.ici_efficiency = c.ici_efficiency;
  chip.ici_hop_latency_s = c.ici_hop_latency_s;
  return chip;
}

CollectiveConstants fit_collective_constants(const ChipSpec& chip, const CollectiveTable& table) {
  // t = x * bandwidth_term + L * hops, x = 1 / efficiency: both terms from the engine's own ring
  // model, evaluated at (efficiency 1, latency 0) and (efficiency 1, latency 1 s).
  double s_aa = 0, s_ah = 0, s_hh = 0, s_at = 0, s_ht = 0;
  for (const CollectiveRow& r : table.rows) {
    const Collective c{CollectiveKind::all_gather, r.bytes, table.axis};
    const double a =
        collective_seconds(with_constants(chip, CollectiveConstants{1, 0}), c) / r.measured_s;
    const double h =
        collective_seconds(with_constants(chip, CollectiveConstants{1, 1}), c) / r.measured_s - a;
    s_aa += a * a, s_ah += a * h, s_hh += h * h, s_at += a, s_ht += h;  // target t / t = 1
  }
  const double det = s_aa * s_hh - s_ah * s_ah;
  if (det <= 0) throw Error(table.file + ": the rows do not determine both collective constants");
  const double x = (s_at * s_hh - s_ah * s_ht) / det, latency = (s_aa * s_ht - s_ah * s_at) / det;
  if (x < 1 || latency < 0)
    throw Error(
        fmt::format("{}: the fit gives efficiency {:.3f} and hop latency {:.3g} s, "
                    "outside (0, 1] and [0, inf)",
                    table.file, 1 / x, latency));
  return {1 / x, latency};
}

std::string collective_calibration_markdown(const CollectiveConstants& c,
                                            const CollectiveTable& table) {
  std::string out = "## Engine constants, fitted on the v5e AllGather measurement\n\n";
  out += fmt::format("Data: `{}` ({}); an AllGather over {} chips, {}wraparound.\n\n",
                     repo_relative(table.file), table.source, table.axis.size,
                     table.axis.wraparound ? "" : "no ");
  out +=
      "Fit: the ring model's time is linear in 1 / efficiency and in the hop latency; least "
      "squares\non the relative error, exact for two rows. The constants are shared by every "
      "chip (each\nchip keeps its own link bandwidth).\n\n";
  out += "| constant | fitted value | meaning |\n|---|---|---|\n";
  out += fmt::format(
      "| `ici_efficiency` | {:.4f} | achieved fraction of the links' bandwidth in a ring "
      "collective |\n",
      c.ici_efficiency);
  out += fmt::format(
      "| `ici_hop_latency_s` | {:.3f} us | fixed cost per hop of a collective (the book assumed "
      "~1 us) |\n\n",
      c.ici_hop_latency_s * 1e6);
  out += "| collective | measured | predicted | error |\n|---|---|---|---|\n";
  for (const CollectiveRow& r : table.rows)
    out += fmt::format("| {} ({} B) | {:.1f} us | {:.1f} us | {:+.1f}% |\n", r.what, r.bytes,
                       r.measured_s * 1e6, r.predicted_s * 1e6, r.error_pct());
  return out + "\n";
}

std::vector<CalibratedValue> calibrated_values(const CollectiveConstants& c,
                                               const CollectiveTable& table) {
  const std::string how = fmt::format(
      "fitted by `tpusim calibrate` on {} ({} v5e AllGather timings, tpu_hardware.md section 3)",
      std::filesystem::path(table.file).filename().string(), table.rows.size());
  return {{"ici_efficiency", c.ici_efficiency, false, how},
          {"ici_hop_latency_s", c.ici_hop_latency_s, false, how}};
}

}  // namespace tpusim
