#include "app/collective_fit.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "models/chip_loader.h"
#include "models/yaml_map.h"
#include "sim/error.h"
#include "sim/timing/collectives.h"

namespace tpusim {

CollectiveTable load_collective_table(const std::string& file) {
  const YamlMap top(file, yaml_load_file(file), "", {"source", "chip", "axis", "rows"});
  CollectiveTable t;
  t.file = file;
  t.source = top.string("source");
  t.chip = top.string("chip");
  const YamlMap a = top.map("axis", {"size", "wraparound", "torus_dims"});
  t.axis = {"axis", a.positive("size"), a.as<bool>("wraparound", "true or false"),
            static_cast<int>(a.positive("torus_dims")), false};
  for (const YamlMap& r : top.list("rows", {"what", "bytes", "measured_s"}, 2))
    t.rows.push_back({r.string("what"), r.positive("bytes"), r.positive_number("measured_s")});
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
