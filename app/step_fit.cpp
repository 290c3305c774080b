#include "app/step_fit.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>

#include "app/scenario.h"
#include "sim/error.h"

namespace tpusim {
namespace {

Scenario with_engine(Scenario s, const EngineConstants& e) {
  s.step.chip = with_constants(s.step.chip, e);
  return s;
}

double predicted_step(Scenario s, double scale) {
  s.step.chip.vector_rate_scale = scale;
  return predict_step(s.step).step_time_s;
}

// The double nearest the four-digit decimal, so the value written to a chip file (as its shortest
// exact text) reads back identical.
double four_digits(double x) {
  const int e = static_cast<int>(std::floor(std::log10(x))) - 3;
  const double digits = std::round(x / std::pow(10.0, e));
  return e < 0 ? digits / std::pow(10.0, -e) : digits * std::pow(10.0, e);
}

}  // namespace

void solve_constant(StepConstantFit& fit, double lo, double hi,
                    const std::function<double(double)>& predicted, const std::string& none) {
  const double at_lo = predicted(lo), at_hi = predicted(hi);
  fit.evaluations = 2;
  if ((at_lo - fit.measured) * (at_hi - fit.measured) > 0)
    throw Error(fmt::format("{} in [{}, {}] meets the measured {} ({:.4g}; {:.4g} .. {:.4g})", none,
                            lo, hi, fit.metric, fit.measured, at_lo, at_hi));
  const bool rising = at_hi > at_lo;
  while (hi / lo > 1 + 1e-5) {
    const double mid = std::sqrt(lo * hi);
    ((predicted(mid) < fit.measured) == rising ? lo : hi) = mid;
    ++fit.evaluations;
  }
  fit.value = four_digits(std::sqrt(lo * hi));
  fit.predicted = predicted(fit.value);
  ++fit.evaluations;
}

ChipSpec with_constants(ChipSpec chip, const EngineConstants& e) {
  chip = with_constants(with_constants(chip, e.matmul), e.collectives);
  chip.mxu_fill_drain_per_dim = e.mxu_fill_drain_per_dim;
  chip.mxu_fill_drain_cycles = chip.fill_drain_cycles_from_dim();
  chip.xla_row_solve_step_cycles = e.xla_row_solve_step_cycles;
  return chip;
}

EngineConstants recorded_engine_constants(const ChipSpec& chip) {
  EngineConstants e;
  e.matmul.grid_step_overhead_cycles = chip.grid_step_overhead_cycles;
  e.matmul.dma_latency_cycles = chip.dma_latency_cycles;
  e.matmul.host_dispatch_s = chip.host_dispatch_s;
  e.collectives = {chip.ici_efficiency, chip.ici_hop_latency_s};
  e.mxu_fill_drain_per_dim = chip.mxu_fill_drain_per_dim;
  e.xla_row_solve_step_cycles = chip.xla_row_solve_step_cycles;
  return e;
}

StepConstantFit fit_vector_rate_scale(const std::string& file, const EngineConstants& e) {
  const Scenario s = with_engine(load_scenario(file), e);
  if (!s.measured.count("step_time_s"))
    throw Error(file + ": the vector_rate_scale fit needs a measured step_time_s");
  StepConstantFit fit{"vector_rate_scale", s.chip_name, file, "step_time_s"};
  fit.measured = s.measured.at("step_time_s");
  // Scales of the v4/v5 vector rates worth considering.
  solve_constant(
      fit, 0.25, 8, [&](double scale) { return predicted_step(s, scale); },
      file + ": no vector_rate_scale");
  return fit;
}

StepConstantFit fit_mxu_fill_drain(const std::string& scan_file, const std::string& heads_file,
                                   const EngineConstants& e) {
  const Scenario scan = load_scenario(scan_file), heads = load_scenario(heads_file);
  for (const Scenario* s : {&scan, &heads})
    if (!s->measured.count("step_time_s"))
      throw Error(s->file + ": the fill/drain fit needs a measured step_time_s");
  StepConstantFit fit{
      "mxu_fill_drain_per_dim", "every chip", scan_file,
      "step_time_s difference to " + std::filesystem::path(heads_file).filename().string()};
  fit.measured = scan.measured.at("step_time_s") - heads.measured.at("step_time_s");
  auto saving = [&](double f) {
    EngineConstants with = e;
    with.mxu_fill_drain_per_dim = f;
    return predict_step(with_engine(scan, with).step).step_time_s -
           predict_step(with_engine(heads, with).step).step_time_s;
  };
  // Between a quarter and four times the array dimension.
  solve_constant(fit, 0.25, 4, saving, scan_file + ": no fill/drain latency (x mxu_dim)");
  return fit;
}

std::string step_calibration_markdown(const StepConstantFit& fill_drain,
                                      const StepConstantFit& vector_scale, const EngineConstants& e,
                                      const std::string& check_file) {
  Scenario check = with_engine(load_scenario(check_file), e);
  check.step.chip.vector_rate_scale = vector_scale.value;
  // The array width of the chip the latency was fitted on (C1: v5e).
  const int mxu_dim = load_scenario(fill_drain.scenario_file).step.chip.mxu_dim;
  const StepPrediction p = predict_step(check.step);
  auto file = [](const std::string& f) { return std::filesystem::path(f).filename().string(); };
  std::string out = "## Whole-step constants, fitted on measured training steps\n\n";
  out +=
      "The step model adds these two and the cross-lane latency above: the three calibrated "
      "constants issue 14 allows it. The DCN slices' latency below is the first of issue 15's "
      "three. docs/validation.md\nshows every calibration row against the model with them.\n\n";
  out += "| constant | chip | fitted value | fitted on | meaning |\n|---|---|---|---|---|\n";
  out += fmt::format(
      "| `{}` | {} | {:.4g} ({} cycles on a {}-wide MXU) | `{}` {} (measured {:.4g} s, "
      "predicted {:.4g} s; {} evaluations) | MXU result latency, from a dot's last row in to its "
      "last result out, in units of the array dimension (it was assumed 2) |\n",
      fill_drain.key, fill_drain.chip, fill_drain.value,
      static_cast<int64_t>(fill_drain.value * mxu_dim + 0.5), mxu_dim,
      file(fill_drain.scenario_file), fill_drain.metric, fill_drain.measured, fill_drain.predicted,
      fill_drain.evaluations);
  out += fmt::format(
      "| `{}` | {} | {:.4g} | `{}` {} (measured {:.4g}, predicted {:.4g}; {} evaluations) | "
      "the chip's VPU and EUP throughput per cycle relative to the v4/v5 figures its "
      "`vpu_*` rates come from |\n\n",
      vector_scale.key, vector_scale.chip, vector_scale.value, file(vector_scale.scenario_file),
      vector_scale.metric, vector_scale.measured, vector_scale.predicted, vector_scale.evaluations);
  out +=
      "The head-batching saving is 1.4% of C1's step; how much of it is run-to-run noise is not "
      "published.\n\n";
  out += fmt::format(
      "Check on the same chip as the vector scale, not fitted on: `{}` step time measured {:.4g} "
      "s, predicted {:.4g} s ({:+.1f}%).\n\n",
      file(check_file), check.measured.at("step_time_s"), p.step_time_s,
      100 * (p.step_time_s - check.measured.at("step_time_s")) / check.measured.at("step_time_s"));
  return out;
}

CalibratedValue calibrated_value(const StepConstantFit& fit, const std::string& how) {
  return {fit.key, fit.value, false,
          fmt::format("fitted by `tpusim calibrate` on {} (measured {:.4g}, predicted {:.4g})", how,
                      fit.measured, fit.predicted)};
}

}  // namespace tpusim
