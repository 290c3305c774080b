#include <fmt/format.h>
#include <imgui.h>

#include <cmath>

#include "app/report.h"
#include "gui/em.h"
#include "gui/panels.h"
#include "kernels/gdn/layer.h"

namespace tpusim::gui {
namespace {

// Errors within this are shown green in the predicted-against-measured table (the bar the
// calibration rows are held to, issue 4).
constexpr double kCloseErrorPct = 10;

// TensorCore 0's time by cause as one coloured bar, and the shares in words under it.
void stall_bar(const RunResult& r) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float w = ImGui::GetContentRegionAvail().x;
  float x = p.x;
  for (int c = 0; c < kNumCauses; ++c) {
    const float cw =
        w * static_cast<float>(r.time[c]) / static_cast<float>(std::max<int64_t>(1, r.cycles));
    dl->AddRectFilled(ImVec2(x, p.y), ImVec2(x + cw, p.y + 14 * em()),
                      im_colour(cause_colour(static_cast<Cause>(c))));
    x += cw;
  }
  ImGui::Dummy(ImVec2(w, 16 * em()));
  for (int c = 0; c < kNumCauses; ++c)
    if (r.time[c] > 0) {
      ImGui::Text("%s %.1f%%", std::string(name(static_cast<Cause>(c))).c_str(),
                  100.0 * r.time[c] / r.cycles);
      ImGui::SameLine();
    }
  ImGui::NewLine();
}

// Per-kernel VMEM, folded away for programs of many kernels so the step panel stays visible.
void vmem_per_kernel(const RunResult& r) {
  ImGui::SetNextItemOpen(r.kernels.size() <= 4, ImGuiCond_Appearing);
  if (!ImGui::TreeNode("vmem", "VMEM per kernel (%zu kernels)", r.kernels.size())) return;
  for (const KernelStats& k : r.kernels) {
    const float frac =
        static_cast<float>(k.vmem.total_bytes) / static_cast<float>(k.vmem_limit_bytes);
    ImGui::ProgressBar(
        frac, ImVec2(220 * em(), 0),
        (format_bytes(k.vmem.total_bytes) + " / " + format_bytes(k.vmem_limit_bytes)).c_str());
    ImGui::SameLine();
    ImGui::Text("VMEM %s", k.name.c_str());
  }
  ImGui::TreePop();
}

void validation_table(const std::vector<ValidationRow>& rows) {
  if (rows.empty() ||
      !ImGui::BeginTable("validation", 4, ImGuiTableFlags_Borders | ImGuiTableFlags_SizingFixedFit))
    return;
  for (const char* h : {"metric", "predicted", "measured", "error"}) ImGui::TableSetupColumn(h);
  ImGui::TableHeadersRow();
  for (const ValidationRow& v : rows) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(v.metric.c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%.6g", v.predicted);
    ImGui::TableNextColumn();
    ImGui::Text("%.6g", v.measured);
    ImGui::TableNextColumn();
    const bool close = std::abs(v.error_pct()) <= kCloseErrorPct;
    ImGui::TextColored(close ? ImVec4(0.5f, 0.9f, 0.5f, 1) : ImVec4(1, 0.55f, 0.4f, 1), "%+.1f%%",
                       v.error_pct());
  }
  ImGui::EndTable();
}

// What batching buys: per part, the time that does not grow with the batch and what each sample
// adds (the step predicted at B and 2B).
void batch_table(const Outcome& o) {
  if (o.batch.empty()) return;
  ImGui::Text("what batching buys (per step, predicted at batch/chip %lld and %lld):",
              static_cast<long long>(o.batch_per_chip),
              static_cast<long long>(2 * o.batch_per_chip));
  const ImGuiTableFlags flags =
      ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit;
  if (!ImGui::BeginTable("batch split", 4, flags)) return;
  for (const char* h : {"part", "batch-independent", "per sample", "independent share"})
    ImGui::TableSetupColumn(h);
  ImGui::TableHeadersRow();
  for (const BatchSplit& b : o.batch) {
    const double total = b.fixed_s + o.batch_per_chip * b.per_sample_s;
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(b.part.c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%.3f ms", b.fixed_s * 1e3);
    ImGui::TableNextColumn();
    ImGui::Text("%.3f ms", b.per_sample_s * 1e3);
    ImGui::TableNextColumn();
    ImGui::Text("%.1f%%", total > 0 ? 100 * b.fixed_s / total : 0.0);
  }
  ImGui::EndTable();
}

// Two compared runs or steps row by row (stage or part): time, share, and the difference.
void difference_table(const std::vector<StageDifference>& rows, const char* title,
                      const char* what) {
  if (rows.size() < 2 || !ImGui::TreeNode(title)) return;
  const ImGuiTableFlags flags =
      ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit;
  if (ImGui::BeginTable("differences", 6, flags)) {
    for (const char* h : {what, "first ms", "share", "compared ms", "share", "difference ms"})
      ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    for (const StageDifference& d : rows) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(d.stage.c_str());
      const std::pair<const char*, double> cells[] = {{"%.4f", d.first_s * 1e3},
                                                      {"%.1f%%", 100 * d.first_share},
                                                      {"%.4f", d.second_s * 1e3},
                                                      {"%.1f%%", 100 * d.second_share},
                                                      {"%+.4f", d.delta_s * 1e3}};
      for (const auto& [format, v] : cells) {
        ImGui::TableNextColumn();
        ImGui::Text(format, v);
      }
    }
    ImGui::EndTable();
  }
  ImGui::TreePop();
}

// A measured profile against the run: the step's totals, then the ops with the largest absolute
// errors first (app/profile_compare.h), as `tpusim compare` prints them.
void measured_table(const ProfileComparison& c) {
  double measured = 0, predicted = 0;
  for (const OpComparison& op : c.ops) measured += op.measured_s, predicted += op.predicted_s;
  ImGui::SetNextItemOpen(true, ImGuiCond_Appearing);
  if (!ImGui::TreeNode("measured",
                       "measured against predicted per op (%s, per step): matched %.2f "
                       "us against %.2f us; %zu measured only, %zu predicted only",
                       c.device.c_str(), measured * 1e6, predicted * 1e6, c.measured_only.size(),
                       c.predicted_only.size()))
    return;
  const ImGuiTableFlags flags =
      ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit;
  if (ImGui::BeginTable("ops", 6, flags)) {
    for (const char* h : {"op", "class", "per step", "measured us", "predicted us", "error"})
      ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    for (const OpComparison& op : c.ops) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(op.name.c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(op.op_class.c_str());
      ImGui::TableNextColumn();
      ImGui::Text("x%.0f", op.count_per_step);
      ImGui::TableNextColumn();
      ImGui::Text("%.2f", op.measured_s * 1e6);
      ImGui::TableNextColumn();
      ImGui::Text("%.2f", op.predicted_s * 1e6);
      ImGui::TableNextColumn();
      ImGui::Text("%+.1f%%", op.error_pct());
    }
    ImGui::EndTable();
  }
  ImGui::TreePop();
}

// A measured profile against the step by structure (app/profile_structure.h), as `tpusim compare
// SCENARIO PROFILE` prints it.
void structure_table(const StructureComparison& c) {
  ImGui::SetNextItemOpen(true, ImGuiCond_Appearing);
  if (!ImGui::TreeNode("measured step", "measured (%s, %d steps): step %.3f ms, predicted %.3f ms",
                       c.device.c_str(), c.steps, c.measured_step_s * 1e3,
                       c.predicted_step_s * 1e3))
    return;
  const ImGuiTableFlags flags =
      ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit;
  if (ImGui::BeginTable("structure", 4, flags)) {
    for (const char* h : {"per step", "measured ms", "predicted ms", "error"})
      ImGui::TableSetupColumn(h);
    ImGui::TableHeadersRow();
    auto row = [](const StructureRow& r) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(r.name.c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%.3f", r.measured_s * 1e3);
      ImGui::TableNextColumn();
      if (r.predicted_s >= 0) ImGui::Text("%.3f", r.predicted_s * 1e3);
      ImGui::TableNextColumn();
      if (r.predicted_s >= 0 && r.measured_s > 0) ImGui::Text("%+.1f%%", r.error_pct());
    };
    for (const StructureRow& r : c.rows) row(r);
    for (const StructureRow& r : c.measured_only) row(r);
    ImGui::EndTable();
  }
  for (const std::string& n : c.notes) ImGui::TextWrapped("note: %s", n.c_str());
  ImGui::TreePop();
}

void step_totals(const Outcome& o) {
  const StepPrediction& s = *o.step;
  ImGui::Text("%s: step %.4f s, %.1f tokens/s/chip, %.1f TFLOP/s/chip, MFU %.1f%%", o.what.c_str(),
              s.step_time_s, s.tokens_per_s_per_chip, s.tflops_per_s_per_chip, 100 * s.mfu);
  ImGui::ProgressBar(
      static_cast<float>(s.peak_hbm_bytes) / s.hbm_capacity_bytes, ImVec2(300 * em(), 0),
      ("HBM " + format_bytes(s.peak_hbm_bytes) + " / " + format_bytes(s.hbm_capacity_bytes))
          .c_str());
  if (s.host_offload_bytes > 0) {
    ImGui::SameLine();
    ImGui::ProgressBar(static_cast<float>(s.host_offload_bytes) / s.host_capacity_bytes,
                       ImVec2(300 * em(), 0),
                       ("pinned host " + format_bytes(s.host_offload_bytes) + " / " +
                        format_bytes(s.host_capacity_bytes))
                           .c_str());
  }
  if (!s.compiled_verdict.empty()) {
    ImGui::SameLine();
    const std::string text =
        s.memory_source == "compiler"
            ? "the TPU compiler's (tpusim's model: " + format_bytes(s.model_peak_hbm_bytes) + ")"
            : "the TPU compiler's peak: " + s.compiled_verdict;
    ImGui::TextUnformatted(text.c_str());
  }
  ImGui::Text("unit busy: %s", unit_utilisation_text(s).c_str());
  // Two columns, so every row fits the panel at the default window size: the parts and
  // predicted against measured on the left, what batching buys on the right.
  if (!ImGui::BeginTable("step columns", 2, ImGuiTableFlags_SizingStretchProp)) return;
  ImGui::TableNextColumn();
  for (const StepPart& part : s.parts)
    ImGui::Text("%-28s x%-3lld %9.3f ms (+%.3f ms exposed)", part.name.c_str(),
                static_cast<long long>(part.count), part.compute_s * 1e3, part.exposed_s * 1e3);
  validation_table(o.validation);
  ImGui::TableNextColumn();
  if (o.compare_step) {
    const StepPrediction& c = *o.compare_step;
    ImGui::Text("compared with %s: step %.4f s, %.1f tokens/s/chip (%.2fx the first)",
                o.compare_what.c_str(), c.step_time_s, c.tokens_per_s_per_chip,
                c.step_time_s / s.step_time_s);
    ImGui::SetNextItemOpen(true, ImGuiCond_Appearing);
    difference_table(step_part_difference(s, c), "per part (first, compared, difference)", "part");
  }
  if (o.structure) structure_table(*o.structure);
  batch_table(o);
  ImGui::EndTable();
}

}  // namespace

void error_text(const std::string& error) {
  ImGui::PushStyleColor(ImGuiCol_Text, IM_COL32(255, 110, 110, 255));
  ImGui::TextWrapped("error: %s", error.c_str());
  ImGui::PopStyleColor();
}

void run_panel(const Outcome& o) {
  if (!o.error.empty()) return error_text(o.error);
  if (!o.run) return;
  const RunResult& r = o.run->run;
  ImGui::Text("%s on %s: %.4f ms, %.1f TFLOP/s (%.1f%% of peak)", o.what.c_str(), r.chip.c_str(),
              r.time_s * 1e3, r.flops / r.time_s / 1e12, 100 * r.flops / r.time_s / o.peak_flops);
  if (o.compare) {
    const RunResult& c = o.compare->run;
    ImGui::Text("compared with %s: %.4f ms, %.1f TFLOP/s  (%.2fx the first)",
                o.compare->what.c_str(), c.time_s * 1e3, c.flops / c.time_s / 1e12,
                c.time_s / r.time_s);
  }
  if (o.compare)
    difference_table(stage_difference(r, o.compare->run), "per stage (first, compared, difference)",
                     "stage");
  if (o.comparison) measured_table(*o.comparison);
  if (!o.why.empty() && ImGui::TreeNode("why is this slow?")) {
    for (const std::string& line : o.why) ImGui::TextWrapped("- %s", line.c_str());
    ImGui::TreePop();
  }
  stall_bar(r);
  std::string busy = "utilisation:";
  for (size_t u = 0; u < r.units.size(); ++u)
    if (r.unit_busy[u] > 0)
      busy += fmt::format("  {} {:.0f}%", r.units[u].name, 100.0 * r.unit_busy[u] / r.cycles);
  ImGui::TextWrapped("%s", busy.c_str());
  vmem_per_kernel(r);
}

bool step_panel(const std::string& file, const Outcome& o,
                std::optional<kernels::gdn::Build>& step_build) {
  ImGui::Separator();
  ImGui::TextUnformatted(("training step: " + file).c_str());
  // Re-run the step with its GDN layers in another build of the kernel change.
  const std::string preview =
      step_build ? kernels::gdn::name(*step_build) : std::string("(as in the file)");
  bool changed = false;
  ImGui::SetNextItemWidth(200 * em());
  if (ImGui::BeginCombo("GDN build of the step", preview.c_str())) {
    if (ImGui::Selectable("(as in the file)", !step_build)) {
      step_build.reset();
      changed = true;
    }
    for (kernels::gdn::Build b : kernels::gdn::kBuilds)
      if (ImGui::Selectable(kernels::gdn::name(b).c_str(), step_build == b)) {
        step_build = b;
        changed = true;
      }
    ImGui::EndCombo();
  }
  if (!o.error.empty())
    error_text(o.error);
  else if (o.step)
    step_totals(o);
  return changed;
}

}  // namespace tpusim::gui
