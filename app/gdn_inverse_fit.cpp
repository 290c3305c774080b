#include "app/gdn_inverse_fit.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "app/report.h"
#include "kernels/gdn/layer.h"
#include "models/chip_loader.h"
#include "models/yaml_map.h"
#include "sim/error.h"
#include "sim/timing/engine.h"

namespace tpusim {
namespace {

// (forward, backward) seconds of one layer core.
std::pair<double, double> passes(const ChipSpec& chip, const kernels::gdn::GdnShape& s,
                                 kernels::gdn::Build b) {
  const RunResult r = simulate(chip, kernels::gdn::layer_core(s, {b}));
  double fwd = 0, bwd = 0;
  for (const auto& [stage, cycles] : stage_cycles(r))
    (is_forward_stage(stage) ? fwd : bwd) += chip.cycles_to_s(cycles);
  return {fwd, bwd};
}

}  // namespace

bool is_inverse_ratio_table(const std::string& file) {
  const YAML::Node root = yaml_load_file(file);
  return root.IsMap() && root["rows"] && root["shape"];
}

InverseRatioTable load_inverse_ratio_table(const std::string& file) {
  const YamlMap top(file, yaml_load_file(file), "", {"source", "chip", "shape", "rows"});
  InverseRatioTable t;
  t.file = file;
  t.source = top.string("source");
  t.chip = top.string("chip");
  const YamlMap s = top.map("shape", {"batch", "seq", "heads", "dk", "dv", "chunk"});
  t.shape.batch = s.positive("batch");
  t.shape.seq = s.positive("seq");
  t.shape.heads = s.positive("heads");
  t.shape.dk = s.positive("dk");
  t.shape.dv = s.positive("dv");
  t.shape.chunk = s.positive("chunk");
  try {
    t.shape.check();
  } catch (const Error& e) {
    s.fail("seq", e.what());
  }
  for (const YamlMap& r : top.list("rows", {"pass", "solve_s", "doubling_s"}, 2)) {
    InverseRatioRow row{r.choice("pass", {"forward", "backward"}), r.positive_number("solve_s"),
                        r.positive_number("doubling_s")};
    t.rows.push_back(row);
  }
  return t;
}

void predict(const ChipSpec& chip, InverseRatioTable& t) {
  const auto solve = passes(chip, t.shape, kernels::gdn::Build::main);
  const auto doubling = passes(chip, t.shape, kernels::gdn::Build::doubling);
  for (InverseRatioRow& r : t.rows)
    r.predicted =
        r.pass == "forward" ? doubling.first / solve.first : doubling.second / solve.second;
}

StepConstantFit fit_row_solve_step(const InverseRatioTable& t, const EngineConstants& e) {
  const auto row = std::find_if(t.rows.begin(), t.rows.end(),
                                [](const InverseRatioRow& r) { return r.pass == "forward"; });
  if (row == t.rows.end())
    throw Error(t.file + ": the xla_row_solve_step_cycles fit needs a forward row");
  StepConstantFit fit{"xla_row_solve_step_cycles", "v6e; scaled per chip", t.file,
                      "forward time ratio"};
  fit.measured = row->measured();
  const ChipSpec base = with_constants(load_chip(t.chip), e);
  auto ratio = [&](double latency) {
    ChipSpec chip = base;
    chip.xla_row_solve_step_cycles = std::llround(latency);
    InverseRatioTable p = t;
    predict(chip, p);
    return std::find_if(p.rows.begin(), p.rows.end(),
                        [](const InverseRatioRow& r) { return r.pass == "forward"; })
        ->predicted;
  };
  // From 1 cycle to ten times an MXU's fill and drain; solve_constant's bisection is geometric.
  solve_constant(fit, 1, 2000, ratio, t.file + ": no row-step latency");
  fit.value = std::round(fit.value);
  fit.predicted = ratio(fit.value);
  return fit;
}

std::string inverse_calibration_markdown(const StepConstantFit& fit, const InverseRatioTable& t) {
  std::string out = fmt::format(
      "## The inversion's chain latency, fitted on C4's forward ratio\n\n"
      "XLA's TPU triangular inversion (`InvertDiagBlocksLowerTriangular`) works one [C, C] block "
      "at a time and walks its C - 1 rows in a dependent chain (docs/kernels/gdn.md). Its "
      "algorithm is not public: `{}` = {:.0f} cycles ({}) is each row step's latency beyond its "
      "vector work, fitted so the doubling build over the main build reproduces the measured "
      "forward ratio of {} ({}; {} evaluations). The backward ratio is the check:\n\n"
      "| pass | with solve_triangular | with the doubling inverse | measured ratio | predicted "
      "ratio | error |\n|---|---|---|---|---|---|\n",
      fit.key, fit.value, fit.chip, std::filesystem::path(t.file).filename().string(), t.source,
      fit.evaluations);
  for (const InverseRatioRow& r : t.rows)
    out += fmt::format("| {} | {:.4g} s | {:.4g} s | {:.3f} | {:.3f} | {:+.1f}% |\n", r.pass,
                       r.solve_s, r.doubling_s, r.measured(), r.predicted, r.error_pct());
  out += fmt::format(
      "\nPredicted at the {} layer shape B {}, T {}, H {}, Dk {}, Dv {}, C {} (measured_runs.md "
      "does not state C4's).\n\n",
      t.chip, t.shape.batch, t.shape.seq, t.shape.heads, t.shape.dk, t.shape.dv, t.shape.chunk);
  return out;
}

}  // namespace tpusim
