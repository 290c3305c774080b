#include "app/dcn_fit.h"

#include <fmt/format.h>

#include <filesystem>

#include "app/scenario.h"
#include "models/chip_loader.h"
#include "sim/error.h"

namespace tpusim {
namespace {

const char* const kOneSlice = "scenarios/calibration/c3/c3_41_v5e_maxtext-16b.yaml";
constexpr int64_t kSlices[] = {2, 4, 8, 16, 32};

std::string file_name(const std::string& f) { return std::filesystem::path(f).filename().string(); }

double predicted_tflops(const std::string& file, double latency, const EngineConstants& e) {
  Scenario s = load_scenario(file);
  s.step.chip = with_constants(s.step.chip, e);
  s.step.chip.dcn_slice_latency_s = latency;
  return predict_step(s.step).tflops_per_s_per_chip;
}

}  // namespace

SliceTable load_slice_table() {
  SliceTable t;
  std::vector<std::string> files{repo_path(kOneSlice)};
  for (int64_t n : kSlices)
    files.push_back(
        repo_path(fmt::format("scenarios/calibration/c5/c5_41_v5e-256x{}_maxtext-16b.yaml", n)));
  for (const std::string& f : files) {
    const Scenario s = load_scenario(f);
    if (!s.measured.count("tflops_per_chip"))
      throw Error(f + ": the DCN latency fit needs a measured tflops_per_chip");
    t.rows.push_back({f, s.step.mesh.data, s.measured.at("tflops_per_chip"), 0});
  }
  return t;
}

void predict(SliceTable& t, double latency, const EngineConstants& e) {
  for (SliceRow& r : t.rows) r.predicted_tflops = predicted_tflops(r.file, latency, e);
}

StepConstantFit fit_dcn_slice_latency(const SliceTable& t, const EngineConstants& e) {
  const SliceRow &one = t.rows.front(), &most = t.rows.back();
  StepConstantFit fit{"dcn_slice_latency_s", "every chip", most.file,
                      fmt::format("tflops_per_chip over {}'s", file_name(one.file))};
  fit.measured = most.measured_tflops / one.measured_tflops;
  const double single = predicted_tflops(one.file, 0, e);  // no slices to wait for
  // From a microsecond (the network's own latency) to a second per ring step.
  solve_constant(
      fit, 1e-6, 1, [&](double l) { return predicted_tflops(most.file, l, e) / single; },
      most.file + ": no DCN slice latency");
  return fit;
}

std::string dcn_calibration_markdown(const StepConstantFit& fit, const SliceTable& t) {
  std::string out = "## The slices' latency over DCN, fitted on C5 #41's drop over 32 slices\n\n";
  out += fmt::format(
      "MaxText 16B as C3 #41, on 1 to 32 v5e-256 slices (measured_runs.md C5). Each slice "
      "reduces every layer's gradient over the others behind the next layer's backward, and the "
      "last layer's and the embedding's after the loop (docs/compiler_import.md, \"Data "
      "parallelism over DCN\"); at the published 25 Gbps per chip that costs a few milliseconds "
      "a step and explains none of the measured drop. `{}` = {:.4g} ms is what each step of a "
      "ring over the slices adds beyond the bandwidth (2 (N - 1) steps for an all-reduce), "
      "fitted so that the {}-slice run's TFLOP/s over the single slice's meets the measured "
      "ratio (measured {:.4f}, predicted {:.4f}; {} evaluations). It has no public source. At "
      "milliseconds it is far above a network's latency, so it stands for whatever the step "
      "waits on per slice (the megascale runtime's host transfers, slices arriving late), not for "
      "the wire. The other slice counts check it:\n\n",
      fit.key, fit.value * 1e3, t.rows.back().slices, fit.measured, fit.predicted, fit.evaluations);
  out +=
      "| slices | scenario | measured TFLOP/s/chip | predicted | error | drop from 1 slice, "
      "measured | predicted |\n|---|---|---|---|---|---|---|\n";
  const SliceRow& one = t.rows.front();
  for (const SliceRow& r : t.rows)
    out += fmt::format("| {} | `{}` | {:.4g} | {:.4g} | {:+.1f}% | {:.1f}% | {:.1f}% |\n", r.slices,
                       file_name(r.file), r.measured_tflops, r.predicted_tflops, r.error_pct(),
                       100 * (1 - r.measured_tflops / one.measured_tflops),
                       100 * (1 - r.predicted_tflops / one.predicted_tflops));
  return out + "\n";
}

}  // namespace tpusim
