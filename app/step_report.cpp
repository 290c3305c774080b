#include "app/step_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "app/version.h"
#include "sim/ir/validate.h"

namespace tpusim {

std::map<std::string, double> unit_utilisation(const StepPrediction& p) {
  std::map<std::string, double> u;
  double collectives = 0;
  for (const StepPart& part : p.parts) {
    for (const auto& [group, busy] : part.unit_busy_s) u[group] += part.count * busy;
    collectives += part.count * part.collective_s;
  }
  u["collective links"] = collectives;
  for (auto& [group, busy] : u) busy /= p.step_time_s;
  return u;
}

std::vector<StageDifference> step_part_difference(const StepPrediction& first,
                                                  const StepPrediction& second) {
  auto seconds = [](const StepPrediction& p) {
    std::vector<std::pair<std::string, double>> out;
    for (const StepPart& part : p.parts)
      out.emplace_back(part.name, part.count * (part.compute_s + part.exposed_s));
    return out;
  };
  return side_by_side(seconds(first), first.step_time_s, seconds(second), second.step_time_s,
                      "step");
}

std::string unit_utilisation_text(const StepPrediction& p) {
  const auto shares = unit_utilisation(p);
  std::string out;
  for (const char* group : {"mxu", "vpu", "eup", "hbm", "dma", "scalar", "collective links"})
    if (shares.count(group) && shares.at(group) > 0)
      out += fmt::format("{}{} {:.1f}%", out.empty() ? "" : "  ", group, 100 * shares.at(group));
  return out;
}

namespace {
std::string memory_text(const StepPrediction& p) {
  std::string out = "memory:";
  for (const MemoryItem& m : p.memory)
    out += fmt::format("  {} {}{};", m.what, format_bytes(m.bytes),
                       m.on_device ? "" : " (offloaded to host)");
  return out + "\n";
}
// The peak HBM line, and the TPU compiler's beside it (or in its place with `memory: compiler`).
std::string peak_hbm_text(const StepPrediction& p) {
  const std::string capacity = format_bytes(p.hbm_capacity_bytes);
  if (p.memory_source == "compiler" && !p.compiled_fits)
    return fmt::format(
        "peak HBM: the TPU compiler says it {} (memory: compiler; tpusim's model: {} "
        "of {})\n",
        p.compiled_verdict, format_bytes(p.model_peak_hbm_bytes), capacity);
  std::string out =
      fmt::format("peak HBM {} of {} ({})\n", format_bytes(p.peak_hbm_bytes), capacity,
                  p.fits_hbm ? "fits"
                             : fmt::format("does NOT fit: over by {}",
                                           format_bytes(p.peak_hbm_bytes - p.hbm_capacity_bytes)));
  if (p.host_offload_bytes > 0)
    out += fmt::format(
        "pinned host memory (remat offload) {} of {} ({})\n", format_bytes(p.host_offload_bytes),
        format_bytes(p.host_capacity_bytes),
        p.fits_host ? "fits"
                    : fmt::format("does NOT fit: over by {}",
                                  format_bytes(p.host_offload_bytes - p.host_capacity_bytes)));
  if (p.memory_source == "compiler")
    out += fmt::format("  (the TPU compiler's peak, memory: compiler; tpusim's model: {})\n",
                       format_bytes(p.model_peak_hbm_bytes));
  else if (!p.compiled_verdict.empty())
    out += fmt::format("  the TPU compiler's peak for the same step: {}\n", p.compiled_verdict);
  // What the compiler's peak is made of: what is live in HBM at it when the compile recorded its
  // live ranges, else the four largest slots.
  const size_t live = std::min<size_t>(6, p.compiled_peak_live.size());
  const size_t shown = live > 0 ? 0 : std::min<size_t>(4, p.compiled_largest_buffers.size());
  if (live > 0)
    out += fmt::format(
        "  live in HBM at its peak (XLA's buffers over their live ranges, at {}): {}, of which the "
        "step's parameters (weights, optimizer state) {}; the largest others: {}\n",
        p.compiled_peak_live_at, format_bytes(p.compiled_peak_live_bytes),
        format_bytes(p.compiled_peak_live_parameter_bytes),
        fmt::join(p.compiled_peak_live.begin(), p.compiled_peak_live.begin() + live, "; "));
  if (shown > 0)
    out += fmt::format(
        "  its largest HBM buffers (XLA's buffer assignment; values sharing a slot in turn): "
        "{}\n",
        fmt::join(p.compiled_largest_buffers.begin(), p.compiled_largest_buffers.begin() + shown,
                  "; "));
  return out;
}

}  // namespace

std::string step_summary_text(const Scenario& s, const StepPrediction& p) {
  const StepConfig& c = s.step;
  std::string out = fmt::format(
      "scenario {}: {} on {} x {} (mesh data {} fsdp {} tensor {}{}{}), seq {}, batch/chip {}, "
      "remat {}",
      s.name, c.model.name, c.chips_per_slice * c.mesh.data, s.chip_name, c.mesh.data, c.mesh.fsdp,
      c.mesh.tensor, c.mesh.context > 1 ? fmt::format(" context {}", c.mesh.context) : "",
      c.mesh.expert > 1 ? fmt::format(" expert {}", c.mesh.expert) : "", c.seq, c.batch_per_chip,
      c.remat.describe());
  if (c.model.gdn_layers() > 0)
    out += fmt::format(", GDN build {} (C {})", kernels::gdn::name(c.gdn.build), c.gdn_chunk);
  out += "\n";
  if (p.timed)
    out += fmt::format(
        "step time {:.4f} s   tokens/s/chip {:.1f}   TFLOP/s/chip {:.1f}   MFU {:.1f}%\n",
        p.step_time_s, p.tokens_per_s_per_chip, p.tflops_per_s_per_chip, 100 * p.mfu);
  else
    out += fmt::format("step not timed: it does not fit {} (--simulate-anyway times it)\n",
                       p.fits_hbm ? "its pinned host memory" : "HBM");
  out += peak_hbm_text(p);
  if (p.compiled_program_s >= 0)
    out += fmt::format(
        "  the compiled step's own program (its optimized HLO, {}) simulated: {:.4f} s\n",
        s.compiled->libtpu_init_args.empty() ? "XLA's default flags"
                                             : "the LIBTPU_INIT_ARGS its compile recorded",
        p.compiled_program_s);
  if (!p.timed) return out + memory_text(p);
  out += "by part (per instance; how many the step runs):\n";
  for (const StepPart& part : p.parts)
    out += fmt::format(
        "  {:<42} {:>3} x  compute {:9.3f} ms  exposed collectives {:8.3f} ms  -> {:6.1f}% of "
        "the step\n",
        part.name, part.count, part.compute_s * 1e3, part.exposed_s * 1e3,
        100 * part.count * (part.compute_s + part.exposed_s) / p.step_time_s);
  std::array<double, kNumCauses> causes{};
  for (const StepPart& part : p.parts)
    for (int i = 0; i < kNumCauses; ++i) causes[i] += part.count * part.time_s[i];
  out += "TensorCore time by cause:";
  for (int i = 0; i < kNumCauses; ++i)
    if (causes[i] > 0)
      out +=
          fmt::format("  {} {:.1f}%", name(static_cast<Cause>(i)), 100 * causes[i] / p.step_time_s);
  double exposed = 0;
  for (const StepPart& part : p.parts) exposed += part.count * part.exposed_s;
  out += fmt::format("  exposed collectives {:.1f}%\n", 100 * exposed / p.step_time_s);
  out += "unit busy (mean over each kind's units):  " + unit_utilisation_text(p) + "\n";
  out += memory_text(p);
  for (const ValidationRow& r : validation_rows(s, p))
    out += fmt::format("measured {} = {:.6g} ({}), predicted {:.6g}: {:+.1f}%\n", r.metric,
                       r.measured, r.source, r.predicted, r.error_pct());
  if (s.measured_attention == AttentionCount::full)
    out +=
        "(the measured FLOP rates count attention in full, as MaxText did before mid-2025; "
        "so do the predictions above)\n";
  return out;
}

nlohmann::json step_json(const Scenario& s, const StepPrediction& p) {
  using nlohmann::json;
  json j;
  j["tool"] = tool_json();
  j["scenario"] = s.name;
  j["file"] = s.file;
  const StepConfig& c = s.step;
  j["config"] = {{"chip", s.chip_name},
                 {"model", c.model.name},
                 {"chips_per_slice", c.chips_per_slice},
                 {"slices", c.mesh.data},
                 {"fsdp", c.mesh.fsdp},
                 {"tensor", c.mesh.tensor},
                 {"context", c.mesh.context},
                 {"seq", c.seq},
                 {"batch_per_chip", c.batch_per_chip},
                 {"remat", c.remat.describe()},
                 {"weight_dtype", std::string(name(c.weight_dtype))},
                 {"vocab_tiles", c.vocab_tiles},
                 {"gdn_build", kernels::gdn::name(c.gdn.build)},
                 {"gdn_chunk", c.gdn_chunk},
                 {"attention_block", c.attention_block}};
  j["timed"] = p.timed;
  const auto timed = [&](double v) { return p.timed ? json(v) : json(nullptr); };
  j["step_time_s"] = timed(p.step_time_s);
  j["tokens_per_s_per_chip"] = timed(p.tokens_per_s_per_chip);
  j["tflops_per_chip"] = timed(p.tflops_per_s_per_chip);
  j["model_flops_per_chip"] = p.model_flops_per_chip;
  j["mfu"] = timed(p.mfu);
  j["peak_hbm_bytes"] = p.peak_hbm_bytes;
  j["hbm_capacity_bytes"] = p.hbm_capacity_bytes;
  j["fits_hbm"] = p.fits_hbm;
  j["host_offload_bytes"] = p.host_offload_bytes;
  j["host_capacity_bytes"] = p.host_capacity_bytes;
  j["fits_host"] = p.fits_host;
  j["backward_gathers_prefetched"] = p.backward_gathers_prefetched;
  j["memory_source"] = p.memory_source;
  if (!p.compiled_verdict.empty()) {
    j["compiled_peak_hbm_bytes"] =
        p.compiled_peak_hbm_bytes >= 0 ? json(p.compiled_peak_hbm_bytes) : json(nullptr);
    j["compiled_fits"] = p.compiled_fits;
    j["compiled_verdict"] = p.compiled_verdict;
    if (!p.compiled_largest_buffers.empty())
      j["compiled_largest_buffers"] = p.compiled_largest_buffers;
    if (!p.compiled_peak_live.empty()) {
      j["compiled_peak_live"] = p.compiled_peak_live;
      j["compiled_peak_live_bytes"] = p.compiled_peak_live_bytes;
      j["compiled_peak_live_parameter_bytes"] = p.compiled_peak_live_parameter_bytes;
      j["compiled_peak_live_at"] = p.compiled_peak_live_at;
    }
  }
  if (p.compiled_program_s >= 0) j["compiled_program_s"] = p.compiled_program_s;
  json parts = json::array();
  for (const StepPart& part : p.parts) {
    json causes = json::object();
    for (int i = 0; i < kNumCauses; ++i)
      causes[std::string(name(static_cast<Cause>(i)))] = part.time_s[i];
    parts.push_back({{"name", part.name},
                     {"count", part.count},
                     {"compute_s", part.compute_s},
                     {"collective_s", part.collective_s},
                     {"exposed_collective_s", part.exposed_s},
                     {"time_by_cause_s", causes},
                     {"unit_busy_s", part.unit_busy_s}});
  }
  j["parts"] = parts;
  j["unit_utilization"] = unit_utilisation(p);
  json mem = json::array();
  for (const MemoryItem& m : p.memory)
    mem.push_back({{"what", m.what}, {"bytes", m.bytes}, {"on_device", m.on_device}});
  j["memory"] = mem;
  if (!s.measured.empty()) {
    json m = json::object();
    for (const auto& [k, v] : s.measured) m[k] = v;
    m["source"] = s.measured_source;
    j["measured"] = m;
  }
  return j;
}

namespace {
// A log that counted attention in full reports FLOP rates on that count: predictions use it too.
double flop_count_ratio(const Scenario& s) {
  const StepConfig& c = s.step;
  return maxtext_flops_per_device(c.model, c.batch_per_chip, c.seq, s.measured_attention) /
         maxtext_flops_per_device(c.model, c.batch_per_chip, c.seq);
}
}  // namespace

std::optional<double> measured_step_time_s(const Scenario& s, const StepPrediction& p) {
  if (s.measured.count("step_time_s")) return s.measured.at("step_time_s");
  if (!s.measured.count("tflops_per_chip")) return std::nullopt;
  return p.model_flops_per_chip * flop_count_ratio(s) / (s.measured.at("tflops_per_chip") * 1e12);
}

std::vector<ValidationRow> validation_rows(const Scenario& s, const StepPrediction& p) {
  const StepConfig& c = s.step;
  const double count_ratio = flop_count_ratio(s);
  std::vector<ValidationRow> rows;
  for (const std::string& m : kMetrics)
    if (s.measured.count(m)) {
      const bool rate = m == "tflops_per_chip" || m == "mfu";
      rows.push_back({s.name, m, s.measured_source, metric(p, m) * (rate ? count_ratio : 1),
                      s.measured.at(m), c.chip.name});
    }
  return rows;
}

ErrorStats error_stats(const std::vector<ValidationRow>& rows) {
  std::vector<double> errors;
  for (const ValidationRow& r : rows) errors.push_back(std::abs(r.error_pct()));
  if (errors.empty()) return {};
  std::sort(errors.begin(), errors.end());
  const size_t n = errors.size();
  return {n % 2 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2, errors.back(), n};
}

namespace {

// Text from an input file in a Markdown table cell: '|' and line breaks would end the cell.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n' || c == '\r')
      out += ' ';
    else
      out += c;
  }
  return out;
}

// A fit verdict: HBM first, then the pinned host memory remat offloads into.
std::string fits_cell(bool hbm, bool host) { return !hbm ? "no" : host ? "yes" : "no (host)"; }

}  // namespace

namespace {

// tpusim's peak HBM against the TPU compiler's for the scenarios compiled
// (scripts/compile_scenarios.sh), with both fit verdicts.
std::string compiled_memory_markdown(const std::vector<std::pair<Scenario, StepPrediction>>& all) {
  if (all.empty()) return "";
  std::string out =
      "\n## Peak HBM: tpusim's memory model against the TPU compiler\n\n"
      "Each scenario's step as MaxText runs it (`tpusim export maxtext`), compiled for its "
      "topology by `python -m tpusim_jax compile-step` (scripts/compile_scenarios.sh): XLA's own "
      "buffer assignment per chip, and what of it is live in HBM at the step's peak when the "
      "compile recorded its live ranges (docs/compiler_import.md). Neither is a measurement.\n\n"
      "| scenario | tpusim's peak | fits | compiler's peak | fits | difference | live at its peak "
      "| difference | compiled for |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& [s, p] : all) {
    const int64_t model = p.memory_source == "compiler" ? p.model_peak_hbm_bytes : p.peak_hbm_bytes;
    const bool model_fits = model <= p.hbm_capacity_bytes;
    auto diff = [&](int64_t compiled) {
      return compiled > 0
                 ? fmt::format(
                       "{:+.0f}%",
                       100.0 * (static_cast<double>(model) / static_cast<double>(compiled) - 1))
                 : "-";
    };
    const int64_t live = p.compiled_peak_live_bytes;
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", cell(s.name),
                       format_bytes(model), fits_cell(model_fits, p.fits_host),
                       cell(p.compiled_verdict), p.compiled_fits ? "yes" : "no",
                       diff(p.compiled_peak_hbm_bytes), live > 0 ? format_bytes(live) : "-",
                       diff(live), s.compiled->topology);
  }
  return out;
}

// The scenarios whose compiled step holds its optimized HLO: that program simulated beside the
// step model and the measured step.
std::string compiled_program_markdown(const std::vector<std::pair<Scenario, StepPrediction>>& all) {
  std::string out;
  for (const auto& [s, p] : all) {
    if (p.compiled_program_s < 0) continue;
    if (out.empty())
      out =
          "\n## The compiled programs simulated\n\n"
          "The step as the TPU compiler schedules it with the XLA flags of the run's MaxText "
          "script (scripts/compile_steps.sh; for C1, C5 #11 and #14, whose runs' flags are not "
          "public, MaxText's own script for the chip and model family): its optimized HLO "
          "imported (`tpusim run --hlo`) "
          "and simulated, beside tpusim's step model. A measured step time given only as TFLOP/s "
          "is "
          "MaxText's FLOP count over it.\n\n"
          "| scenario | measured step | step model | error | compiled program | error |\n"
          "|---|---|---|---|---|---|\n";
    const std::optional<double> measured = measured_step_time_s(s, p);
    auto error = [&](double predicted) {
      return measured ? fmt::format("{:+.1f}%", 100 * (predicted / *measured - 1)) : "-";
    };
    out += fmt::format("| {} | {} | {:.3f} s | {} | {:.3f} s | {} |\n", cell(s.name),
                       measured ? fmt::format("{:.3f} s", *measured) : "-", p.step_time_s,
                       error(p.step_time_s), p.compiled_program_s, error(p.compiled_program_s));
  }
  return out;
}

}  // namespace

std::string validation_markdown(const std::vector<ValidationRow>& rows,
                                const std::vector<std::pair<Scenario, StepPrediction>>& blind,
                                const std::vector<std::pair<Scenario, StepPrediction>>& compiled) {
  std::string out =
      "# Validation\n\n<!-- Generated by `build/tpusim validate --write`; do not edit by hand. "
      "-->\n\n";
  out +=
      "Predicted against measured for every scenario with measured values "
      "(scenarios/calibration/).\n\n"
      "![Every row predicted against measured, log axes, the +-10% band dashed, one colour per "
      "chip](img/validation.svg)\n\n";
  out +=
      "| scenario | metric | predicted | measured | error | source |\n|---|---|---|---|---|---|\n";
  for (const ValidationRow& r : rows)
    out += fmt::format("| {} | {} | {:.6g} | {:.6g} | {:+.1f}% | {} |\n", cell(r.scenario),
                       r.metric, r.predicted, r.measured, r.error_pct(), cell(r.source));
  if (const ErrorStats e = error_stats(rows); e.rows > 0)
    out += fmt::format("\nMedian absolute error {:.1f}%, maximum {:.1f}% over {} rows.\n",
                       e.median_pct, e.max_pct, e.rows);
  if (!blind.empty()) {
    out += "\n## Blind configurations (predictions only; measured results are withheld)\n\n";
    out +=
        "| scenario | step time | tokens/s/chip | TFLOP/s/chip | MFU | peak HBM | fits | "
        "compiler's peak |\n|---|---|---|---|---|---|---|---|\n";
    for (const auto& [s, p] : blind)
      out += fmt::format("| {} | {:.4f} s | {:.1f} | {:.1f} | {:.1f}% | {} | {} | {} |\n",
                         cell(s.name), p.step_time_s, p.tokens_per_s_per_chip,
                         p.tflops_per_s_per_chip, 100 * p.mfu, format_bytes(p.peak_hbm_bytes),
                         fits_cell(p.fits_hbm, p.fits_host),
                         p.compiled_verdict.empty() ? "-" : cell(p.compiled_verdict));
  }
  return out + compiled_program_markdown(compiled) + compiled_memory_markdown(compiled);
}

std::string batch_split_text(const StepConfig& c, const std::vector<BatchSplit>& split) {
  std::string out = fmt::format(
      "what batching buys (predicted at batch/chip {} and {}; per step, all instances):\n",
      c.batch_per_chip, 2 * c.batch_per_chip);
  for (const BatchSplit& b : split) {
    const double total = b.fixed_s + c.batch_per_chip * b.per_sample_s;
    out += fmt::format(
        "  {:<42} batch-independent {:9.3f} ms  per sample {:9.3f} ms  -> {:5.1f}% "
        "independent\n",
        b.part, b.fixed_s * 1e3, b.per_sample_s * 1e3, total > 0 ? 100 * b.fixed_s / total : 0.0);
  }
  return out;
}

nlohmann::json batch_split_json(const StepConfig& c, const std::vector<BatchSplit>& split) {
  nlohmann::json j = {{"batch_per_chip", c.batch_per_chip}, {"parts", nlohmann::json::array()}};
  for (const BatchSplit& b : split)
    j["parts"].push_back(
        {{"part", b.part}, {"batch_independent_s", b.fixed_s}, {"per_sample_s", b.per_sample_s}});
  return j;
}

}  // namespace tpusim
